"""ReduceLogSumExp of rows holding +-inf or NaN: the imported graph, run by the reference
and compiled to C, gives what onnxruntime gives (inf, -inf, NaN), not inf - inf = NaN."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import fusionlang
from fusionlang.frontend import from_onnx
from onnx_cases import make_model, run_onnxruntime

ROWS = np.float32([[np.inf, 1, 2], [-np.inf, -np.inf, -np.inf], [np.inf, -np.inf, 0], [np.nan, 1, 2],
                   [-np.inf, 0, 1], [1, 2, 3], [80, 90, 100]])


@pytest.mark.parametrize("keepdims", [0, 1])
def test_log_sum_exp_of_infinite_rows_matches_onnxruntime(keepdims):
    model = make_model([helper.make_node("ReduceLogSumExp", ["x", "axes"], ["y"], keepdims=keepdims)],
                       {"x": list(ROWS.shape)}, {"y": None}, 18, {"axes": np.array([1], np.int64)})
    graph = from_onnx(model)
    feeds = {"x": ROWS}
    want = run_onnxruntime(model, feeds)[0]
    with np.errstate(all="ignore"):
        ours = fusionlang.reference.run(graph, feeds)["y"]
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), target="c").run(feeds)["y"]
    assert np.isposinf(want[0]) and np.isneginf(want[1])
    for got in (ours, compiled):
        np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)
