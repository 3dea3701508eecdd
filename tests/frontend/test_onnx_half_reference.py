"""The reference interpreter computes float16 and bfloat16 ops as ONNX Runtime does: in
float32, each op's result rounded once to 16 bits (NumPy alone would round every step of a
composite reference, such as sigmoid's or layer norm's, to 16 bits)."""

from __future__ import annotations

import numpy as np
import onnx.helper as h
import pytest
from onnx import TensorProto

from fusionlang import reference
from fusionlang.api import compile_model
from fusionlang.frontend import from_onnx
from fusionlang.testing.values import compare

ort = pytest.importorskip("onnxruntime")

SHAPE = (4, 256)


def one_op_model(op: str, elem_type: int, n_inputs: int, input_shapes=None):
    shapes = input_shapes or [SHAPE] * n_inputs
    inputs = [h.make_tensor_value_info(f"i{k}", elem_type, s) for k, s in enumerate(shapes)]
    node = h.make_node(op, [f"i{k}" for k in range(len(shapes))], ["y"])
    graph = h.make_graph([node], op, inputs, [h.make_tensor_value_info("y", elem_type, None)])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 21)])


def ulps_apart(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many representable values lie between ``a`` and ``b`` (same 16-bit dtype, finite)."""
    def ordered(x):
        bits = x.view(np.uint16).astype(np.int64)
        return np.where(bits >= 0x8000, 0x8000 - bits, bits)
    return np.abs(ordered(a) - ordered(b))


CASES = [  # op, input shapes: ORT's CPU provider runs these in float16
    ("Sigmoid", None), ("Gelu", None), ("HardSigmoid", None), ("Softmax", None), ("Tanh", None),
    ("LayerNormalization", [SHAPE, SHAPE[-1:], SHAPE[-1:]]), ("MatMul", [(16, 512), (512, 16)]),
]


@pytest.mark.parametrize("op,shapes", CASES, ids=[c[0] for c in CASES])
def test_float16_reference_rounds_like_onnxruntime(op, shapes):
    model = one_op_model(op, TensorProto.FLOAT16, 1, shapes)
    rng = np.random.default_rng(3)
    feeds = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float16)
             for i in model.graph.input}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    graph = from_onnx(model)
    got = reference.run(graph, feeds)["y"]
    apart = ulps_apart(got, want)
    # rounding each step (NumPy's float16) leaves a quarter to a third of sigmoid's results
    # a unit off, layer norm's up to 8 units
    assert apart.max() <= 1 and np.count_nonzero(apart) <= got.size // 100, (apart.max(), np.count_nonzero(apart))
    assert compare(got, compile_model(graph).run(feeds)["y"]) is None


def test_bfloat16_layer_norm_reference_rounds_like_onnxruntime():
    """ORT's CPU provider runs few ops in bfloat16; layer norm is one (its result is cast to
    float32, exactly, because ORT hands no bfloat16 arrays back to NumPy)."""
    shapes = [SHAPE, SHAPE[-1:], SHAPE[-1:]]
    inputs = [h.make_tensor_value_info(f"i{k}", TensorProto.BFLOAT16, s) for k, s in enumerate(shapes)]
    nodes = [h.make_node("LayerNormalization", ["i0", "i1", "i2"], ["n"]),
             h.make_node("Cast", ["n"], ["y"], to=TensorProto.FLOAT)]
    model = h.make_model(h.make_graph(nodes, "ln", inputs, [h.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
                         opset_imports=[h.make_opsetid("", 21)])
    rng = np.random.default_rng(4)
    feeds = {f"i{k}": rng.standard_normal(s).astype("bfloat16") for k, s in enumerate(shapes)}
    # (ORT takes bfloat16 only as an OrtValue of the raw patterns)
    ort_feeds = {name: ort.OrtValue.ortvalue_from_numpy_with_onnx_type(a.view(np.uint16), TensorProto.BFLOAT16)
                 for name, a in feeds.items()}
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run_with_ort_values(["y"], ort_feeds)[0].numpy().astype("bfloat16")
    graph = from_onnx(model)
    got = reference.run(graph, feeds)["y"]
    apart = ulps_apart(got.astype("bfloat16"), want)
    assert apart.max() <= 1 and np.count_nonzero(apart) <= got.size // 100, (apart.max(), np.count_nonzero(apart))
    assert compare(got, compile_model(graph).run(feeds)["y"], rtol=1e-1, atol=1e-1) is None
