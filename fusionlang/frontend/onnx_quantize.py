"""Converters of ONNX's quantization ops: QuantizeLinear and DequantizeLinear (opsets 10 to
25 forms: per tensor, per axis, blocked; integer and float8 types) and DynamicQuantizeLinear,
written with fusionlang ops. They register into ``onnx_ops.CONVERTERS``; the importer
imports this module for that."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from fusionlang.frontend.onnx_context import NodeContext, onnx_dtype
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
