"""Pad: grow (or, with negative pads, crop) each axis; border cells from a constant, the
mirror image (reflect), the nearest edge cell (edge) or the other end (wrap)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import sympy as sp
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import sp

from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, i_sym, v_sym
from fusionlang.ops.registry import Attr, OpCall, OpDef, register

MODES = ("constant", "reflect", "edge", "wrap")


def _pads(call: OpCall) -> tuple[tuple[int, int], ...]:
    """(begin, end) per axis, checked against the mode."""
    x = call.input(0)
    pads, mode = call.attrs["pads"], call.attrs["mode"]
    if mode not in MODES:
        raise call.fail(f"mode={mode!r} should be one of {', '.join(MODES)}")
    if len(pads) != 2 * x.rank:
        raise call.fail(f"pads {list(pads)} should have {2 * x.rank} entries (begins, then ends) for {x}")
    pairs = tuple(zip(pads[:x.rank], pads[x.rank:]))
    for axis, (n, (begin, end)) in enumerate(zip(x.shape, pairs)):
        kept = n - max(-begin, 0) - max(-end, 0)
        if kept < 0:
            raise call.fail(f"pads {list(pads)} crop more than axis {axis} of {x} holds")
        if mode == "constant" or max(begin, end) <= 0:
            continue
        if kept == 0:
            raise call.fail(f"mode {mode!r} cannot pad axis {axis} of {x}: no cells are left to copy")
        if mode == "reflect" and max(begin, end) >= kept:
            raise call.fail(f"reflect pads {list(pads)} must be smaller than axis {axis} ({kept} cells)")
    return pairs


def _infer(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    return [x.with_shape(tuple(n + b + e for n, (b, e) in zip(x.shape, _pads(call))))]


def _reference(xs, attrs):
    # negative pads crop first, then the positive ones pad what is left (as onnxruntime does)
    x = xs[0]
    pairs = _pads(OpCall("pad", "?", attrs, [TensorType.of(x)]))
    if not pairs:
        return [x.copy()]  # a scalar has no axes to pad
    kept = x[tuple(slice(max(-b, 0), n - max(-e, 0)) for n, (b, e) in zip(x.shape, pairs))]
    widths = [(max(b, 0), max(e, 0)) for b, e in pairs]
    if attrs["mode"] == "constant":
        return [np.pad(kept, widths, constant_values=x.dtype.type(attrs["value"]))]
    return [np.pad(kept, widths, mode=attrs["mode"])]


def _source(mode: str, q: sp.Expr, m: int) -> sp.Expr:
    """Cell of a length-m axis that position q (possibly outside [0, m)) copies."""
    if mode == "edge":
        return sp.Min(sp.Max(q, 0), m - 1)
    if mode == "wrap":
        return sp.Mod(q, m)
    # reflect (pads < m): fold at 0, then at m - 1
    folded = sp.Max(q, -q)
    return (m - 1) - sp.Max(m - 1 - folded, folded - (m - 1))


def _access(call: OpCall) -> list[Stmt]:
    x = call.input(0)
    mode = call.attrs["mode"]
    index = []
    for k, (n, (b, e)) in enumerate(zip(x.shape, _pads(call))):
        if mode == "constant" or (b <= 0 and e <= 0):
            index.append(i_sym(k) - b)
            continue
        crop = max(-b, 0)
        kept = n - crop - max(-e, 0)
        index.append(crop + _source(mode, i_sym(k) - max(b, 0), kept))
    pad = float(call.attrs["value"]) if mode == "constant" else None
    return [Stmt(0, call.out_types[0].shape, (Read(0, tuple(index), pad=pad),), v_sym(0))]


register(
    OpDef(
        name="pad",
        inputs=("x",),
        attrs={"pads": Attr("ints", doc="begin pads of every axis, then end pads; negative crops"),
               "mode": Attr("str", "constant", "constant, reflect, edge or wrap"),
               "value": Attr("float", 0.0, "fill value of constant mode", nan_ok=True)},
        infer=_infer,
        reference=_reference,
        access=_access,
        doc="ONNX Pad with explicit pads: negative pads crop first, then the border is filled "
            "by `mode`.",
    )
)
