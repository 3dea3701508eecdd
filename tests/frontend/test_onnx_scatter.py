"""ScatterElements, Scatter and ScatterND imported, compiled to C and compared with ONNX's
reference evaluator: every reduction, repeated and negative indices (the last repeated
index wins without a reduction, as the evaluator and onnxruntime do), and indices out of
range refused at run time with one line."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import fusionlang.onnx_backend as backend
from fusionlang.cli import main
from fusionlang.errors import InputError
from onnx_cases import I64, make_model

pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")

REDUCTIONS = ("none", "add", "mul", "max", "min")


def scatter_model(op_type: str, data_shape, index_shape, update_shape, opset: int = 18, index_type=I64, **attrs):
    node = helper.make_node(op_type, ["x", "i", "u"], ["y"], name="scatter", **attrs)
    return make_model([node], {"x": list(data_shape), "i": (list(index_shape), index_type), "u": list(update_shape)},
                      {"y": list(data_shape)}, opset)


def compiled_matches_the_evaluator(model, feeds: dict, oracle=None) -> np.ndarray:
    """The compiled model's output, checked against the evaluator running ``oracle`` (default: the model)."""
    got = backend.prepare(model, target="c").run(feeds)[0]
    want = ReferenceEvaluator(oracle or model).run(None, feeds)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    return got


def _data(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("axis, indices", [
    (1, [[1, -1, 1], [0, 4, -5]]),  # 1 twice in row 0; -1 and 4, -5 and 0 are the same places
    (-2, [[2, 0, 2, 2, 1], [-1, -3, 0, 1, 1]]),  # along rows, every column hit, some twice
    (0, [[0], [0]]),  # shorter than data off the axis: the other columns keep their data
])
def test_scatter_elements_every_reduction(reduction, axis, indices):
    indices = np.array(indices)
    model = scatter_model("ScatterElements", (3, 5), indices.shape, indices.shape, axis=axis, reduction=reduction)
    compiled_matches_the_evaluator(model, {"x": _data((3, 5)), "i": indices, "u": _data(indices.shape, 1)})


def test_repeated_indices_without_a_reduction_keep_the_last_update():
    model = scatter_model("ScatterElements", (1, 4), (1, 3), (1, 3), axis=1)
    got = compiled_matches_the_evaluator(model, {"x": np.zeros((1, 4), np.float32), "i": np.array([[2, -2, 0]]),
                                                 "u": np.array([[1.0, 2.0, 3.0]], np.float32)})
    np.testing.assert_array_equal(got, [[3.0, 0.0, 2.0, 0.0]])


def test_scatter_opset_10_is_scatter_elements_with_int32_indices():
    model = scatter_model("Scatter", (3, 3), (2, 3), (2, 3), opset=10, index_type=TensorProto.INT32, axis=0)
    oracle = scatter_model("ScatterElements", (3, 3), (2, 3), (2, 3), opset=11, index_type=TensorProto.INT32, axis=0)
    compiled_matches_the_evaluator(model, {"x": _data((3, 3)), "i": np.array([[1, 0, 2], [0, 2, 1]], np.int32),
                                           "u": _data((2, 3), 1)}, oracle)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("data_shape, indices", [
    ((4, 3, 2), [[1], [-1]]),  # slices of two axes each
    ((4, 3, 2), [[[0, 2], [3, -1]], [[-4, 0], [2, 2]]]),  # rows of the last axis, 0 and -4 the same place
    ((4, 3), [[0, 1], [0, 1], [3, -3]]),  # single elements, one of them twice
])
def test_scatter_nd_every_reduction(reduction, data_shape, indices):
    indices = np.array(indices)
    m = indices.shape[-1]
    update_shape = indices.shape[:-1] + data_shape[m:]
    if reduction == "none" and len({tuple(t) for t in (indices.reshape(-1, m) % data_shape[:m])}) < len(
            indices.reshape(-1, m)):
        reduction = "add"  # ONNX leaves repeated tuples without a reduction undefined
    model = scatter_model("ScatterND", data_shape, indices.shape, update_shape, reduction=reduction)
    compiled_matches_the_evaluator(model, {"x": _data(data_shape), "i": indices, "u": _data(update_shape, 1)})


@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_scatter_elements_random_shapes(data):
    rank = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    axis = data.draw(st.integers(-rank, rank - 1))
    index_shape = tuple(data.draw(st.integers(1, 4)) if d == axis % rank else data.draw(st.integers(1, n))
                        for d, n in enumerate(shape))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    n = shape[axis]
    indices = rng.integers(-n, n, index_shape)
    reduction = data.draw(st.sampled_from(REDUCTIONS))
    model = scatter_model("ScatterElements", shape, index_shape, index_shape, axis=axis, reduction=reduction)
    compiled_matches_the_evaluator(model, {"x": _data(shape), "i": indices, "u": _data(index_shape, 1)})


@pytest.mark.parametrize("op_type, reduction, indices, message", [
    ("ScatterElements", "none", [[0, 5]], "node 'scatter/scatter_position_0' (scatter_position): index 5 is out of "
                                          "range for axis 1 of size 5"),
    ("ScatterElements", "add", [[-6, 0]], "node 'scatter' (scatter_elements): index -6 is out of "
                                          "range for axis 1 of size 5"),
])
def test_scatter_elements_index_out_of_range_is_refused(op_type, reduction, indices, message):
    model = scatter_model(op_type, (2, 5), (1, 2), (1, 2), axis=1, reduction=reduction)
    rep = backend.prepare(model, target="c")
    with pytest.raises(InputError, match="^" + re.escape(message) + "$"):
        rep.run({"x": _data((2, 5)), "i": np.array(indices), "u": _data((1, 2))})


def test_scatter_nd_index_out_of_range_exits_2_with_one_line(tmp_path, capsys):
    model = scatter_model("ScatterND", (4, 3), (2, 1), (2, 3))
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    for name, array in {"x": _data((4, 3)), "i": np.array([[1], [4]]), "u": _data((2, 3))}.items():
        np.save(tmp_path / f"{name}.npy", array)
    argv = ["run", str(path)] + [f"--input={name}={tmp_path / name}.npy" for name in "xiu"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert re.fullmatch(r"fusionlang: error: node 'scatter/gather_\d+' \(gather\): index 4 is out of range for "
                        r"axis 0 of size 4\n", err), err


def test_scatter_nd_with_wrong_updates_is_refused_at_import():
    model = scatter_model("ScatterND", (4, 3), (2, 1), (2, 2))
    with pytest.raises(Exception, match=re.escape("node 'scatter' (ScatterND): updates must have shape [2, 3]")):
        backend.prepare(model, target="c")
