"""Converters for the newest default-domain ONNX ops (opsets 26 and 27):
CausalConvWithState.

Each is built from existing fusionlang ops so it fuses and compiles like any other
node. CausalConvWithState is ONNX's own three-op pattern: the input left-padded with the
carried state (zeros when none), a depthwise valid conv, and the last k - 1 padded
positions handed on as the next state.

This module imports only the NodeContext; ``onnx_ops`` merges :data:`CONVERTERS` into
its table.
"""

from __future__ import annotations

from typing import Callable

from fusionlang.errors import ShapeError
from fusionlang.frontend.onnx_context import NodeContext

CONVERTERS: dict[str, Callable[[NodeContext], None]] = {}


def _converts(op_type: str):
    def register(fn):
        CONVERTERS[op_type] = fn
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
