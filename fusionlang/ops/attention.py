"""Scaled dot-product attention's arithmetic (ONNX Attention, opsets 23 and 24): a compound
op, opened by ``std/attention.fuse``.

The ONNX converter builds the structure around it: heads split from 3-D inputs, the past
key/value cache concatenated, grouped-query heads repeated, and every mask (attn_mask,
is_causal, nonpad_kv_seqlen) turned into one additive ``bias`` of 0 and -inf. This op
takes q (B, H, Sq, D), k (B, H, Skv, D), v (B, H, Skv, Dv) and the optional bias
broadcasting to (B, H, Sq, Skv), and gives ONNX's four stages:

* output 0, y = probs @ v;
* output 1, the scores (q * sqrt(scale)) @ (k * sqrt(scale))^T, then
  ``softcap * tanh(scores / softcap)`` when softcap > 0 (qk_matmul_output modes 0 and 1);
* output 2, scores + bias (mode 2);
* output 3, probs: the softmax of output 2 over the keys, 0 in a row that has no key to
  attend (its bias all -inf), and 0 rather than NaN where every score of a row is -inf (mode 3).
"""

from __future__ import annotations

import numpy as np

from fusionlang.ir.types import TensorType
from fusionlang.ops.common import broadcast_shapes, require_float, same_dtype
from fusionlang.ops.registry import Attr, OpCall, OpDef, register


def _infer(call: OpCall) -> list[TensorType]:
    q, k, v = call.input(0), call.input(1), call.input(2)
    require_float(call, q)
    inputs = [q, k, v] + ([call.input(3)] if call.has_input(3) else [])
    dtype = same_dtype(call, inputs)
    if not q.rank == k.rank == v.rank == 4:
        raise call.fail(f"q {q}, k {k} and v {v} should be (batch, heads, sequence, head size)")
    if q.shape[:2] != k.shape[:2] or k.shape[:3] != v.shape[:3] or q.shape[3] != k.shape[3]:
        raise call.fail(f"q {q}, k {k} and v {v} do not fit: q and k share batch, heads and head "
                        "size; k and v share batch, heads and sequence")
    scores = q.shape[:3] + (k.shape[2],)
    if call.has_input(3):
        bias = call.input(3)
        # rank >= 1: whether a row is masked is read along the bias's key axis
        if bias.rank < 1 or broadcast_shapes(call, [scores, bias.shape]) != scores:
            raise call.fail(f"bias {bias} does not broadcast to the scores {list(scores)} along a key axis")
    if not call.attrs["scale"] > 0 or call.attrs["softcap"] < 0:
        raise call.fail(f"scale={call.attrs['scale']} must be positive and softcap={call.attrs['softcap']} "
                        "not negative")
    full = TensorType(scores, dtype)
    return [TensorType(q.shape[:3] + (v.shape[3],), dtype), full, full, full]


def _guarded_softmax(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; a row of only -inf gives 0s (ONNX's reference)."""
    top = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - np.where(np.isneginf(top), 0, top).astype(x.dtype))
    total = np.sum(e, axis=-1, keepdims=True)
    return e / np.where(total == 0, 1, total).astype(x.dtype)


def _reference(xs, attrs):
    q, k, v = xs[:3]
    bias = xs[3] if len(xs) > 3 and xs[3] is not None else None
    root = q.dtype.type(np.sqrt(attrs["scale"]))
    scores = np.matmul(q * root, np.swapaxes(k * root, -1, -2))
    softcap = q.dtype.type(attrs["softcap"])
    if softcap > 0:
        scores = (np.tanh(scores / softcap) * softcap).astype(q.dtype)
    biased = scores + bias if bias is not None else scores.copy()
    probs = _guarded_softmax(biased)
    if bias is not None:
        dead = np.isneginf(np.max(bias, axis=-1, keepdims=True))
        probs = np.where(dead, q.dtype.type(0), probs)
    y = np.matmul(probs, v)
    return [a.astype(q.dtype, copy=False) for a in (y, scores, biased, probs)]


register(
    OpDef(
        name="attention",
        inputs=("q", "k", "v", "bias"),
        min_inputs=3,
        attrs={"scale": Attr("float", 1.0, "q and k are each multiplied by sqrt(scale)"),
               "softcap": Attr("float", 0.0, "scores become softcap * tanh(scores / softcap); 0: no cap")},
        infer=_infer,
        reference=_reference,
        num_outputs=4,
        compound=True,
        doc="Scaled dot-product attention of q (B, H, Sq, D), k (B, H, Skv, D), v (B, H, Skv, Dv) and an "
            "additive bias broadcasting to (B, H, Sq, Skv): outputs y, the (softcapped) scores, scores + bias "
            "and the probabilities (0 in rows whose bias is all -inf), ONNX Attention's stages.",
    )
)
