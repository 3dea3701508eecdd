"""fusionlang.onnx_backend prepares lazily a model that needs run-time shapes or values."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

import fusionlang.onnx_backend as backend
from onnx_cases import I64, make_model, tensor_info


def symbolic_batch_model():
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "batch",
                              [tensor_info("x", ["N", 3])], [tensor_info("y", ["N", 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_symbolic_batch_runs_without_input_shapes_compiling_once_per_shape():
    rep = backend.prepare(symbolic_batch_model())
    assert isinstance(rep, backend.SpecializingRep)
    for n in (1, 4, 4):
        x = np.linspace(-1, 1, n * 3, dtype=np.float32).reshape(n, 3)
        (y,) = rep.run([x])
        np.testing.assert_array_equal(y, np.maximum(x, 0))
    assert rep.specializer.specializations == 2 and rep.specializer.hits == 1


def test_axes_fed_as_an_input_are_specialized_on():
    model = make_model([helper.make_node("Unsqueeze", ["x", "axes"], ["y"])],
                       {"x": [2, 3], "axes": ([1], I64)}, {"y": None}, 13)
    x = np.ones((2, 3), np.float32)
    assert backend.run_model(model, [x, np.array([0], np.int64)])[0].shape == (1, 2, 3)
    rep = backend.prepare(model)
    assert rep.run({"x": x, "axes": np.array([-1], np.int64)}).y.shape == (2, 3, 1)


def test_a_model_needing_nothing_at_run_time_compiles_at_prepare():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": [2]}, {"y": ([2], TensorProto.FLOAT)}, 13)
    assert isinstance(backend.prepare(model), backend.FusionlangRep)
