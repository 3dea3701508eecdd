"""Trilu: keep the upper or lower triangle of the last two axes, zero the rest."""

from __future__ import annotations

import numpy as np
import sympy as sp

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
    k = int(xs[1].reshape(())) if len(xs) > 1 and xs[1] is not None else 0
    kept = np.triu(x, k) if attrs["upper"] else np.tril(x, k)
    return [np.asarray(kept.astype(x.dtype, copy=False), order="C")]


def _access(call: OpCall) -> list[Stmt]:
    out = call.out_types[0]
    row, col = i_sym(out.rank - 2), i_sym(out.rank - 1)
    reads = (Read(0, out_indices(out.rank)),)
    k = sp.Integer(0)
    if call.has_input(1):  # read at run time: k may be a graph input
        reads += (Read(1, (sp.Integer(0),) * call.input(1).rank),)
        k = v_sym(1)
    kept = col - row >= k if call.attrs["upper"] else col - row <= k
    return [Stmt(0, out.shape, reads, sp.Piecewise((v_sym(0), kept), (0, True)))]


register(
    OpDef(
        name="trilu",
        inputs=("x", "k"),
        min_inputs=1,
        attrs={"upper": Attr("int", 1, "1: keep the upper triangle, 0: the lower")},
        infer=_infer,
        reference=_reference,
        access=_access,
        doc="x where column - row >= k (upper) or <= k (lower) in the last two axes, else 0; k is an optional "
            "int64 scalar tensor, 0 when absent (ONNX Trilu).",
    )
)
