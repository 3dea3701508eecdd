"""Reductions over a set of axes (ONNX Reduce*): sum, mean, max, min, prod."""

from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import sympy as sp
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import sp

from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, acc_sym, i_sym, r_sym, v_sym
from fusionlang.ops.common import accumulator, highest, lowest
from fusionlang.ops.registry import Attr, OpCall, OpDef, register

_AXES_ATTRS = {
    "axes": Attr("ints", (), "axes to reduce; empty = all (unless noop_with_empty_axes)"),
    "keepdims": Attr("int", 1),
    "noop_with_empty_axes": Attr("int", 0),
}


def reduced_axes(call: OpCall, rank: int) -> tuple[int, ...]:
    axes = call.attrs["axes"]
    if not axes:
        return () if call.attrs["noop_with_empty_axes"] else tuple(range(rank))
    normalized = tuple(sorted({call.axis(a, rank, name="axes") for a in axes}))
    if len(normalized) != len(axes):
        raise call.fail(f"axes {list(axes)} repeat an axis")
    return normalized


def _infer(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    axes = reduced_axes(call, x.rank)
    if call.attrs["keepdims"]:
        shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape))
    else:
        shape = tuple(n for d, n in enumerate(x.shape) if d not in axes)
    return [TensorType(shape, x.dtype)]


def _access(kind: str):
    def access(call: OpCall) -> list[Stmt]:
        x = call.input(0)
        axes = reduced_axes(call, x.rank)
        index, out_pos = [], 0
        extents: list[int] = []
        for d, n in enumerate(x.shape):
            if d in axes:
                index.append(r_sym(len(extents)))
                extents.append(n)
                out_pos += 1 if call.attrs["keepdims"] else 0
            else:
                index.append(i_sym(out_pos))
                out_pos += 1
        count = prod(extents)
        body, finalize = v_sym(0), None
        if kind == "mean":
            body, finalize = _scaled_mean(count)
        reduction = "sum" if kind == "mean" else kind
        out = call.out_types[0]
        return [Stmt(0, out.shape, (Read(0, tuple(index)),), body, reduce=reduction,
                     reduce_extents=tuple(extents), finalize=finalize)]

    return access


def _scaled_mean(count: int):
    """(body, finalize) of a mean of ``count`` terms.

    Each term is scaled by 2**-k, with 2**k >= count, before it is added: a float sum of
    values near the largest float then stays finite when their mean does (dividing the sum
    afterwards overflowed to inf), and the scaling is exact, so the sum is the sum of the
    terms, only smaller; finalize multiplies by 2**k / count. The mean of nothing is NaN."""
    if count == 0:
        return v_sym(0), sp.nan
    k = (count - 1).bit_length()
    return v_sym(0) * sp.Rational(1, 2**k), acc_sym() * sp.Float(2**k / count, 30)


def _reference(fn):
    def reference(xs, attrs):
        x = xs[0]
        call = OpCall("reduce", "?", attrs, [TensorType(x.shape, x.dtype)])
        axes = reduced_axes(call, x.ndim)
        if not axes:
            return [x.copy()]
        return [np.asarray(fn(x, axis=axes, keepdims=bool(attrs["keepdims"]))).astype(x.dtype, copy=False)]

    return reference


def _max(x, axis, keepdims):
    # an empty reduction gives the identity (ONNX), not an error
    return np.max(x, axis=axis, keepdims=keepdims, initial=lowest(x.dtype))


def _min(x, axis, keepdims):
    return np.min(x, axis=axis, keepdims=keepdims, initial=highest(x.dtype))


def _summing(fn, start):
    def reduce(x, axis, keepdims):
        return fn(x, axis=axis, keepdims=keepdims, dtype=accumulator(x.dtype), initial=start(x, axis))

    return reduce


def _sum_start(x: np.ndarray, axis) -> float | int:
    """A float sum starts at -0.0, IEEE's additive identity (NumPy's +0 made a sum of -0.0s
    +0, where onnxruntime and the generated code give -0); a sum of nothing is +0."""
    empty = any(x.shape[a] == 0 for a in axis)
    return -0.0 if np.dtype(accumulator(x.dtype)).kind == "f" and not empty else 0


def _mean(x, axis, keepdims):
    # the mean of an empty set of values is NaN (NumPy's answer, without its warning)
    with np.errstate(invalid="ignore", divide="ignore"):
        total = _summing(np.sum, _sum_start)(x, axis, keepdims)
        return total / np.prod([x.shape[a] for a in axis])


for _kind, _fn in (("sum", _summing(np.sum, _sum_start)), ("mean", _mean), ("max", _max), ("min", _min),
                   ("prod", _summing(np.prod, lambda x, axis: 1))):
    register(
        OpDef(
            name=f"reduce_{_kind}",
            inputs=("x",),
            attrs=dict(_AXES_ATTRS),
            infer=_infer,
            reference=_reference(_fn),
            access=_access(_kind),
            doc=f"Reduce by {_kind} over `axes` (all axes when empty).",
        )
    )

__all__ = ["reduced_axes"]
