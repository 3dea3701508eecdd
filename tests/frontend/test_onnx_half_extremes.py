"""float16 ops written with several steps (layer, instance and group norm, the composite
reductions) on rows holding one extreme value: the reference interpreter and the compiled C
compute every step in float32 and round once, as onnxruntime does. A float16 layer norm of
a row holding 300 squared its deviation past 65504 and returned beta alone (exit 0), and a
float16 ReduceL2 of it gave inf in C and in the reference alike, where onnxruntime gives 300."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import fusionlang
from fusionlang.frontend import from_onnx
from onnx_cases import make_model, run_onnxruntime

ROWS, WIDTH = 3, 8
F16 = TensorProto.FLOAT16


def norm_model(op: str) -> tuple:
    """(model, input shape): ``op`` over rows of WIDTH, scale 1 and bias 0 in float16."""
    if op == "LayerNormalization":
        shape, channels, extra = [ROWS, WIDTH], WIDTH, {"axis": -1}
    elif op == "InstanceNormalization":
        shape, channels, extra = [1, ROWS, WIDTH], ROWS, {}
    else:  # GroupNormalization: one group per row
        shape, channels, extra = [1, ROWS, WIDTH], ROWS, {"num_groups": ROWS}
    inits = {"scale": np.ones(channels, np.float16), "bias": np.full(channels, 0.5, np.float16)}
    node = helper.make_node(op, ["x", "scale", "bias"], ["y"], **extra)
    return make_model([node], {"x": (shape, F16)}, {"y": (shape, F16)}, 21, inits), shape


def reduce_model(op: str) -> tuple:
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=1)
    model = make_model([node], {"x": ([ROWS, WIDTH], F16)}, {"y": ([ROWS, 1], F16)}, 18,
                       {"axes": np.array([1], np.int64)})
    return model, [ROWS, WIDTH]


MODELS = {op: (lambda op=op: norm_model(op)) for op in
          ("LayerNormalization", "InstanceNormalization", "GroupNormalization")}
MODELS.update({op: (lambda op=op: reduce_model(op)) for op in
               ("ReduceL2", "ReduceSumSquare", "ReduceL1", "ReduceLogSumExp")})


def extreme_rows(draw, shape) -> np.ndarray:
    """Small values with one large one per row (within float16's range, its square not)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal(shape).astype(np.float32)
    rows = x.reshape(ROWS, WIDTH)
    for row in rows:
        row[draw(st.integers(0, WIDTH - 1))] = draw(st.sampled_from([-1, 1])) * draw(st.floats(256, 3000))
    return x.astype(np.float16)


def assert_close_to_onnxruntime(op: str, x: np.ndarray) -> None:
    model, _ = MODELS[op]()
    want = run_onnxruntime(model, {"x": x})[0].astype(np.float32)
    graph = from_onnx(model)
    interpreted = fusionlang.reference.run(graph, {"x": x})["y"]
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), target="c").run({"x": x})["y"]
    finite = np.isfinite(want)
    scale = float(np.abs(want[finite]).max(initial=1.0))
    for got in (interpreted, compiled):
        assert got.dtype == np.float16
        got = got.astype(np.float32)
        np.testing.assert_allclose(got[finite], want[finite], rtol=2e-2, atol=2e-2 * scale)
        if op != "ReduceLogSumExp":  # past 65504 the result is inf, as a float16 result must be
            np.testing.assert_array_equal(got[~finite], want[~finite])
        # (onnxruntime's float16 ReduceLogSumExp takes exp of 1000 unshifted: inf, where the
        # value is 1000; ours subtracts the row's max first)


@pytest.mark.parametrize("op", list(MODELS))
def test_a_row_holding_300_matches_onnxruntime(op):
    _, shape = MODELS[op]()
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float16)
    x.reshape(ROWS, WIDTH)[:, 0] = [300, -300, 1000]
    assert_close_to_onnxruntime(op, x)


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(list(MODELS)), st.data())
def test_extreme_rows_match_onnxruntime(op, data):
    _, shape = MODELS[op]()
    assert_close_to_onnxruntime(op, extreme_rows(data.draw, shape))
