"""Sorting along one axis, in two loop-form steps (ONNX TopK is both, then a gather):

* ``sort_position``: each element's place in the sorted order of its line, the number of
  elements that come before it (a reduction over the axis);
* ``sorted_indices``: for each of the first k places, which element is there (the one
  position whose place it is: a reduction over the axis again).

The order is total, so places are a permutation of 0..n-1: larger first (``largest``) or
smaller first, equal values by lower index, and NaN as larger than any number, as ONNX's
reference TopK orders them. Both steps cost n per element: a sort by counting, O(n^2) per
line, fine for the short axes TopK sees in detection heads and beam search, slow on a
vocabulary-sized one.
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

from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, i_sym, out_indices, r_sym, v_sym
from fusionlang.ops.registry import Attr, OpCall, OpDef, register


def _axis(call: OpCall, x: TensorType) -> int:
    if x.dtype == "bool":
        raise call.fail("sorting needs a numeric input, got bool")
    if x.rank < 1:
        raise call.fail("input must have rank >= 1")
    return call.axis(call.attrs["axis"], x.rank)


def sort_keys(x: np.ndarray, axis: int, largest: bool) -> np.ndarray:
    """The positions along ``axis`` of x's elements in sorted order (the order above)."""
    position = np.indices(x.shape)[axis]
    # lexsort sorts ascending by its last key first; largest-first is the flip of ascending
    # order with ties by higher position first
    keys = [-position if largest else position]
    if x.dtype.kind == "f":
        nan = np.isnan(x)
        keys += [np.where(nan, 0, x), nan]
    else:
        keys.append(x)
    order = np.lexsort(keys, axis=axis)
    return np.flip(order, axis) if largest else order


def _greater(a: sp.Expr, b: sp.Expr, floating: bool) -> sp.Basic:
    """a after b in ascending order, NaN last."""
    if not floating:
        return a > b
    return sp.Or(sp.And(sp.Eq(scalar.IsNan(a), 1), sp.Eq(scalar.IsNan(b), 0)), a > b)


def _same(a: sp.Expr, b: sp.Expr, floating: bool) -> sp.Basic:
    if not floating:
        return sp.Eq(a, b)
    return sp.Or(sp.Eq(a, b), sp.And(sp.Eq(scalar.IsNan(a), 1), sp.Eq(scalar.IsNan(b), 1)))


# ----- sort_position ------------------------------------------------------------------------
def _infer_position(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    _axis(call, x)
    return [TensorType(x.shape, "int64")]


def _reference_position(xs, attrs):
    x = xs[0]
    axis = attrs["axis"] % x.ndim
    order = sort_keys(x, axis, bool(attrs["largest"]))
    places = np.empty(x.shape, np.int64)
    np.put_along_axis(places, order, np.indices(x.shape)[axis], axis=axis)
    return [places]


def _access_position(call: OpCall) -> list[Stmt]:
    x = call.input(0)
    axis = _axis(call, x)
    here = out_indices(x.rank)
    other = list(here)
    other[axis] = r_sym(0)
    floating = x.dtype.startswith("float")
    them, me = v_sym(0), v_sym(1)
    ahead = _greater(them, me, floating) if call.attrs["largest"] else _greater(me, them, floating)
    before = sp.Or(ahead, sp.And(_same(them, me, floating), r_sym(0) < i_sym(axis)))
    reads = (Read(0, tuple(other)), Read(0, here))
    return [Stmt(0, x.shape, reads, sp.Piecewise((sp.Integer(1), before), (sp.Integer(0), True)), reduce="sum",
                 reduce_extents=(x.shape[axis],))]


# ----- sorted_indices -----------------------------------------------------------------------
def _infer_indices(call: OpCall) -> list[TensorType]:
    places = call.input(0)
    if places.dtype != "int64" or places.rank < 1:
        raise call.fail(f"places must be int64 of rank >= 1, got {places}")
    axis = call.axis(call.attrs["axis"], places.rank)
    k = call.attrs["k"]
    if not 0 <= k <= places.shape[axis]:
        raise call.fail(f"k={k} must be in [0, {places.shape[axis]}] (the length of axis {axis})")
    shape = list(places.shape)
    shape[axis] = k
    return [TensorType(tuple(shape), "int64")]


def _reference_indices(xs, attrs):
    places = xs[0]
    axis = attrs["axis"] % places.ndim
    n = places.shape[axis]
    if n and not np.array_equal(np.sort(places, axis=axis), np.broadcast_to(
            np.arange(n).reshape([-1 if d == axis else 1 for d in range(places.ndim)]), places.shape)):
        raise ValueError(f"places along axis {axis} must be a permutation of 0..{n - 1}")
    order = np.argsort(places, axis=axis, kind="stable")
    return [np.ascontiguousarray(np.take(order, np.arange(attrs["k"]), axis=axis)).astype(np.int64)]


def _access_indices(call: OpCall) -> list[Stmt]:
    places = call.input(0)
    out = _infer_indices(call)[0]
    axis = call.axis(call.attrs["axis"], places.rank)
    at = list(out_indices(out.rank))
    at[axis] = r_sym(0)
    # exactly one position along the line has each place: the sum picks it
    body = sp.Piecewise((r_sym(0), sp.Eq(v_sym(0), i_sym(axis))), (sp.Integer(0), True))
    return [Stmt(0, out.shape, (Read(0, tuple(at)),), body, reduce="sum", reduce_extents=(places.shape[axis],))]


register(
    OpDef(
        name="sort_position",
        inputs=("x",),
        attrs={"axis": Attr("int", -1), "largest": Attr("int", 1, "1: larger values first")},
        infer=_infer_position,
        reference=_reference_position,
        access=_access_position,
        doc="Each element's place (0-based) in the sorted order of its line along `axis`: larger first "
            "(`largest`) or smaller first, equal values by lower index, NaN larger than any number.",
    )
)

register(
    OpDef(
        name="sorted_indices",
        inputs=("places",),
        attrs={"axis": Attr("int", -1), "k": Attr("int")},
        infer=_infer_indices,
        reference=_reference_indices,
        access=_access_indices,
        doc="The inverse of sort_position's permutation, cut to the first k places: for each place j < k "
            "along `axis`, the position of the element there (ONNX TopK's indices).",
    )
)
