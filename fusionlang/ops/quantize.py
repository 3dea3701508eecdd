"""QuantizeLinear and DequantizeLinear (ONNX): linear (de)quantization with a scale and a zero
point per tensor, per slice along an axis, or per block of ``block_size`` elements along it.

Integer targets round x / scale to nearest even, add the zero point and saturate to the
type; float8 (and float4) targets round x / scale + zero point to that type (saturating by
default, see ir.float8). ONNX requires float8 zero points to be 0 and its reference ignores them; the
formula is applied all the same, which is the same where the model is valid. A float32
quotient is rounded to float32 first, as ONNX's reference computes it in float32, so
compiled code (which computes integer results in double) rounds the same ties.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import sympy as sp

    from fusionlang.ops import scalar
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import lazy_module, sp

    scalar = lazy_module("fusionlang.ops.scalar")

from fusionlang.ir.float8 import float8_max, is_float8, is_narrow_float, to_float8
from fusionlang.ir.narrow_int import int_range
from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, i_sym, out_indices, v_sym
from fusionlang.ops.registry import Attr, OpCall, OpDef, register

#: integer types a quantized tensor may have
INTEGER_TARGETS = ("uint8", "int8", "uint16", "int16", "uint4", "int4", "uint2", "int2")
_ATTRS = {
    "axis": Attr("int", 1, "the axis of a per-axis or blocked scale"),
    "block_size": Attr("int", 0, "elements per scale along axis (0: per tensor or per axis)"),
}


def _axis(call: OpCall, rank: int) -> int:
    return call.axis(call.attrs["axis"], rank)


def _check_param(call: OpCall, k: int, x: TensorType, what: str) -> None:
    """Is input k (scale or zero point) per tensor, per axis or per block of x?"""
    p, block = call.input(k), call.attrs["block_size"]
    if block < 0:
        raise call.fail(f"block_size={block} must not be negative")
    if block == 0:
        if p.size == 1 and p.rank <= 1:
            return
        axis = _axis(call, x.rank)
        if p.rank != 1 or p.shape[0] != x.shape[axis]:
            raise call.fail(f"{what} of shape {list(p.shape)} is neither one value nor one per element of "
                            f"axis {axis} (size {x.shape[axis]}) of x {x}")
        return
    axis = _axis(call, x.rank)
    want = tuple(-(-n // block) if j == axis else n for j, n in enumerate(x.shape))
    if p.shape != want:
        raise call.fail(f"{what} of shape {list(p.shape)} does not hold one value per block of {block} along "
                        f"axis {axis} of x {x} (expected {list(want)})")


def _check_params(call: OpCall, x: TensorType) -> None:
    _check_param(call, 1, x, "scale")
    if call.has_input(2):
        one_each = all(t.size == 1 and t.rank <= 1 for t in (call.input(1), call.input(2)))
        if call.input(2).shape != call.input(1).shape and not one_each:
            raise call.fail(f"zero_point {call.input(2)} and scale {call.input(1)} differ in shape")
        _check_param(call, 2, x, "zero_point")


def _param_index(call: OpCall, k: int, rank: int) -> tuple[sp.Expr, ...]:
    """Where the output element at the loop indices reads input k (scale or zero point)."""
    p, block = call.input(k), call.attrs["block_size"]
    if block == 0 and p.size == 1 and p.rank <= 1:
        return (sp.Integer(0),) * p.rank
    axis = _axis(call, rank)
    if block == 0:
        return (i_sym(axis),)
    return tuple(sp.floor(i_sym(j) / block) if j == axis else i_sym(j) for j in range(rank))


def broadcast_param(p: np.ndarray, x_shape: tuple[int, ...], axis: int, block: int) -> np.ndarray:
    """A scale or zero point shaped to broadcast against x (as onnx's reference reshapes it)."""
    if block == 0 and p.size == 1 and p.ndim <= 1:
        return p.reshape(())
    axis %= len(x_shape)
    if block == 0:
        return p.reshape([-1 if j == axis else 1 for j in range(len(x_shape))])
    return np.take(np.repeat(p, block, axis=axis), np.arange(x_shape[axis]), axis=axis)


def _reads(call: OpCall) -> tuple[Read, ...]:
    rank = call.input(0).rank
    reads = [Read(0, out_indices(rank)), Read(1, _param_index(call, 1, rank))]
    if call.has_input(2):
        reads.append(Read(2, _param_index(call, 2, rank)))
    return tuple(reads)


# ----- dequantize_linear --------------------------------------------------------------
def _dequantize_infer(call: OpCall) -> list[TensorType]:
    x, scale = call.input(0), call.input(1)
    if x.dtype not in INTEGER_TARGETS and not is_narrow_float(x.dtype):
        raise call.fail(f"x must be a quantized tensor ({', '.join(INTEGER_TARGETS)}, float8 or float4), "
                        f"got {x.dtype}")
    if not scale.is_float or is_narrow_float(scale.dtype):
        raise call.fail(f"scale must be a float tensor, got {scale.dtype}")
    if call.has_input(2) and call.input(2).dtype != x.dtype:
        raise call.fail(f"zero_point {call.input(2)} and x {x} differ in dtype")
    _check_params(call, x)
    return [x.with_dtype(call.attrs["to"] or scale.dtype)]


def _dequantize_reference(xs, attrs):
    x, scale = xs[0], xs[1]
    axis, block = attrs["axis"], attrs["block_size"]
    dx = x.astype(np.float32)
    if len(xs) > 2 and xs[2] is not None:
        dx = dx - broadcast_param(xs[2], x.shape, axis, block).astype(np.float32)
    y = dx * broadcast_param(scale, x.shape, axis, block)
    return [np.asarray(y.astype(attrs["to"] or scale.dtype), order="C")]


def _dequantize_access(call: OpCall) -> list[Stmt]:
    out = call.out_types[0]
    # as floats (exact): unsigned integers would wrap below the zero point
    shifted = scalar.Float32Round(v_sym(0)) - scalar.Float32Round(v_sym(2)) if call.has_input(2) else v_sym(0)
    return [Stmt(0, out.shape, _reads(call), shifted * v_sym(1))]


register(
    OpDef(
        name="dequantize_linear",
        inputs=("x", "scale", "zero_point"),
        min_inputs=2,
        attrs={**_ATTRS, "to": Attr("dtype", None, "result dtype (default: the scale's)")},
        infer=_dequantize_infer,
        reference=_dequantize_reference,
        access=_dequantize_access,
        doc="(x - zero_point) * scale, with scale and zero_point one value, one per element of axis, or "
            "one per block of block_size elements along axis.",
    )
)


# ----- quantize_linear ----------------------------------------------------------------
def _quantize_infer(call: OpCall) -> list[TensorType]:
    x, scale, to = call.input(0), call.input(1), call.attrs["to"]
    if x.dtype not in ("float32", "float64") or scale.dtype != x.dtype:
        raise call.fail(f"x and scale must both be float32 or float64 tensors, got {x.dtype} and {scale.dtype}")
    if to not in INTEGER_TARGETS and not is_narrow_float(to):
        raise call.fail(f"to={to} is not a quantized type ({', '.join(INTEGER_TARGETS)}, float8 or float4)")
    if call.has_input(2) and call.input(2).dtype != to:
        raise call.fail(f"zero_point {call.input(2)} is not of the target dtype {to}")
    _check_params(call, x)
    return [x.with_dtype(to)]


def _quantize_reference(xs, attrs):
    x, scale, to = xs[0], xs[1], attrs["to"]
    axis, block = attrs["axis"], attrs["block_size"]
    with np.errstate(over="ignore"):  # an overflowing quotient saturates
        q = x / broadcast_param(scale, x.shape, axis, block)  # in float32, as ONNX's reference
    zero_point = broadcast_param(xs[2], x.shape, axis, block) if len(xs) > 2 and xs[2] is not None else None
    if is_narrow_float(to):
        if zero_point is not None:
            q = q + zero_point.astype(np.float32)
        if not is_float8(to):  # float4 saturates by itself
            return [np.asarray(q.astype(to), order="C")]
        return [np.asarray(to_float8(q, to, bool(attrs["saturate"])), order="C")]
    rounded = np.rint(q).astype(np.float64)
    if zero_point is not None:
        rounded = rounded + zero_point
    low, high = int_range(to)
    return [np.asarray(np.clip(rounded, low, high).astype(to), order="C")]


def _quantize_access(call: OpCall) -> list[Stmt]:
    out, to = call.out_types[0], call.attrs["to"]
    q = v_sym(0) / v_sym(1)
    if call.input(0).dtype == "float32":
        q = scalar.Float32Round(q)
    if is_narrow_float(to):
        q = q + v_sym(2) if call.has_input(2) else q
        saturating = is_float8(to) and call.attrs["saturate"]  # (float4 saturates when stored)
        body = sp.Min(sp.Max(q, -float8_max(to)), float8_max(to)) if saturating else q
    else:
        shifted = scalar.RoundHalfEven(q) + v_sym(2) if call.has_input(2) else scalar.RoundHalfEven(q)
        low, high = int_range(to)
        body = sp.Min(sp.Max(shifted, low), high)
    return [Stmt(0, out.shape, _reads(call), body)]


register(
    OpDef(
        name="quantize_linear",
        inputs=("x", "scale", "zero_point"),
        min_inputs=2,
        attrs={**_ATTRS, "to": Attr("dtype", "uint8", "the quantized dtype (a zero point's dtype must match)"),
               "saturate": Attr("int", 1, "float8 targets: clamp to the finite range (1) or overflow to "
                                          "NaN/inf (0)")},
        infer=_quantize_infer,
        reference=_quantize_reference,
        access=_quantize_access,
        doc="Integer targets: saturate(round_even(x / scale) + zero_point); float8 and float4 targets: "
            "x / scale + zero_point rounded to that type. scale and zero_point as in dequantize_linear; x and "
            "scale float32 or float64 (the quotient rounds to their type).",
    )
)
