"""Generate fusionlang/data/demo_block.onnx: the model `fusionlang demo` runs.

A pre-LN transformer encoder block (the shape of BERT/ViT blocks, scaled down): layer
norm, multi-head self-attention with softmax, a GELU MLP in ONNX's Erf form, and two
residual adds. Weights are seeded so the file is reproducible.

    python tools/make_demo_model.py
"""

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEQ, HIDDEN, HEADS, MLP = 64, 128, 4, 256
HEAD = HIDDEN // HEADS


def build() -> onnx.ModelProto:
    rng = np.random.default_rng(2024)
    inits, nodes = [], []

    def weight(name, shape, scale):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def const(name, values, dtype=np.int64):
        inits.append(numpy_helper.from_array(np.array(values, dtype=dtype), name))
        return name

    def node(op, inputs, name, **attrs):
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def layer_norm(x, tag):
        g = weight(f"{tag}_gamma", (HIDDEN,), 0.1)
        b = weight(f"{tag}_beta", (HIDDEN,), 0.1)
        inits[-2].CopyFrom(numpy_helper.from_array(1 + numpy_helper.to_array(inits[-2]), g))
        return node("LayerNormalization", [x, g, b], f"{tag}_out", axis=-1, epsilon=1e-5)

    def linear(x, n_in, n_out, tag):
        y = node("MatMul", [x, weight(f"{tag}_w", (n_in, n_out), n_in ** -0.5)], f"{tag}_mm")
        return node("Add", [y, weight(f"{tag}_b", (n_out,), 0.02)], f"{tag}_out")

    def heads(x, tag):  # (1, SEQ, HIDDEN) -> (1, HEADS, SEQ, HEAD)
        r = node("Reshape", [x, const(f"{tag}_shape", [1, SEQ, HEADS, HEAD])], f"{tag}_split")
        return node("Transpose", [r], f"{tag}_heads", perm=[0, 2, 1, 3])

    x = "x"
    h = layer_norm(x, "ln1")
    q, k, v = (heads(linear(h, HIDDEN, HIDDEN, t), t) for t in ("q", "k", "v"))
    kt = node("Transpose", [k], "k_t", perm=[0, 1, 3, 2])
    scores = node("MatMul", [q, kt], "scores")
    scaled = node("Mul", [scores, const("scale", [HEAD ** -0.5], np.float32)], "scaled")
    attn = node("Softmax", [scaled], "attn", axis=-1)
    ctx = node("MatMul", [attn, v], "ctx")
    merged = node("Transpose", [ctx], "ctx_t", perm=[0, 2, 1, 3])
    flat = node("Reshape", [merged, const("merge_shape", [1, SEQ, HIDDEN])], "ctx_merged")
    attn_out = linear(flat, HIDDEN, HIDDEN, "proj")
    res1 = node("Add", [x, attn_out], "res1")
    h2 = layer_norm(res1, "ln2")
    up = linear(h2, HIDDEN, MLP, "fc1")
    # GELU exactly as exporters write it before opset 20: x * 0.5 * (1 + erf(x / sqrt 2))
    erf = node("Erf", [node("Div", [up, const("sqrt2", [np.sqrt(2.0)], np.float32)], "gelu_div")], "gelu_erf")
    one_plus = node("Add", [erf, const("one", [1.0], np.float32)], "gelu_add")
    gelu = node("Mul", [node("Mul", [up, one_plus], "gelu_mul"), const("half", [0.5], np.float32)], "gelu")
    down = linear(gelu, MLP, HIDDEN, "fc2")
    out = node("Add", [res1, down], "y")

    graph = helper.make_graph(
        nodes, "demo_block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQ, HIDDEN])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, SEQ, HIDDEN])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="fusionlang")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    target = Path(__file__).resolve().parents[1] / "fusionlang" / "data" / "demo_block.onnx"
    onnx.save(build(), target)
    print(f"wrote {target} ({target.stat().st_size} bytes)")
