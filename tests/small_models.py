"""Small ONNX models the top-level tests write and hand to the CLI."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper


def _float(name: str, shape: list[int]):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _save(nodes, inputs, outputs, opset: int, path) -> str:
    graph = helper.make_graph(nodes, "small", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def attention_model(path) -> str:
    """One ONNX Attention (opset 23) with a softcap and an additive mask: 1 batch, 2 heads,
    3 queries over 4 keys of size 4. Every policy opens it (std/attention.fuse), before or
    after partitioning, into soft_cap, guarded_softmax and matmuls."""
    node = helper.make_node("Attention", ["Q", "K", "V", "mask"], ["Y"], name="att", softcap=2.0)
    inputs = [_float("Q", [1, 2, 3, 4]), _float("K", [1, 2, 4, 4]), _float("V", [1, 2, 4, 4]), _float("mask", [3, 4])]
    return _save([node], inputs, [_float("Y", [1, 2, 3, 4])], 23, path)


def silu_model(path) -> str:
    """y = x * sigmoid(x): what the README's to_silu rule matches."""
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"], name="sigmoid"),
             helper.make_node("Mul", ["x", "s"], ["y"], name="mul")]
    return _save(nodes, [_float("x", [2, 8])], [_float("y", [2, 8])], 17, path)


def mlp_model(path) -> str:
    """y = softmax(relu(x @ W + b)): a matmul, a bias, an activation and a reduction, so
    policies that fuse differently give different groups."""
    import numpy as np
    from onnx import numpy_helper

    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((8, 6)).astype(np.float32), "W"),
               numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "b")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="matmul"),
             helper.make_node("Add", ["h", "b"], ["hb"], name="bias"),
             helper.make_node("Relu", ["hb"], ["r"], name="relu"),
             helper.make_node("Softmax", ["r"], ["y"], name="softmax", axis=-1)]
    graph = helper.make_graph(nodes, "mlp", [_float("x", [4, 8])], [_float("y", [4, 6])], initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)
