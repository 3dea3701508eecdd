"""Clip keeps NaN and signed zeros (its bounds' too) whatever its bounds, as onnxruntime does: with bounds
inverted (min > max) or equal, sympy simplified min(max(x, lo), hi) to a constant over
the reals, and a NaN x came out of the compiled code as the bound."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import fusionlang
from fusionlang.frontend import from_onnx

X = np.float32([np.nan, -np.inf, np.inf, -0.0, 0.0, 3, -3, 7])


# a bound of -0.0 is -0.0 where it is picked (sympy holds it as 0: the C gave +0)
@pytest.mark.parametrize("low, high", [(5, 1), (-np.inf, np.inf), (-np.inf, 1), (1, np.inf), (0, 0), (3, 3),
                                       (-1, 3), (np.inf, -np.inf), (np.inf, 2), (-0.0, 1), (-1, -0.0),
                                       (-0.0, -0.0), (0.0, -0.0), (-0.0, 0.0), (1, -0.0)])
def test_clip_matches_onnxruntime_bit_for_bit(low, high):
    import onnxruntime

    bounds = [numpy_helper.from_array(np.float32(low), "lo"), numpy_helper.from_array(np.float32(high), "hi")]
    graph = helper.make_graph([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], "clip",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])], bounds)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    want = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]) \
        .run(None, {"x": X})[0]
    g = from_onnx(model)
    for got in (fusionlang.reference.run(g, {"x": X})["y"],
                fusionlang.compile(fusionlang.fuse(g, "apollo"), "c").run({"x": X})["y"]):
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
