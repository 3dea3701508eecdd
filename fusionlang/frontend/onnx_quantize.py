"""Converters of ONNX's quantization ops: QuantizeLinear and DequantizeLinear (opsets 10 to
25 forms: per tensor, per axis, blocked; integer and float8 types), and, written with
fusionlang ops, DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul and
QLinearConv (integer products accumulate exactly in double, then requantize as ONNX's
reference does). They register into ``onnx_ops.CONVERTERS``; the importer imports this
module for that."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from fusionlang.frontend.onnx_context import NodeContext, onnx_dtype
from fusionlang.frontend.onnx_ops import _window as conv_window  # the Conv converter's attributes
from fusionlang.frontend.onnx_ops import converts


def _linear_attrs(ctx: NodeContext) -> dict:
    return {"axis": ctx.attr("axis", 1), "block_size": ctx.attr("block_size", 0)}


def _output_dtype(ctx: NodeContext) -> str | None:
    code = ctx.attr("output_dtype", 0)
    return onnx_dtype(code, f"node {ctx.label!r} ({ctx.op_type}) output_dtype") if code else None


@converts("QuantizeLinear")
def _quantize_linear(ctx: NodeContext) -> None:
    precision = ctx.attr("precision", 0)
    if precision and precision != TensorProto.FLOAT:
        raise ctx.unsupported(f"precision={TensorProto.DataType.Name(precision)} (only FLOAT)")
    declared = _output_dtype(ctx)
    to = ctx.type(2).dtype if ctx.has_input(2) else declared or "uint8"
    if declared and declared != to:
        raise ctx.fail(f"output_dtype {declared} differs from the zero point's dtype {to}")
    attrs = {**_linear_attrs(ctx), "to": to, "saturate": ctx.attr("saturate", 1)}
    ctx.emit_output("quantize_linear", ctx.inputs(), attrs)


@converts("DequantizeLinear")
def _dequantize_linear(ctx: NodeContext) -> None:
    ctx.emit_output("dequantize_linear", ctx.inputs(), {**_linear_attrs(ctx), "to": _output_dtype(ctx)})


@converts("DynamicQuantizeLinear")
def _dynamic_quantize_linear(ctx: NodeContext) -> None:
    """uint8 quantization whose range [min(x, 0), max(x, 0)] maps onto [0, 255], as ONNX's
    function body computes it: scale = (max - min) / 255 (1 / 255 when max = min), zero point
    = round_even(clip(-min / scale, 0, 255))."""
    x = ctx.input(0)
    if ctx.type(0).dtype != "float32":
        raise ctx.fail(f"x must be a float32 tensor, got {ctx.type(0).dtype}")
    whole = {"axes": (), "keepdims": 0}
    zero = ctx.constant(np.float32(0))
    high = ctx.emit1("max", [ctx.emit1("reduce_max", [x], whole), zero])
    low = ctx.emit1("min", [ctx.emit1("reduce_min", [x], whole), zero])
    span = ctx.emit1("sub", [high, low])
    span = ctx.emit1("where", [ctx.emit1("equal", [high, low]), ctx.constant(np.float32(1)), span])
    scale = ctx.emit1("div", [span, ctx.constant(np.float32(255))], output=ctx.output(1))
    # -min / scale rounded and clipped to [0, 255]: the quantization of -min with no zero point
    zero_point = ctx.emit1("quantize_linear", [ctx.emit1("neg", [low]), scale], {"to": "uint8"},
                           output=ctx.output(2))
    ctx.emit_output("quantize_linear", [x, scale, zero_point], {"to": "uint8"})


# ----- integer matrix products and convolutions, and their requantized forms ----------------
def _as_int32(ctx: NodeContext, k: int, zero_k: int, per_row: bool = False) -> str:
    """Input k widened to int32, less its zero point (input zero_k) where one is given; a
    1-D zero point of a matrix is one per row with ``per_row`` (else per column)."""
    value = ctx.emit1("cast", [ctx.input(k)], {"to": "int32"})
    if not ctx.has_input(zero_k):
        return value
    zero = ctx.emit1("cast", [ctx.input(zero_k)], {"to": "int32"})
    zero_type = ctx.type(zero_k)
    if per_row and zero_type.rank == 1 and zero_type.size > 1:
        zero = ctx.emit1("reshape", [zero], {"shape": (zero_type.size, 1)})
    return ctx.emit1("sub", [value, zero])


def _per_output_channel(ctx: NodeContext, value: str, rank: int) -> str:
    """A per-output-channel vector of a convolution's weights shaped to broadcast over them."""
    t = ctx.graph.types[value]
    if t.rank == 1 and t.size > 1:
        return ctx.emit1("reshape", [value], {"shape": (t.size,) + (1,) * (rank - 1)})
    return value


def _requantize(ctx: NodeContext, accumulated: str, multiplier: str, zero_k: int, like_k: int) -> None:
    """Output 0 = saturate(round_even(accumulated * multiplier + zero point)) in the zero
    point's type (input zero_k), else input like_k's: in double, as ONNX's reference
    (int32 times float32 is a float64 product there)."""
    wide = ctx.emit1("mul", [ctx.emit1("cast", [accumulated], {"to": "float64"}),
                             ctx.emit1("cast", [multiplier], {"to": "float64"})])
    if ctx.has_input(zero_k):
        wide = ctx.emit1("add", [wide, ctx.emit1("cast", [ctx.input(zero_k)], {"to": "float64"})])
    to = ctx.type(zero_k).dtype if ctx.has_input(zero_k) else ctx.type(like_k).dtype
    ctx.emit_output("quantize_linear", [wide, ctx.constant(np.float64(1.0))], {"to": to})


@converts("MatMulInteger")
def _matmul_integer(ctx: NodeContext) -> None:
    ctx.emit_output("matmul", [_as_int32(ctx, 0, 2, per_row=True), _as_int32(ctx, 1, 3)])


@converts("QLinearMatMul")
def _qlinear_matmul(ctx: NodeContext) -> None:
    a_scale = ctx.input(1)
    if ctx.type(1).rank == 1 and ctx.type(1).size > 1:  # one scale per row of a
        a_scale = ctx.emit1("reshape", [a_scale], {"shape": (ctx.type(1).size, 1)})
    # (integer products accumulate exactly in double, and the product below is double anyway)
    wide = [ctx.emit1("cast", [_as_int32(ctx, k, zero, per_row=k == 0)], {"to": "float64"})
            for k, zero in ((0, 2), (3, 5))]
    # a_scale * b_scale / y_scale in the scales' type, as ONNX's reference computes it
    ratio = ctx.emit1("div", [ctx.emit1("mul", [a_scale, ctx.input(4)]), ctx.input(6)])
    _requantize(ctx, ctx.emit1("matmul", wide), ratio, 7, 0)


def _integer_conv(ctx: NodeContext, x_k: int, x_zero: int, w_k: int, w_zero: int, bias_k: int | None) -> str:
    """The convolution of the zero-point-shifted integer x and w, exactly, in float64."""
    rank = ctx.type(w_k).rank
    x = ctx.emit1("cast", [_as_int32(ctx, x_k, x_zero)], {"to": "float64"})
    w = ctx.emit1("cast", [ctx.input(w_k)], {"to": "int32"})
    if ctx.has_input(w_zero):
        zero = _per_output_channel(ctx, ctx.emit1("cast", [ctx.input(w_zero)], {"to": "int32"}), rank)
        w = ctx.emit1("sub", [w, zero])
    inputs = [x, ctx.emit1("cast", [w], {"to": "float64"})]
    if bias_k is not None and ctx.has_input(bias_k):
        inputs.append(ctx.emit1("cast", [ctx.input(bias_k)], {"to": "float64"}))
    kernel = tuple(ctx.attr("kernel_shape", ctx.type(w_k).shape[2:]))
    return ctx.emit1("conv", inputs, {**conv_window(ctx, kernel), "group": ctx.attr("group", 1)})


@converts("ConvInteger")
def _conv_integer(ctx: NodeContext) -> None:
    ctx.emit_output("cast", [_integer_conv(ctx, 0, 2, 1, 3, None)], {"to": "int32"})


@converts("QLinearConv")
def _qlinear_conv(ctx: NodeContext) -> None:
    accumulated = _integer_conv(ctx, 0, 2, 3, 5, 8)
    w_scale = _per_output_channel(ctx, ctx.input(4), ctx.type(0).rank - 1)
    ratio = ctx.emit1("div", [ctx.emit1("mul", [ctx.input(1), w_scale]), ctx.input(6)])
    _requantize(ctx, accumulated, ratio, 7, 0)
