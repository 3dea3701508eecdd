"""fusionlang.Specializer: a model compiled per run-time shapes and values, in a bounded cache."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import fusionlang
from fusionlang.errors import InputError, RuntimeInputError

SCALE = np.array([1.0, -2.0, 0.5, 3.0], np.float32)


def symbolic_batch_model():
    """y = relu(x) * SCALE, x of shape [N, 4] with N symbolic."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "scale"], ["y"])]
    graph = helper.make_graph(nodes, "batch", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
                              [numpy_helper.from_array(SCALE, "scale")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def reshape_model():
    """y = reshape(x, s): the target shape is a graph input."""
    graph = helper.make_graph([helper.make_node("Reshape", ["x", "s"], ["y"])], "reshape",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                               helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def batch(n: int) -> np.ndarray:
    return np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)


def test_symbolic_batch_compiles_once_per_batch_size():
    model = fusionlang.Specializer(symbolic_batch_model(), target="c")
    for n in (2, 5, 2, 5):
        x = batch(n)
        np.testing.assert_allclose(model.run({"x": x})["y"], np.maximum(x, 0) * SCALE, rtol=1e-6)
    assert model.stats == {"specializations": 2, "hits": 2, "cached": 2}
    assert model.shape_inputs == {"x"} and model.value_inputs == set()


def test_values_fed_as_inputs_are_specialized_on():
    model = fusionlang.Specializer(reshape_model(), target="reference")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for shape in ([3, 2], [6, 1], [3, 2]):
        y = model.run({"x": x, "s": np.array(shape, np.int64)})["y"]
        np.testing.assert_array_equal(y, x.reshape(shape))
    assert (model.specializations, model.hits) == (2, 1)
    assert model.value_inputs == {"s"}


def test_cache_is_bounded_least_recently_used_first():
    built = []
    model = fusionlang.Specializer(symbolic_batch_model(), capacity=2,
                                   build=lambda graph: built.append(graph.types["x"].shape) or (lambda feeds: {}))
    for n in (1, 2, 1, 3, 2, 1):  # 3 evicts 2 (1 was used since); then 2 evicts 1, and 1 evicts 3
        model.run({"x": batch(n)})
    assert built == [(1, 4), (2, 4), (3, 4), (2, 4), (1, 4)]
    assert model.stats == {"specializations": 5, "hits": 1, "cached": 2}


def test_missing_feed_and_bad_capacity_are_input_errors():
    model = fusionlang.Specializer(reshape_model(), target="reference")
    with pytest.raises(InputError, match=r"^missing inputs: s \(the model takes x, s\)$"):
        model.run({"x": np.zeros((2, 3), np.float32)})
    with pytest.raises(InputError, match="capacity must be at least 1, got 0"):
        fusionlang.Specializer(reshape_model(), capacity=0)


def test_a_value_that_does_not_fit_is_the_importers_error():
    model = fusionlang.Specializer(reshape_model(), target="reference")
    with pytest.raises(InputError, match=r"constant_inputs\['s'\] has dtype int32, the model declares int64"):
        model.run({"x": np.zeros((2, 3), np.float32), "s": np.array([3, 2], np.int32)})
    assert model.specializations == 0


def test_from_onnx_without_the_values_says_how_to_give_them():
    with pytest.raises(RuntimeInputError, match=r"constant_inputs=\{'s': array\}") as info:
        fusionlang.from_onnx(reshape_model())
    assert info.value.values == ("s",)
    graph = fusionlang.from_onnx(reshape_model(), constant_inputs={"s": np.array([3, 2], np.int64)})
    assert graph.types["y"].shape == (3, 2)


def test_a_fed_shape_past_the_memory_limit_is_refused_before_compiling(monkeypatch):
    """A shape-valued input (Expand's shape) sized a tensor past the machine's memory:
    the Specializer and the ONNX backend went on to compile and allocate it."""
    import onnx
    from onnx import TensorProto, helper

    from fusionlang.errors import InputError
    from fusionlang.ir.memory import LIMIT_VARIABLE

    graph = helper.make_graph([helper.make_node("Expand", ["x", "shape"], ["y"])], "expand",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1]),
                               helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    monkeypatch.setenv(LIMIT_VARIABLE, str(1 << 20))
    specializer = fusionlang.Specializer(model)
    small = specializer.run({"x": np.float32([2]), "shape": np.array([4, 4], np.int64)})
    assert list(small.values())[0].shape == (4, 4)
    with pytest.raises(InputError, match="more than the limit"):
        specializer.run({"x": np.float32([2]), "shape": np.array([100_000, 100_000], np.int64)})
