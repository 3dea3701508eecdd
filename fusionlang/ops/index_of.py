"""index_of: where along an axis a value is first (or last) found; ArgMax and ArgMin are
index_of(x, reduce_max(x)) and index_of(x, reduce_min(x))."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import sympy as sp

    from fusionlang.ops import scalar
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import lazy_module, sp

    scalar = lazy_module("fusionlang.ops.scalar")

from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, i_sym, r_sym, v_sym
from fusionlang.ops.registry import Attr, OpCall, OpDef, register


def _axis(call: OpCall) -> int:
    x, target = call.input(0), call.input(1)
    if x.rank < 1:
        raise call.fail("x must have rank >= 1")
    axis = call.axis(call.attrs["axis"], x.rank)
    if x.shape[axis] == 0:
        raise call.fail(f"axis {axis} is empty: no element to find")
    want = x.shape[:axis] + (1,) + x.shape[axis + 1:]
    if target.shape != want or target.dtype != x.dtype:
        raise call.fail(f"target must be {TensorType(want, x.dtype)} (x with axis {axis} reduced), got {target}")
    return axis


def _infer(call: OpCall) -> list[TensorType]:
    axis = _axis(call)
    shape = call.input(0).shape
    out = shape[:axis] + (1,) + shape[axis + 1:] if call.attrs["keepdims"] else shape[:axis] + shape[axis + 1:]
    return [TensorType(out, "int64")]


def _reference(xs, attrs):
    x, target = xs
    axis = attrs["axis"] % x.ndim
    n = x.shape[axis]
    found = x == target
    if x.dtype.kind == "f":
        found |= np.isnan(x) & np.isnan(target)  # a NaN maximum is found where the first NaN is
    places = np.arange(n).reshape((n,) + (1,) * (x.ndim - axis - 1))
    if attrs["last"]:
        index = np.max(np.where(found, places, -1), axis=axis, keepdims=True)
    else:
        index = np.min(np.where(found, places, n), axis=axis, keepdims=True)
    return [np.asarray(index if attrs["keepdims"] else np.squeeze(index, axis), dtype=np.int64, order="C")]


def _access(call: OpCall) -> list[Stmt]:
    axis = _axis(call)
    x = call.input(0)
    n = x.shape[axis]
    keep = call.attrs["keepdims"]
    outer = [i_sym(d if keep or d < axis else d - 1) for d in range(x.rank)]
    x_index = tuple(r_sym(0) if d == axis else outer[d] for d in range(x.rank))
    target_index = tuple(sp.Integer(0) if d == axis else outer[d] for d in range(x.rank))
    found = sp.Or(sp.Eq(v_sym(0), v_sym(1)), sp.And(sp.Ne(scalar.IsNan(v_sym(0)), 0), sp.Ne(scalar.IsNan(v_sym(1)), 0)))
    missing, kind = (-1, "max") if call.attrs["last"] else (n, "min")
    body = sp.Piecewise((r_sym(0), found), (missing, True))
    return [Stmt(0, call.out_types[0].shape, (Read(0, x_index), Read(1, target_index)), body, reduce=kind,
                 reduce_extents=(n,))]


register(
    OpDef(
        name="index_of",
        inputs=("x", "target"),
        attrs={"axis": Attr("int", 0), "keepdims": Attr("int", 1),
               "last": Attr("int", 0, "1: the last place, 0: the first")},
        infer=_infer,
        reference=_reference,
        access=_access,
        doc="The first (or last) place along `axis` where x equals target (x's shape with `axis` reduced to 1; "
            "NaN finds NaN); size of the axis (or -1) where none does. ArgMax is index_of(x, reduce_max(x)).",
    )
)
