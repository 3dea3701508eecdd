"""OneHot: a new axis of length `depth` holding on_value where it equals the index, else off_value."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import sympy as sp
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import sp

from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, i_sym, out_indices, v_sym
from fusionlang.ops.registry import Attr, OpCall, OpDef, register


def _axis(call: OpCall) -> int:
    indices, values = call.input(0), call.input(1)
    if not indices.dtype.startswith(("int", "uint")):  # ONNX casts others to int64 first
        raise call.fail(f"indices must be integers, got {indices.dtype}")
    if values.shape != (2,):
        raise call.fail(f"values must hold two elements (off, on), got {values}")
    if call.attrs["depth"] < 1:
        raise call.fail(f"depth={call.attrs['depth']} must be >= 1")
    return call.axis(call.attrs["axis"], indices.rank, inclusive=True)


def _infer(call: OpCall) -> list[TensorType]:
    axis = _axis(call)
    shape = list(call.input(0).shape)
    shape.insert(axis, call.attrs["depth"])
    return [TensorType(tuple(shape), call.input(1).dtype)]


def _reference(xs, attrs):
    indices, values = xs
    depth = attrs["depth"]
    axis = attrs["axis"] % (indices.ndim + 1)
    # negative indices count from the end; any other index outside [0, depth) matches nothing
    wrapped = np.expand_dims(np.where(indices < 0, indices + depth, indices), axis)
    classes = np.arange(depth).reshape([-1 if d == axis else 1 for d in range(indices.ndim + 1)])
    return [np.ascontiguousarray(np.where(wrapped == classes, values[1], values[0]))]


def _access(call: OpCall) -> list[Stmt]:
    axis = _axis(call)
    out = _infer(call)[0]
    here = out_indices(out.rank)
    k = i_sym(axis)
    reads = (Read(0, here[:axis] + here[axis + 1:]), Read(1, (sp.Integer(0),)), Read(1, (sp.Integer(1),)))
    # index k, or k - depth (a negative index counting from the end)
    hot = sp.Or(sp.Eq(v_sym(0), k), sp.Eq(v_sym(0), k - call.attrs["depth"]))
    return [Stmt(0, out.shape, reads, sp.Piecewise((v_sym(2), hot), (v_sym(1), True)))]


register(
    OpDef(
        name="one_hot",
        inputs=("indices", "values"),
        attrs={"depth": Attr("int"), "axis": Attr("int", -1, "where the new axis goes (-1: last)")},
        infer=_infer,
        reference=_reference,
        access=_access,
        doc="A new axis of length `depth` at `axis`: values[1] where its position equals the index, values[0] "
            "elsewhere (ONNX OneHot). A negative index counts from the end; one outside [-depth, depth) is off "
            "everywhere.",
    )
)
