"""Converters for ONNX's transformer ops: Attention (opsets 23 to 25), RMSNormalization,
RotaryEmbedding and SwiGLU.

What lives where: the arithmetic of each op is a compound op opened by a checked
decomposition (``attention`` and ``rotary_embedding`` in ``std/attention.fuse``,
``rms_norm`` in ``std/normalize.fuse``). What varies structurally from one node to the
next is built here from primitive ops: heads split from 3-D inputs and merged back, the
past key/value cache concatenated (present_key, present_value), grouped-query heads
repeated, and every mask (attn_mask bool or float and shorter than the keys, is_causal
with its offset, the sliding window, nonpad_kv_seqlen) summed into one additive bias of 0
and -inf. Masks whose offsets are known at import are constants; those that depend on
nonpad_kv_seqlen are computed from it in the graph. A softmax_precision other than the
inputs' type runs the whole core in that type (inputs cast to it, outputs cast back).
SwiGLU is elementwise and needs no compound op: a * sigmoid(alpha * a) * b.

This module imports only the NodeContext; ``onnx_ops`` merges :data:`CONVERTERS` into
its table.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from fusionlang.errors import ShapeError
from fusionlang.frontend.onnx_context import NodeContext, onnx_dtype

CONVERTERS: dict[str, Callable[[NodeContext], None]] = {}


def _converts(op_type: str):
    def register(fn):
        CONVERTERS[op_type] = fn
        return fn

    return register


# ----- RMSNormalization ---------------------------------------------------------------
@_converts("RMSNormalization")
def _rms_normalization(ctx: NodeContext) -> None:
    x, scale = ctx.input(0), ctx.input(1)
    dtype = ctx.type(0).dtype
    attrs = {"axis": ctx.attr("axis", -1), "epsilon": ctx.attr("epsilon", 1e-5)}
    stash = onnx_dtype(ctx.attr("stash_type", 1), f"node {ctx.label!r} stash_type")
    if stash == dtype:
        ctx.emit_output("rms_norm", [x, scale], attrs)
        return
    # ONNX's function body: normalized in the stash type, cast back, then scaled
    one = ctx.constant(np.ones(1), stash)
    normalized = ctx.emit1("rms_norm", [ctx.emit1("cast", [x], {"to": stash}), one], attrs)
    ctx.emit_output("mul", [ctx.emit1("cast", [normalized], {"to": dtype}), scale])


# ----- SwiGLU -------------------------------------------------------------------------
@_converts("SwiGLU")
def _swiglu(ctx: NodeContext) -> None:
    a, b = ctx.input(0), ctx.input(1)
    if ctx.type(0) != ctx.type(1):
        raise ctx.fail(f"a {ctx.type(0)} and b {ctx.type(1)} must have one shape and dtype", ShapeError)
    alpha = ctx.constant(ctx.attr("alpha", 1.0), ctx.type(0).dtype)
    gate = ctx.emit1("sigmoid", [ctx.emit1("mul", [a, alpha])])
    ctx.emit_output("mul", [ctx.emit1("mul", [a, gate]), b])


# ----- RotaryEmbedding ----------------------------------------------------------------
@_converts("RotaryEmbedding")
def _rotary_embedding(ctx: NodeContext) -> None:
    x = ctx.type(0)
    heads = _heads_last(ctx, ctx.input(0), x.shape, ctx.attr("num_heads", 0))  # (B, S, H, D)
    size = ctx.graph.types[heads].shape[3]
    rotary = ctx.attr("rotary_embedding_dim", 0) or size
    if rotary % 2 or not 0 < rotary <= size:
        raise ctx.fail(f"rotary_embedding_dim={rotary} should be even and at most the head size {size}")
    cos, sin = (_angles(ctx, k, rotary // 2) for k in (1, 2))
    rotated = heads
    if rotary < size:
        rotated = ctx.emit1("slice", [heads], _last_axis(0, rotary))
    out = ctx.emit1("rotary_embedding", [rotated, cos, sin], {"interleaved": ctx.attr("interleaved", 0)})
    if rotary < size:
        out = ctx.emit1("concat", [out, ctx.emit1("slice", [heads], _last_axis(rotary, size))], {"axis": 3})
    if x.rank == 4:
        ctx.emit_output("transpose", [out], {"perm": (0, 2, 1, 3)})
    else:
        ctx.emit_output("reshape", [out], {"shape": x.shape})


def _heads_last(ctx: NodeContext, value: str, shape: tuple[int, ...], num_heads: int) -> str:
    """x as (batch, sequence, heads, head size): 4-D input is (B, H, S, D), 3-D (B, S, H * D)."""
    if len(shape) == 4:
        return ctx.emit1("transpose", [value], {"perm": (0, 2, 1, 3)})
    if len(shape) != 3:
        raise ctx.fail(f"input of shape {list(shape)} should be 3-D or 4-D", ShapeError)
    if num_heads <= 0 or shape[2] % num_heads:
        raise ctx.fail(f"3-D input of shape {list(shape)} needs num_heads dividing {shape[2]}, got {num_heads}",
                       ShapeError)
    return ctx.emit1("reshape", [value], {"shape": (shape[0], shape[1], num_heads, shape[2] // num_heads)})


def _angles(ctx: NodeContext, k: int, half: int) -> str:
    """cos (k=1) or sin (k=2) as (B, S, 1, rotary/2), read at the position ids when given."""
    cache = ctx.input(k)
    if ctx.has_input(3):
        cache = ctx.emit1("gather", [cache, ctx.input(3)], {"axis": 0})
    shape = ctx.graph.types[cache].shape
    if len(shape) != 3 or shape[-1] != half:
        raise ctx.fail(f"{('cos', 'sin')[k - 1]} cache read as {list(shape)} should be (batch, sequence, {half})",
                       ShapeError)
    return ctx.emit1("unsqueeze", [cache], {"axes": (2,)})


def _last_axis(start: int, end: int) -> dict:
    return {"starts": (start,), "ends": (end,), "axes": (3,), "steps": (1,)}


# ----- Attention ----------------------------------------------------------------------
#: qk_matmul_output_mode -> output of the attention op it reads
QK_OUTPUT = {0: 1, 1: 1, 2: 2, 3: 3}


@_converts("Attention")
def _attention(ctx: NodeContext) -> None:
    q_type, k_type, v_type = ctx.type(0), ctx.type(1), ctx.type(2)
    if not (q_type.rank == k_type.rank == v_type.rank and q_type.rank in (3, 4)):
        raise ctx.fail(f"Q {q_type}, K {k_type} and V {v_type} should all be 3-D or all 4-D", ShapeError)
    mode = ctx.attr("qk_matmul_output_mode", 0)
    if mode not in QK_OUTPUT:
        raise ctx.fail(f"qk_matmul_output_mode={mode} should be 0, 1, 2 or 3")
    q = _split_heads(ctx, 0, ctx.attr("q_num_heads", 0))
    k = _split_heads(ctx, 1, ctx.attr("kv_num_heads", 0))
    v = _split_heads(ctx, 2, ctx.attr("kv_num_heads", 0))
    past = _past_length(ctx, k, v)
    k = _with_past(ctx, 4, k, 1)
    v = _with_past(ctx, 5, v, 2)
    batch, q_heads, q_len, head_size = ctx.graph.types[q].shape
    k_shape = ctx.graph.types[k].shape
    if k_shape[0] != batch or ctx.graph.types[v].shape[:3] != k_shape[:3] or k_shape[3] != head_size:
        raise ctx.fail(f"K {list(k_shape)} and V {list(ctx.graph.types[v].shape)} do not fit Q "
                       f"{list(ctx.graph.types[q].shape)} (as batch, heads, sequence, head size)", ShapeError)
    k, v = (repeat_heads(ctx, t, q_heads) for t in (k, v))
    bias = _bias(ctx, (batch, q_len, k_shape[2]), past)
    scale = ctx.attr("scale")
    attrs = {"scale": float(scale) if scale is not None else 1 / math.sqrt(head_size),
             "softcap": float(ctx.attr("softcap", 0.0))}
    inputs = [q, k, v] + ([bias] if bias else [])
    outputs = ["", "", "", ""]
    if ctx.output_used(3):
        outputs[QK_OUTPUT[mode]] = ctx.output(3)
    y = _core(ctx, inputs, attrs, outputs)
    if q_type.rank == 4:
        ctx.alias(0, y)
        return
    heads_first = ctx.emit1("transpose", [y], {"perm": (0, 2, 1, 3)})
    ctx.emit_output("reshape", [heads_first], {"shape": (batch, q_len, -1)})


def _split_heads(ctx: NodeContext, k: int, num_heads: int) -> str:
    """Input k as (batch, heads, sequence, head size); a 3-D one is split into ``num_heads``."""
    shape = ctx.type(k).shape
    if len(shape) == 4:
        return ctx.input(k)
    if num_heads <= 0 or shape[2] % num_heads:
        raise ctx.fail(f"3-D input {k} of shape {list(shape)} needs q_num_heads and kv_num_heads dividing its "
                       f"hidden size, got {num_heads}", ShapeError)
    split = ctx.emit1("reshape", [ctx.input(k)], {"shape": (shape[0], shape[1], num_heads, shape[2] // num_heads)})
    return ctx.emit1("transpose", [split], {"perm": (0, 2, 1, 3)})


def _past_length(ctx: NodeContext, k: str, v: str) -> int:
    if ctx.has_input(4) != ctx.has_input(5):
        raise ctx.fail("past_key and past_value must be given together")
    if ctx.has_input(6) and ctx.has_input(4):
        raise ctx.fail("nonpad_kv_seqlen cannot be combined with past_key and past_value")
    return ctx.type(4).shape[2] if ctx.has_input(4) and ctx.type(4).rank == 4 else 0


def _with_past(ctx: NodeContext, k: int, current: str, output: int) -> str:
    """K or V after the cache (present_key / present_value, ONNX output ``output``)."""
    if not ctx.has_input(k):
        if ctx.output_used(output):
            ctx.alias(output, current)
        return current
    past, now = ctx.type(k), ctx.graph.types[current]
    if past.rank != 4 or past.shape[:2] != now.shape[:2] or past.shape[3] != now.shape[3]:
        raise ctx.fail(f"past input {k} {past} does not fit the new entries {now}", ShapeError)
    return ctx.emit1("concat", [ctx.input(k), current], {"axis": 2}, output=ctx.output(output))


def repeat_heads(ctx: NodeContext, value: str, q_heads: int) -> str:
    """Grouped-query attention: each K/V head repeated for the q heads that share it
    ([h0, h0, h1, h1, ...])."""
    b, heads, length, size = ctx.graph.types[value].shape
    if heads == q_heads:
        return value
    if q_heads % heads:
        raise ctx.fail(f"{q_heads} query heads cannot share {heads} key/value heads evenly", ShapeError)
    grown = ctx.emit1("expand", [ctx.emit1("unsqueeze", [value], {"axes": (2,)})],
                      {"shape": (b, heads, q_heads // heads, length, size)})
    return ctx.emit1("reshape", [grown], {"shape": (b, q_heads, length, size)})


def _core(ctx: NodeContext, inputs: list[str], attrs: dict, outputs: list[str]) -> str:
    """The attention op (in softmax_precision's type when that differs); returns y."""
    dtype = ctx.graph.types[inputs[0]].dtype
    precision = ctx.attr("softmax_precision")
    work = onnx_dtype(precision, f"node {ctx.label!r} softmax_precision") if precision is not None else dtype
    if work == dtype:
        return ctx.emit("attention", inputs, attrs, outputs)[0]
    cast = [ctx.emit1("cast", [value], {"to": work}) for value in inputs]
    results = ctx.emit("attention", cast, attrs, ["", "", "", ""])
    for result, name in zip(results, outputs):
        if name:
            ctx.emit1("cast", [result], {"to": dtype}, output=name)
    return ctx.emit1("cast", [results[0]], {"to": dtype})


# ----- the additive bias: every mask as 0 (attend) or -inf -----------------------------
def _bias(ctx: NodeContext, sizes: tuple[int, int, int], past: int) -> str:
    """The sum of the node's masks, or '' when it has none. ``sizes``: (batch, q, kv)."""
    terms = []
    if ctx.has_input(3):
        terms.append(_mask_term(ctx, sizes[2]))
    nonpad = _nonpad_offset(ctx, sizes) if ctx.has_input(6) else ""
    if ctx.attr("is_causal", 0):
        terms.append(_band(ctx, sizes, past, nonpad, left=-1, right=0))
    left, right = ctx.attr("left_window_size", -1), ctx.attr("right_window_size", -1)
    if left < -1 or right < -1:
        raise ctx.fail(f"left_window_size={left} and right_window_size={right} should be -1 or nonnegative")
    if left >= 0 or right >= 0:
        terms.append(_band(ctx, sizes, past, nonpad, left=left, right=right))
    if ctx.has_input(6):
        terms.append(_padding(ctx, sizes))
    if not terms:
        return ""
    bias = terms[0]
    for term in terms[1:]:
        bias = ctx.emit1("add", [bias, term])
    return bias


def _dtype(ctx: NodeContext) -> str:
    return ctx.type(0).dtype


def _select(ctx: NodeContext, allowed: str) -> str:
    """0 where ``allowed``, -inf elsewhere, in Q's type."""
    dtype = _dtype(ctx)
    return ctx.emit1("where", [allowed, ctx.constant(0, dtype), ctx.constant(-np.inf, dtype)])


def _mask_term(ctx: NodeContext, kv: int) -> str:
    mask, mask_type = ctx.input(3), ctx.type(3)
    is_bool = mask_type.dtype == "bool"
    if not is_bool and mask_type.dtype != _dtype(ctx):
        raise ctx.fail(f"attn_mask {mask_type} should be bool or {_dtype(ctx)} like Q", ShapeError)
    if mask_type.rank < 1 or mask_type.shape[-1] > kv:
        raise ctx.fail(f"attn_mask {mask_type} should have at most {kv} keys on its last axis", ShapeError)
    missing = kv - mask_type.shape[-1]
    if missing:  # keys the mask does not cover are masked out
        pads = (0,) * (2 * mask_type.rank - 1) + (missing,)
        mask = ctx.emit1("pad", [mask], {"pads": pads, "mode": "constant",
                                         "value": 0.0 if is_bool else float("-inf")})
    return _select(ctx, mask) if is_bool else mask


def _nonpad_offset(ctx: NodeContext, sizes: tuple[int, int, int]) -> str:
    """nonpad_kv_seqlen - q as (batch, 1, 1, 1): where each batch's queries start."""
    lengths = ctx.type(6)
    if lengths.shape != (sizes[0],) or lengths.dtype not in ("int64", "int32"):
        raise ctx.fail(f"nonpad_kv_seqlen {lengths} should be int64[{sizes[0]}]", ShapeError)
    lengths = ctx.input(6)
    if ctx.type(6).dtype != "int64":
        lengths = ctx.emit1("cast", [lengths], {"to": "int64"})
    start = ctx.emit1("sub", [lengths, ctx.constant(sizes[1], "int64")])
    return ctx.emit1("reshape", [start], {"shape": (sizes[0], 1, 1, 1)})


def _band(ctx: NodeContext, sizes, past: int, nonpad: str, left: int, right: int) -> str:
    """Query i (at position i + offset) attends key j when offset + i - j lies in
    [-right, left] (-1: unbounded); causal is left unbounded, right 0. The offset is the
    past length, or nonpad_kv_seqlen - q per batch."""
    q, kv = sizes[1], sizes[2]
    lag = np.arange(q)[:, None] - np.arange(kv)[None, :]  # i - j
    if not nonpad:
        lag = lag + past
        allowed = np.ones_like(lag, dtype=bool)
        if left >= 0:
            allowed &= lag <= left
        if right >= 0:
            allowed &= -lag <= right
        return ctx.constant(np.where(allowed, 0, -np.inf), _dtype(ctx))
    lag = ctx.emit1("add", [ctx.constant(lag, "int64"), nonpad])  # (B, 1, q, kv)
    allowed = ""
    for bound, value in ((left, lag), (right, "")):
        if bound < 0:
            continue
        value = value or ctx.emit1("neg", [lag])
        within = ctx.emit1("less_equal", [value, ctx.constant(bound, "int64")])
        allowed = ctx.emit1("and", [allowed, within]) if allowed else within
    return _select(ctx, allowed)


def _padding(ctx: NodeContext, sizes) -> str:
    """Keys at or past nonpad_kv_seqlen[b] are masked, as (batch, 1, 1, kv)."""
    lengths = ctx.input(6)
    if ctx.type(6).dtype != "int64":
        lengths = ctx.emit1("cast", [lengths], {"to": "int64"})
    keys = ctx.constant(np.arange(sizes[2]).reshape(1, 1, 1, -1), "int64")
    allowed = ctx.emit1("less", [keys, ctx.emit1("reshape", [lengths], {"shape": (sizes[0], 1, 1, 1)})])
    return _select(ctx, allowed)
