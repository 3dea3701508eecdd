"""Trilu: keep the upper or lower triangle of the last two axes, zero the rest."""

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


def _infer(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    if x.rank < 2:
        raise call.fail(f"input must have rank >= 2, got {x.rank}")
    if call.has_input(1) and (call.input(1).shape not in ((), (1,)) or call.input(1).dtype != "int64"):
        raise call.fail(f"k must be one int64, got {call.input(1)}")
    if call.attrs["upper"] not in (0, 1):
        raise call.fail(f"upper={call.attrs['upper']} should be 0 or 1")
    return [x]


def _reference(xs, attrs):
    x = xs[0]
    k = int(xs[1].reshape(())) if len(xs) > 1 and xs[1] is not None else attrs["k"]
    kept = np.triu(x, k) if attrs["upper"] else np.tril(x, k)
    return [np.asarray(kept.astype(x.dtype, copy=False), order="C")]


def _access(call: OpCall) -> list[Stmt]:
    out = call.out_types[0]
    row, col = i_sym(out.rank - 2), i_sym(out.rank - 1)
    at = out_indices(out.rank)
    if not call.has_input(1):
        # k known: which elements are kept is pure index math, a condition on the read
        k = call.attrs["k"]
        kept = col - row >= k if call.attrs["upper"] else col - row <= k
        return [Stmt(0, out.shape, (Read(0, at, pad=0.0, cond=kept),), v_sym(0))]
    # k read at run time (a graph input): k - (col - row) on one side and 0 on the other,
    # so a side never holds loop indices alone (the printers read those as index math)
    gap = v_sym(1) - (col - row)
    kept = gap <= 0 if call.attrs["upper"] else gap >= 0
    reads = (Read(0, at), Read(1, (sp.Integer(0),) * call.input(1).rank))
    return [Stmt(0, out.shape, reads, sp.Piecewise((v_sym(0), kept), (0, True)))]


register(
    OpDef(
        name="trilu",
        inputs=("x", "k"),
        min_inputs=1,
        attrs={"upper": Attr("int", 1, "1: keep the upper triangle, 0: the lower"),
               "k": Attr("int", 0, "diagonal offset (positive: above the main one), unless input k gives it")},
        infer=_infer,
        reference=_reference,
        access=_access,
        doc="x where column - row >= k (upper) or <= k (lower) in the last two axes, else 0; k is the "
            "attribute, or the optional int64 scalar input k read at run time (ONNX Trilu).",
    )
)
