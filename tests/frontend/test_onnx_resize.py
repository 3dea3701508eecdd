"""ONNX Resize and Upsample: scales, sizes and roi known at import, compiled to C.

ONNX's node cases feed scales/sizes/roi as graph inputs (values known only at run time,
which this converter refuses); here the same cases run with those inputs made initializers,
so every mode, coordinate mode and rounding the suite covers is checked, compiled, against
the suite's own expected outputs.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx.backend.test.case.node import collect_testcases

import fusionlang
import fusionlang.onnx_backend as backend
from fusionlang.cli import main
from fusionlang.errors import ModelError, ShapeError, UnsupportedOpError
from fusionlang.frontend import from_onnx
from onnx_cases import make_model, random_array, run_onnxruntime

NODE_CASES = {case.name: case for case in collect_testcases(None)
              if case.name.startswith(("test_resize", "test_upsample"))}


def with_constant_parameters(model: onnx.ModelProto, arrays: list) -> onnx.ModelProto:
    """The model with every input but the first (scales, sizes, roi) an initializer."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    for info, array in list(zip(graph.input, arrays))[1:]:
        graph.initializer.append(numpy_helper.from_array(np.asarray(array), info.name))
    data = onnx.ValueInfoProto.FromString(graph.input[0].SerializeToString())
    del graph.input[:]
    graph.input.append(data)
    return model


def test_the_node_cases_are_found():
    assert len(NODE_CASES) >= 40
    assert sum("antialias" in name for name in NODE_CASES) == 4


@pytest.mark.parametrize("name", sorted(NODE_CASES))
def test_node_case_with_constant_parameters_compiles_to_c(name):
    case = NODE_CASES[name]
    inputs, expected = case.data_sets[0]
    model = with_constant_parameters(case.model, inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an interpreter fallback is a failure here
        rep = backend.prepare(model)
    assert rep.fallback is None
    got = rep.run([inputs[0]])[0]
    np.testing.assert_allclose(got, expected[0], rtol=case.rtol, atol=case.atol)


def test_antialias_with_nearest_is_refused():
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], name="aa", mode="nearest", antialias=1)
    model = make_model([node], {"x": [1, 1, 4, 4]}, {"y": None}, 19, {"scales": np.array([1, 1, 0.5, 0.5], np.float32)})
    with pytest.raises(ShapeError, match=r"^node 'aa' \(resize\): antialias applies to linear and cubic modes, "
                                         r"not nearest$"):
        from_onnx(model)


def resize_model(path, opset: int = 19, **attrs) -> str:
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], name="up", **attrs)
    model = make_model([node], {"x": [1, 1, 2, 2], "scales": [4]}, {"y": None}, opset)
    onnx.save(model, str(path))
    return str(path)


def test_scales_fed_at_run_time_without_a_value_are_refused_in_one_line(tmp_path, capsys):
    status = main(["run", resize_model(tmp_path / "m.onnx"), "--random-inputs", "0"])
    err = capsys.readouterr().err
    assert status == 2
    assert err.strip() == ("fusionlang: error: node 'up' (Resize): input 2 (scales) comes from graph input "
                           "'scales', whose value only a run knows (fusionlang compiles it as a constant): give it "
                           "with constant_inputs={'scales': array} in fusionlang.from_onnx, run the model through "
                           "fusionlang.Specializer (as the ONNX backend does), or "
                           "`fusionlang run MODEL --input scales=FILE.npy`")


def test_scales_and_sizes_together_are_refused():
    node = helper.make_node("Resize", ["x", "", "scales", "sizes"], ["y"], name="both")
    model = make_model([node], {"x": [1, 1, 2, 2]}, {"y": None}, 19,
                       {"scales": np.array([1, 1, 2, 2], np.float32), "sizes": np.array([1, 1, 4, 4], np.int64)})
    with pytest.raises(ModelError, match=r"^node 'both' \(Resize\): scales and sizes are both given; only one may be$"):
        from_onnx(model)


def test_an_unknown_aspect_ratio_policy_is_refused():
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], name="keep", keep_aspect_ratio_policy="fit")
    model = make_model([node], {"x": [1, 1, 2, 2]}, {"y": None}, 19, {"sizes": np.array([1, 1, 4, 3], np.int64)})
    with pytest.raises(ModelError, match=r"keep_aspect_ratio_policy='fit' should be stretch, not_larger or "
                                         r"not_smaller$"):
        from_onnx(model)


def test_an_unknown_mode_is_refused():
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], name="m", mode="bilinear")
    model = make_model([node], {"x": [1, 1, 2, 2]}, {"y": None}, 19, {"scales": np.array([1, 1, 2, 2], np.float32)})
    with pytest.raises(ShapeError, match=r"^node 'm' \(resize\): mode='bilinear' should be one of nearest, linear, "
                                         r"cubic$"):
        from_onnx(model)


def compiled(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return backend.prepare(model).run([x])[0]


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("opset", [7, 9, 10])
def test_legacy_forms_match_onnxruntime(opset, mode):
    # Upsample (opset 7: scales attribute; 9: scales input) and Resize-10 read input i / scale
    scales = np.array([1, 1, 2, 3], np.float32)
    op_type = "Resize" if opset == 10 else "Upsample"
    if opset == 7:
        node = helper.make_node(op_type, ["x"], ["y"], mode=mode, scales=scales.tolist())
        inits = {}
    else:
        node = helper.make_node(op_type, ["x", "scales"], ["y"], mode=mode)
        inits = {"scales": scales}
    model = make_model([node], {"x": [1, 2, 3, 4]}, {"y": [1, 2, 6, 12]}, opset, inits)
    x = random_array((1, 2, 3, 4))
    np.testing.assert_allclose(compiled(model, x), run_onnxruntime(model, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_legacy_nearest_downsampling_is_refused():
    node = helper.make_node("Upsample", ["x", "scales"], ["y"], name="down", mode="nearest")
    model = make_model([node], {"x": [1, 1, 4, 4]}, {"y": None}, 9, {"scales": np.array([1, 1, 0.5, 1], np.float32)})
    with pytest.raises(UnsupportedOpError, match=r"nearest downsampling before opset 11"):
        from_onnx(model)


def test_sizes_with_axes_fuse_with_a_neighbour():
    # a Relu after the resize reads it at its own point: one fused kernel, compiled
    nodes = [helper.make_node("Resize", ["x", "", "", "sizes"], ["r"], mode="linear", axes=[3, 2]),
             helper.make_node("Relu", ["r"], ["y"])]
    model = make_model(nodes, {"x": [1, 2, 3, 4]}, {"y": None}, 19, {"sizes": np.array([7, 5], np.int64)})
    x = random_array((1, 2, 3, 4))
    np.testing.assert_allclose(compiled(model, x), run_onnxruntime(model, {"x": x})[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rules", ["tvm", "dnnfusion"])
def test_a_resize_and_the_relu_after_it_are_one_group(rules):
    # TVM classes resize injective and DNNFusion one-to-many: an elementwise consumer joins it
    # (Apollo's table fuses no injective producer with its consumer, resize no more than gather)
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["r"], mode="cubic"),
             helper.make_node("Relu", ["r"], ["y"])]
    model = make_model(nodes, {"x": [1, 2, 3, 4]}, {"y": None}, 19, {"scales": np.array([1, 1, 2, 1.5], np.float32)})
    plan = fusionlang.fuse(from_onnx(model), rules)
    assert [sorted(plan.graph.node(n).op for n in g.nodes) for g in plan.groups] == [["relu", "resize"]]
