"""Converters written with other ops or folded at import (DepthToSpace, SpaceToDepth,
EyeLike, Hardmax, the window functions, Celu, ThresholdedRelu, Swish), compiled to C and
compared with ONNX's reference implementation (onnx.reference)."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import fusionlang.onnx_backend as backend
from fusionlang.cli import main
from fusionlang.errors import ModelError, ShapeError
from fusionlang.frontend import from_onnx
from onnx_cases import make_model, random_array, run_onnxruntime

pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")


def unary_model(op_type: str, shape, opset: int, elem=TensorProto.FLOAT, **attrs) -> onnx.ModelProto:
    node = helper.make_node(op_type, ["x"], ["y"], name="n", **attrs)
    return make_model([node], {"x": (list(shape), elem)}, {"y": None}, opset)


def assert_compiled_matches_onnx(model: onnx.ModelProto, feeds: dict) -> None:
    got = backend.prepare(model, target="c").run(feeds)[0]
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op_type, shape", [("DepthToSpace", (2, 8, 3, 2)), ("SpaceToDepth", (2, 3, 4, 6))])
@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_and_space_moves_match_onnx_in_both_modes(op_type, shape, mode):
    model = unary_model(op_type, shape, 13, blocksize=2, mode=mode)
    assert_compiled_matches_onnx(model, {"x": random_array(shape)})


def test_space_to_depth_then_depth_to_space_is_the_identity():
    nodes = [helper.make_node("SpaceToDepth", ["x"], ["d"], blocksize=3),
             helper.make_node("DepthToSpace", ["d"], ["y"], blocksize=3, mode="DCR")]
    x = random_array((1, 2, 6, 3))
    model = make_model(nodes, {"x": [1, 2, 6, 3]}, {"y": None}, 13)
    np.testing.assert_array_equal(backend.prepare(model, target="c").run({"x": x})[0], x)


@pytest.mark.parametrize("op_type, shape, attrs, message", [
    ("DepthToSpace", (1, 6, 2, 2), {"blocksize": 2}, "channels 6 are not a multiple of blocksize**2 = 4"),
    ("SpaceToDepth", (1, 2, 5, 4), {"blocksize": 2}, "spatial dims [5, 4] are not multiples of blocksize=2"),
    ("DepthToSpace", (1, 4, 2), {"blocksize": 2}, "input f32[1,4,2] must have rank 4 (N, C, H, W)"),
])
def test_blocks_that_do_not_fit_are_shape_errors(op_type, shape, attrs, message):
    with pytest.raises(ShapeError, match="^" + re.escape(f"node 'n' ({op_type}): {message}") + "$"):
        from_onnx(unary_model(op_type, shape, 13, **attrs))


def test_an_unknown_mode_exits_2_with_one_line(tmp_path, capsys):
    path = tmp_path / "d2s.onnx"
    onnx.save(unary_model("DepthToSpace", (1, 4, 2, 2), 13, blocksize=2, mode="XYZ"), str(path))
    assert main(["fuse", str(path)]) == 2
    assert capsys.readouterr().err == "fusionlang: error: node 'n' (DepthToSpace): mode='XYZ' should be 'DCR' or " \
                                      "'CRD'\n"


@pytest.mark.parametrize("shape, attrs", [((3, 3), {}), ((3, 5), {"k": 2}), ((4, 2), {"k": -1}),
                                          ((2, 3), {"dtype": TensorProto.INT32})])
def test_eye_like_matches_onnx(shape, attrs):
    model = unary_model("EyeLike", shape, 9, **attrs)
    assert_compiled_matches_onnx(model, {"x": random_array(shape)})


@pytest.mark.parametrize("opset, axis", [(13, -1), (13, 0), (13, 1), (11, 1), (11, 0), (11, 2)])
def test_hardmax_marks_the_first_maximum(opset, axis):
    # few distinct values, so rows hold ties: the first maximum wins. Before opset 13 the
    # input is flattened to 2-D at the axis, which onnx.reference does not do: onnxruntime
    x = np.random.default_rng(axis + opset).integers(-2, 3, (2, 3, 4)).astype(np.float32)
    model = unary_model("Hardmax", x.shape, opset, axis=axis)
    got = backend.prepare(model, target="c").run({"x": x})[0]
    np.testing.assert_array_equal(got, run_onnxruntime(model, {"x": x})[0])


@pytest.mark.parametrize("op_type", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows_of_a_run_time_size_match_onnx(op_type, periodic):
    # the size is a graph input: each run's value is bound, then the window folded
    node = helper.make_node(op_type, ["size"], ["y"], name="n", periodic=periodic)
    model = make_model([node], {"size": ([], TensorProto.INT64)}, {"y": None}, 17)
    rep = backend.prepare(model, target="c")
    for size in (1, 5, 10):
        feeds = {"size": np.array(size, np.int64)}
        got = rep.run(feeds)[0]
        want = ReferenceEvaluator(model).run(None, feeds)[0]
        assert got.dtype == want.dtype and got.shape == (size,)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("size, message", [
    (np.array(-3, np.int64), "size=-3 should be in [0, 134217728]"),
    (np.array(4.0, np.float32), "size must be one integer, got float32 of shape []"),
    (np.array([3, 4], np.int64), "size must be one integer, got int64 of shape [2]"),
])
def test_a_bad_window_size_is_refused(size, message):
    node = helper.make_node("HannWindow", ["size"], ["y"], name="n")
    model = make_model([node], {}, {"y": None}, 17, {"size": size})
    with pytest.raises(ModelError, match="^" + re.escape(f"node 'n' (HannWindow): {message}") + "$"):
        from_onnx(model)


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_swiglu_is_swish_of_a_times_b(alpha):
    node = helper.make_node("SwiGLU", ["a", "b"], ["y"], alpha=alpha)
    model = make_model([node], {"a": [3, 4], "b": [3, 4]}, {"y": None}, 28)
    a, b = random_array((3, 4), seed=1) * 3, random_array((3, 4), seed=2)
    got = backend.prepare(model, target="c").run({"a": a, "b": b})[0]
    want = a / (1 + np.exp(-alpha * a.astype(np.float64))) * b
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op_type, attrs, opset", [("Celu", {"alpha": 0.7}, 12), ("Celu", {}, 12),
                                                   ("ThresholdedRelu", {"alpha": 0.4}, 10),
                                                   ("ThresholdedRelu", {}, 10), ("Swish", {"alpha": 0.3}, 24),
                                                   ("Swish", {}, 24)])
def test_activations_from_function_bodies_match_onnx(op_type, attrs, opset):
    x = random_array((3, 7), seed=len(op_type)) * 4
    x[0, :3] = [np.inf, -np.inf, np.nan]
    x[1, :2] = attrs.get("alpha", 1.0)  # the threshold itself
    model = unary_model(op_type, x.shape, opset, **attrs)
    got = backend.prepare(model, target="c").run({"x": x})[0]
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, equal_nan=True)


def mel_model(mels, dft_length, rate, low, high, **attrs) -> onnx.ModelProto:
    names = ["mels", "n", "rate", "low", "high"]
    values = [np.int32(mels), np.int32(dft_length), np.int32(rate), np.float32(low), np.float32(high)]
    node = helper.make_node("MelWeightMatrix", names, ["y"], name="mel", **attrs)
    return make_model([node], {}, {"y": None}, 17, {k: np.array(v) for k, v in zip(names, values)})


@pytest.mark.parametrize("params, attrs", [((8, 16, 8192, 0, 4096), {}), ((10, 64, 16000, 20, 7000), {}),
                                           ((4, 32, 8000, 100, 3000), {"output_datatype": TensorProto.DOUBLE})])
def test_mel_weight_matrix_matches_onnx(params, attrs):
    model = mel_model(*params, **attrs)
    got = backend.prepare(model, target="c").run({})[0]
    want = ReferenceEvaluator(model).run(None, {})[0]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_mel_edges_past_the_spectrogram_are_refused():
    message = "node 'mel' (MelWeightMatrix): the mel edges [0.0, 20000.0] Hz fall outside the 9 spectrogram bins"
    with pytest.raises(ModelError, match="^" + re.escape(message) + "$"):
        from_onnx(mel_model(8, 16, 8192, 0, 20000))


@pytest.mark.parametrize("shape, axis, condition", [((3, 2), 0, [0, 1, 1]), ((3, 2), -1, [0, 1]),
                                                    ((3, 2), None, [0, 1, 0, 0, 1]), ((4, 3), 0, [1, 0]),
                                                    ((2, 5), 1, [1, 1, 1, 1, 1])])
def test_compress_of_a_run_time_condition_matches_numpy(shape, axis, condition):
    # the condition is a graph input: the backend binds each run's value and gathers
    attrs = {} if axis is None else {"axis": axis}
    node = helper.make_node("Compress", ["x", "c"], ["y"], **attrs)
    model = make_model([node], {"x": list(shape), "c": ([len(condition)], TensorProto.BOOL)}, {"y": None}, 11)
    rep = backend.prepare(model, target="c")
    x = random_array(shape)
    for mask in (np.array(condition, bool), ~np.array(condition, bool) | np.eye(1, len(condition), dtype=bool)[0]):
        got = rep.run({"x": x, "c": mask})[0]
        np.testing.assert_array_equal(got, np.compress(mask, x, axis=axis))


def test_a_condition_longer_than_the_axis_is_refused():
    node = helper.make_node("Compress", ["x", "c"], ["y"], name="n", axis=1)
    model = make_model([node], {"x": [2, 3]}, {"y": None}, 11, {"c": np.ones(4, bool)})
    message = "node 'n' (Compress): condition has 4 entries, more than the 3 positions it selects from"
    with pytest.raises(ShapeError, match="^" + re.escape(message) + "$"):
        from_onnx(model)
