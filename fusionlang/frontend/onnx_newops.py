"""Converters for the newest default-domain ONNX ops (opsets 26 and 27):
CausalConvWithState, LinearAttention and BitCast; and ai.onnx.preview's FlexAttention
(in :data:`DOMAIN_CONVERTERS`, keyed by domain too).

Each is built from existing fusionlang ops so it fuses and compiles like any other
node. CausalConvWithState is ONNX's own three-op pattern: the input left-padded with the
carried state (zeros when none), a depthwise valid conv, and the last k - 1 padded
positions handed on as the next state. LinearAttention's recurrence runs over the
sequence, whose length is known at import, so it is unrolled: one state update and one
read per token, in float32 like ONNX's reference, with grouped-query heads read by
splitting the query heads over the key/value heads they share instead of repeating the
state. BitCast maps onto the ``bitcast`` op (ops.bitcast), which generated code spells
through unsigned integers of the width (backend.bitcast). FlexAttention is the
``attention`` op (with onnx_attention's grouped-query head repeat; softmax in float32
for 16-bit inputs, as ONNX's reference does); with score_mod or prob_mod graphs it is
built step by step, each graph inlined (NodeContext.inline) where it applies.

``onnx_ops`` merges :data:`CONVERTERS` into its table; the importer reads
:data:`DOMAIN_CONVERTERS` itself.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from fusionlang.errors import ShapeError
from fusionlang.frontend.onnx_attention import repeat_heads
from fusionlang.frontend.onnx_context import NodeContext, onnx_dtype

CONVERTERS: dict[str, Callable[[NodeContext], None]] = {}
#: converters of ops outside ONNX's default domain, by (domain, op type)
DOMAIN_CONVERTERS: dict[tuple[str, str], Callable[[NodeContext], None]] = {}


def _converts(op_type: str):
    def register(fn):
        CONVERTERS[op_type] = fn
        return fn

    return register


def _converts_in(domain: str, op_type: str):
    def register(fn):
        DOMAIN_CONVERTERS[domain, op_type] = fn
        return fn

    return register


# ----- CausalConvWithState ------------------------------------------------------------
#: activation attribute -> whether SiLU follows the conv (swish is ONNX's alias of silu)
ACTIVATIONS = {"none": False, "silu": True, "swish": True}


@_converts("CausalConvWithState")
def _causal_conv_with_state(ctx: NodeContext) -> None:
    activation = ctx.attr("activation", "none")
    if activation not in ACTIVATIONS:
        raise ctx.fail(f"activation={activation!r} should be one of {', '.join(ACTIVATIONS)}")
    x, w = ctx.type(0), ctx.type(1)
    if x.rank != 3 or w.rank != 3 or w.shape[:2] != (x.shape[1], 1):
        raise ctx.fail(f"input {x} should be (batch, channels, length) and weight {w} (channels, 1, k)",
                       ShapeError)
    batch, channels, _ = x.shape
    carried = w.shape[2] - 1
    padded = _with_state(ctx, carried, (batch, channels, carried))
    attrs = {"kernel_shape": (w.shape[2],), "strides": (1,), "dilations": (1,), "pads": (0, 0),
             "group": channels}
    inputs = [padded, ctx.input(1)] + ([ctx.input(2)] if ctx.has_input(2) else [])
    if ctx.has_input(2) and ctx.type(2).shape != (channels,):
        raise ctx.fail(f"bias {ctx.type(2)} should be ({channels},)", ShapeError)
    if ACTIVATIONS[activation]:
        _silu(ctx, ctx.emit1("conv", inputs, attrs))
    else:
        ctx.emit_output("conv", inputs, attrs)
    if ctx.output_used(1):
        length = ctx.graph.types[padded].shape[2]
        ctx.emit1("slice", [padded], {"starts": (length - carried,), "ends": (length,), "axes": (2,),
                                      "steps": (1,)}, output=ctx.output(1))


def _with_state(ctx: NodeContext, carried: int, state_shape: tuple[int, ...]) -> str:
    """The input after the past state (B, C, k - 1 + L); zeros stand in for a missing one."""
    if not ctx.has_input(3):
        return ctx.emit1("pad", [ctx.input(0)], {"pads": (0, 0, carried, 0, 0, 0), "mode": "constant",
                                                 "value": 0.0})
    if ctx.type(3).shape != state_shape:
        raise ctx.fail(f"past_state {ctx.type(3)} should be {list(state_shape)}", ShapeError)
    return ctx.emit1("concat", [ctx.input(3), ctx.input(0)], {"axis": 2})


def _silu(ctx: NodeContext, value: str) -> None:
    """x * sigmoid(x) as output 0; ONNX computes it in float32 for narrower floats."""
    dtype = ctx.type(0).dtype
    if dtype in ("float16", "bfloat16"):
        wide = ctx.emit1("cast", [value], {"to": "float32"})
        gated = ctx.emit1("mul", [wide, ctx.emit1("sigmoid", [wide])])
        ctx.emit_output("cast", [gated], {"to": dtype})
        return
    ctx.emit_output("mul", [value, ctx.emit1("sigmoid", [value])])


# ----- LinearAttention ----------------------------------------------------------------
#: update_rule -> (gated: the state decays by exp(decay), delta: beta-weighted delta correction)
UPDATE_RULES = {"linear": (False, False), "gated": (True, False), "delta": (False, True),
                "gated_delta": (True, True)}
#: the recurrence is unrolled per token; longer sequences would make graphs too large
MAX_UNROLLED_STEPS = 256
#: the recurrence runs in float32 whatever the inputs' type (ONNX's reference does)
WORK = "float32"


@_converts("LinearAttention")
def _linear_attention(ctx: NodeContext) -> None:
    rule = ctx.attr("update_rule", "gated_delta")
    if rule not in UPDATE_RULES:
        raise ctx.fail(f"update_rule={rule!r} should be one of {', '.join(UPDATE_RULES)}")
    gated, delta = UPDATE_RULES[rule]
    for k, name, needed in ((4, "decay", gated), (5, "beta", delta)):
        if ctx.has_input(k) != needed:
            raise ctx.fail(f"update_rule={rule!r} {'requires' if needed else 'forbids'} the {name} input")
    sizes = _linear_sizes(ctx)
    batch, steps, q_heads, kv_heads, d_k, d_v = sizes
    if steps > MAX_UNROLLED_STEPS:
        raise ctx.unsupported(f"a sequence of {steps} tokens (at most {MAX_UNROLLED_STEPS} are unrolled)")
    scale = ctx.attr("scale", 0.0) or 1 / math.sqrt(d_k)
    state = _initial_state(ctx, (batch, kv_heads, d_k, d_v))
    inputs = {k: _wide(ctx, ctx.input(k)) for k in (0, 1, 2, 4, 5) if ctx.has_input(k)}
    outputs = []
    for step in range(steps):
        token = {k: _token(ctx, value, step) for k, value in inputs.items()}
        state = _update(ctx, state, token, sizes)
        outputs.append(_read(ctx, state, token[0], scale, sizes))
    out = outputs[0] if steps == 1 else ctx.emit1("concat", outputs, {"axis": 1})
    ctx.emit_output("cast", [out], {"to": ctx.type(0).dtype})
    if ctx.output_used(1):
        state_dtype = ctx.type(3).dtype if ctx.has_input(3) else ctx.type(0).dtype
        ctx.emit1("cast", [state], {"to": state_dtype}, output=ctx.output(1))


def _linear_sizes(ctx: NodeContext) -> tuple[int, ...]:
    """(batch, tokens, q heads, kv heads, key size, value size), checked against every input."""
    q_heads, kv_heads = ctx.attr("q_num_heads", 0), ctx.attr("kv_num_heads", 0)
    if q_heads <= 0 or kv_heads <= 0 or q_heads % kv_heads:
        raise ctx.fail(f"q_num_heads={q_heads} should be a positive multiple of kv_num_heads={kv_heads}")
    q, k, v = ctx.type(0), ctx.type(1), ctx.type(2)
    if not (q.rank == k.rank == v.rank == 3) or not q.shape[:2] == k.shape[:2] == v.shape[:2]:
        raise ctx.fail(f"query {q}, key {k} and value {v} should be (batch, tokens, heads * size) alike",
                       ShapeError)
    batch, steps, packed = q.shape
    d_k, d_v = packed // q_heads, v.shape[2] // kv_heads
    if packed % q_heads or k.shape[2] != kv_heads * d_k or v.shape[2] % kv_heads:
        raise ctx.fail(f"query {q}, key {k} and value {v} do not split into {q_heads} query and {kv_heads} "
                       f"key/value heads of one key size", ShapeError)
    for index, name, lasts in ((4, "decay", (kv_heads, kv_heads * d_k)), (5, "beta", (kv_heads, 1))):
        shape = ctx.type(index).shape if ctx.has_input(index) else None
        if shape is not None and (len(shape) != 3 or shape[:2] != (batch, steps) or shape[2] not in lasts):
            raise ctx.fail(f"{name} {ctx.type(index)} should be ({batch}, {steps}, one of {list(lasts)})",
                           ShapeError)
    return batch, steps, q_heads, kv_heads, d_k, d_v


def _initial_state(ctx: NodeContext, shape: tuple[int, ...]) -> str:
    if not ctx.has_input(3):
        return ctx.constant(np.zeros(shape), WORK)
    if ctx.type(3).shape != shape:
        raise ctx.fail(f"past_state {ctx.type(3)} should be {list(shape)}", ShapeError)
    return _wide(ctx, ctx.input(3))


def _wide(ctx: NodeContext, value: str) -> str:
    if ctx.graph.types[value].dtype == WORK:
        return value
    return ctx.emit1("cast", [value], {"to": WORK})


def _token(ctx: NodeContext, value: str, step: int) -> str:
    """Token ``step`` of a (batch, tokens, packed) input, as (batch, 1, packed)."""
    return ctx.emit1("slice", [value], {"starts": (step,), "ends": (step + 1,), "axes": (1,), "steps": (1,)})


def _update(ctx: NodeContext, state: str, token: dict[int, str], sizes) -> str:
    """S <- exp(g) S (gated); v <- beta (v - S^T k) (delta); S <- S + k v^T."""
    batch, _, _, kv_heads, d_k, d_v = sizes
    if 4 in token:  # decay per head (B, 1, H) or per key entry (B, 1, H * d_k), as (B, H, 1|d_k, 1)
        decay = ctx.emit1("reshape", [token[4]], {"shape": (batch, kv_heads, -1, 1)})
        state = ctx.emit1("mul", [state, ctx.emit1("exp", [decay])])
    key_row = ctx.emit1("reshape", [token[1]], {"shape": (batch, kv_heads, 1, d_k)})
    value = ctx.emit1("reshape", [token[2]], {"shape": (batch, kv_heads, 1, d_v)})
    if 5 in token:  # beta per head (B, 1, H) or shared (B, 1, 1), as (B, H|1, 1, 1)
        beta = ctx.emit1("reshape", [token[5]], {"shape": (batch, -1, 1, 1)})
        retrieved = ctx.emit1("matmul", [key_row, state])
        value = ctx.emit1("mul", [beta, ctx.emit1("sub", [value, retrieved])])
    key_column = ctx.emit1("reshape", [token[1]], {"shape": (batch, kv_heads, d_k, 1)})
    return ctx.emit1("add", [state, ctx.emit1("mul", [key_column, value])])


def _read(ctx: NodeContext, state: str, query: str, scale: float, sizes) -> str:
    """scale * q^T S for one token as (batch, 1, q heads * d_v); the query heads sharing a
    key/value head (consecutive ones) read its state together."""
    batch, _, q_heads, kv_heads, d_k, d_v = sizes
    grouped = ctx.emit1("reshape", [query], {"shape": (batch, kv_heads, q_heads // kv_heads, d_k)})
    read = ctx.emit1("mul", [ctx.emit1("matmul", [grouped, state]), ctx.constant(scale, WORK)])
    return ctx.emit1("reshape", [read], {"shape": (batch, 1, q_heads * d_v)})


# ----- BitCast ------------------------------------------------------------------------
@_converts("BitCast")
def _bit_cast(ctx: NodeContext) -> None:
    if ctx.attr("to") is None:
        raise ctx.fail("needs the 'to' attribute (the target dtype)")
    to = onnx_dtype(ctx.attr("to"), f"node {ctx.label!r} to")
    ctx.emit_output("bitcast", [ctx.input(0)], {"source": ctx.type(0).dtype, "to": to})


# ----- FlexAttention (ai.onnx.preview) -------------------------------------------------
@_converts_in("ai.onnx.preview", "FlexAttention")
def _flex_attention(ctx: NodeContext) -> None:
    q, k, v = ctx.type(0), ctx.type(1), ctx.type(2)
    if not q.rank == k.rank == v.rank == 4:
        raise ctx.fail(f"Q {q}, K {k} and V {v} should all be 4-D (batch, heads, sequence, size)", ShapeError)
    if k.shape[:3] != v.shape[:3] or k.shape[0] != q.shape[0] or k.shape[3] != q.shape[3]:
        raise ctx.fail(f"K {k} and V {v} do not fit Q {q} (as batch, heads, sequence, head size)", ShapeError)
    work = _softmax_type(ctx, q.dtype)
    scale = ctx.attr("scale")
    scale = float(scale) if scale is not None else 1 / math.sqrt(q.shape[3])
    keys, values = (repeat_heads(ctx, ctx.input(n), q.shape[1]) for n in (1, 2))
    if ctx.attr("score_mod") is None and ctx.attr("prob_mod") is None:
        inputs = [value if ctx.graph.types[value].dtype == work else ctx.emit1("cast", [value], {"to": work})
                  for value in (ctx.input(0), keys, values)]
        out = ctx.emit("attention", inputs, {"scale": scale, "softcap": 0.0}, ["", "", "", ""])[0]
    else:
        out = _modded_attention(ctx, keys, values, scale, work)
    ctx.emit_output("cast", [out], {"to": v.dtype})


def _modded_attention(ctx: NodeContext, keys: str, values: str, scale: float, work: str) -> str:
    """The core step by step, score_mod's graph applied to the scores and prob_mod's to the
    probabilities (ONNX's reference order: Q and K each scaled by sqrt(scale) in their type)."""
    dtype = ctx.type(0).dtype
    root = ctx.constant(np.sqrt(np.float32(scale)), dtype)
    q = ctx.emit1("mul", [ctx.input(0), root])
    k = ctx.emit1("transpose", [ctx.emit1("mul", [keys, root])], {"perm": (0, 1, 3, 2)})
    scores = _cast_to(ctx, ctx.emit1("matmul", [q, k]), work)
    scores = _modded(ctx, "score_mod", scores, work)
    probs = _modded(ctx, "prob_mod", ctx.emit1("softmax", [scores], {"axis": -1}), work)
    return ctx.emit1("matmul", [probs, _cast_to(ctx, values, work)])


def _modded(ctx: NodeContext, mod: str, value: str, work: str) -> str:
    body = ctx.attr(mod)
    if body is None:
        return value
    if len(body.output) != 1:
        raise ctx.fail(f"{mod} should have one output, has {len(body.output)}")
    (out,) = ctx.inline(body, [value])
    if ctx.graph.types[out].shape != ctx.graph.types[value].shape:
        raise ctx.fail(f"{mod} turns {ctx.graph.types[value]} into {ctx.graph.types[out]}; it should keep the shape",
                       ShapeError)
    return _cast_to(ctx, out, work)


def _cast_to(ctx: NodeContext, value: str, dtype: str) -> str:
    return value if ctx.graph.types[value].dtype == dtype else ctx.emit1("cast", [value], {"to": dtype})


def _softmax_type(ctx: NodeContext, dtype: str) -> str:
    """softmax_precision, else float32 for 16-bit floats (ONNX's reference), else the inputs'."""
    precision = ctx.attr("softmax_precision")
    if precision is not None:
        return onnx_dtype(precision, f"node {ctx.label!r} softmax_precision")
    return "float32" if dtype in ("float16", "bfloat16") else dtype
