"""CumSum: running sums along one axis (inclusive or exclusive, forward or reverse)."""

from __future__ import annotations

import numpy as np

from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, i_sym, out_indices, r_sym, v_sym
from fusionlang.ops.registry import Attr, OpCall, OpDef, register


def _axis(call: OpCall) -> int:
    x = call.input(0)
    if x.dtype == "bool":
        raise call.fail("cumsum needs a numeric input, got bool")
    if x.rank < 1:
        raise call.fail("input must have rank >= 1")
    return call.axis(call.attrs["axis"], x.rank)


def _infer(call: OpCall) -> list[TensorType]:
    _axis(call)
    return [call.input(0)]


def _reference(xs, attrs):
    x = xs[0]
    axis = attrs["axis"] % x.ndim
    y = np.flip(x, axis) if attrs["reverse"] else x
    total = np.cumsum(y, axis=axis, dtype=np.float64 if x.dtype.kind == "f" else x.dtype)
    if attrs["exclusive"]:
        total = total - y  # each sum without its own element
    total = np.flip(total, axis) if attrs["reverse"] else total
    return [np.asarray(total.astype(x.dtype), order="C")]


def _access(call: OpCall) -> list[Stmt]:
    axis = _axis(call)
    out = call.out_types[0]
    here, r = i_sym(axis), r_sym(0)
    # the sum over the whole axis, each term read only where it is in this element's prefix
    if call.attrs["reverse"]:
        counted = r > here if call.attrs["exclusive"] else r >= here
    else:
        counted = r < here if call.attrs["exclusive"] else r <= here
    index = list(out_indices(out.rank))
    index[axis] = r
    read = Read(0, tuple(index), pad=0.0, cond=counted)
    return [Stmt(0, out.shape, (read,), v_sym(0), reduce="sum", reduce_extents=(out.shape[axis],))]


register(
    OpDef(
        name="cumsum",
        inputs=("x",),
        attrs={"axis": Attr("int", 0), "exclusive": Attr("int", 0, "1: leave each element out of its sum"),
               "reverse": Attr("int", 0, "1: sum from the end")},
        infer=_infer,
        reference=_reference,
        access=_access,
        doc="Running sums of x along `axis` (ONNX CumSum): exclusive leaves each element out, reverse sums "
            "from the end.",
    )
)
