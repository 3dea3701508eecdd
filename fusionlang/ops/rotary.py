"""Rotary position embedding's arithmetic (ONNX RotaryEmbedding): a compound op, opened by
``std/attention.fuse``.

The ONNX converter does the rest: it reads cos and sin at the position ids, moves the
heads to the layout (batch, sequence, heads, head size), and rotates only the first
``rotary_embedding_dim`` features, passing the others through. This op rotates all of
the last axis of x (even length 2h) with cos and sin broadcasting to (..., h):
``interleaved=0`` pairs feature i with i + h, ``interleaved=1`` pairs 2i with 2i + 1.
"""

from __future__ import annotations

import numpy as np

from fusionlang.ir.types import TensorType
from fusionlang.ops.common import broadcast_shapes, require_float, same_dtype
from fusionlang.ops.registry import Attr, OpCall, OpDef, register


def _infer(call: OpCall) -> list[TensorType]:
    x, cos, sin = call.input(0), call.input(1), call.input(2)
    require_float(call, x)
    same_dtype(call, [x, cos, sin])
    if call.attrs["interleaved"] not in (0, 1):
        raise call.fail(f"interleaved={call.attrs['interleaved']} should be 0 or 1")
    if x.rank < 1 or x.shape[-1] % 2:
        raise call.fail(f"x {x} needs a last axis of even length (the pairs it rotates)")
    half = x.shape[:-1] + (x.shape[-1] // 2,)
    for t, name in ((cos, "cos"), (sin, "sin")):
        if broadcast_shapes(call, [half, t.shape]) != half:
            raise call.fail(f"{name} {t} does not broadcast to {list(half)}, half of x {x}")
    return [x]


def _reference(xs, attrs):
    x, cos, sin = xs
    if attrs["interleaved"]:
        x1, x2 = x[..., 0::2], x[..., 1::2]
    else:
        x1, x2 = np.split(x, 2, axis=-1)
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    if attrs["interleaved"]:
        out = np.stack((real, imag), axis=-1).reshape(x.shape)
    else:
        out = np.concatenate((real, imag), axis=-1)
    return [out.astype(x.dtype, copy=False)]


register(
    OpDef(
        name="rotary_embedding",
        inputs=("x", "cos", "sin"),
        attrs={"interleaved": Attr("int", 0, "1: rotate the pairs (2i, 2i + 1); 0: the pairs (i, i + h)")},
        infer=_infer,
        reference=_reference,
        compound=True,
        doc="Rotates the feature pairs of x's last axis (length 2h) by the angles whose cos and sin "
            "broadcast to (..., h): x1 * cos - x2 * sin, x1 * sin + x2 * cos (ONNX RotaryEmbedding's "
            "arithmetic; the converter gathers the caches and keeps features past the rotary dim).",
    )
)
