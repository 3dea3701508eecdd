"""GridSample: X sampled at the places a grid of normalized coordinates names, in three
loop-form steps (the taps depend on the grid's values, so they are computed at run time,
as Resize's tables are at import):

* ``grid_coordinates``: each grid coordinate denormalized (``align_corners``), rounded
  (nearest, half to even) and moved inside by the padding mode (border clamps,
  reflection reflects);
* ``grid_taps``: per location, spatial axis and tap, the input cell it reads (a whole
  number; -1: outside, it reads 0) and its weight: the 1, 2 or 4 taps of the coordinate,
  each moved inside again (two steps, not one: the padding rules would nest in one formula);
* ``gather_taps``: out = sum over the taps of every axis of the product of their weights
  times X at their cells (cast to int64): an indirect read per term, a reduction over
  taps^rank terms.

The formulas follow ONNX's reference implementation step by step (cubic: Keys, a=-0.75).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import sympy as sp
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import sp

from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, as_expr, i_sym, out_indices, r_sym, v_sym
from fusionlang.ops.common import require_float
from fusionlang.ops.registry import Attr, OpCall, OpDef, register

MODES = ("nearest", "linear", "cubic")
PADDING_MODES = ("zeros", "border", "reflection")
#: taps per axis, and the first one's offset from floor(x)
TAPS = {"nearest": (1, 0), "linear": (2, 0), "cubic": (4, -1)}
CUBIC_A = -0.75


# ----- the formulas, once, for NumPy arrays and for sympy expressions -----------------------
class _Math:
    """floor, where, clamp, reflection and round-half-even over either NumPy or sympy."""

    def __init__(self, symbolic: bool):
        self.symbolic = symbolic

    def floor(self, x):
        return sp.floor(x) if self.symbolic else np.floor(x)

    def where(self, cond, a, b):
        # unevaluated: sympy would fold a condition on another Piecewise into an ITE
        return sp.Piecewise((a, cond), (b, True), evaluate=False) if self.symbolic else np.where(cond, a, b)

    def rint(self, x):
        """Round half to even (C's rint in the default rounding mode), without a condition
        (a condition on it would nest): half up and half down differ only at ties, where
        the odd one of them is the wrong one."""
        if not self.symbolic:
            return np.rint(x)
        up, down = sp.floor(x + sp.Rational(1, 2)), sp.ceiling(x - sp.Rational(1, 2))
        return up - (up - down) * sp.Mod(up, 2)

    def clamp(self, x, low, high):
        if self.symbolic:
            return sp.Min(sp.Max(x, low), high)
        return np.clip(x, low, high)

    def reflect(self, x, low: float, high: float):
        """x reflected by the near border until inside [low, high]."""
        span = high - low
        if span == 0:
            return x * 0 + low
        def bounced(distance, near, far):
            # ``distance`` past the ``near`` border: whole spans flip which border it starts from
            turns = self.floor(distance / span)
            rest = distance - turns * span
            step = rest if near < far else -rest
            even = sp.Eq(sp.Mod(turns, 2), 0) if self.symbolic else (np.mod(turns, 2) == 0)
            return self.where(even, near + step, far - step)

        from_low, from_high = bounced(low - x, low, high), bounced(x - high, high, low)
        inside = sp.And(x >= low, x <= high) if self.symbolic else ((x >= low) & (x <= high))
        return self.where(inside, x, self.where(x < low, from_low, from_high))


def _borders(size: int, align_corners: bool) -> tuple[float, float]:
    return (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)


def _coordinate(m: _Math, g, size: int, attrs: dict):
    """The source coordinate of one axis, moved inside by the padding mode."""
    align = bool(attrs["align_corners"])
    x = (g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2
    if attrs["mode"] == "nearest":
        x = m.rint(x)
    low, high = _borders(size, align)
    if attrs["padding_mode"] == "border":
        return m.where((x < low) | (x > high) if not m.symbolic else sp.Or(x < low, x > high),
                       m.clamp(x, 0, size - 1), x)
    if attrs["padding_mode"] == "reflection":
        return m.reflect(x, low, high)
    return x


def _cell(m: _Math, index, size: int, attrs: dict):
    """An integer tap moved inside by the padding mode; -1 where it reads zero."""
    if attrs["padding_mode"] == "zeros":
        inside = sp.And(index >= 0, index < size) if m.symbolic else ((index >= 0) & (index < size))
        return m.where(inside, index, -1)
    if attrs["padding_mode"] == "border":
        return m.clamp(index, 0, size - 1)
    # a whole number reflected at whole or half-whole borders stays whole: no truncation needed
    return m.reflect(index, *_borders(size, bool(attrs["align_corners"])))


def _cubic(t, tap: int):
    """Keys' cubic weight of tap -1..2 at fraction t."""
    d = abs(t - tap) if not isinstance(t, sp.Basic) else None
    a = CUBIC_A
    if d is None:  # symbolic: the distance's sign is known per tap, t in [0, 1)
        d = {-1: t + 1, 0: t, 1: 1 - t, 2: 2 - t}[tap]
    if tap in (0, 1):
        return ((a + 2) * d - (a + 3)) * d * d + 1
    return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a


def _tap(m: _Math, x, size: int, tap: int, attrs: dict):
    """(cell, weight) of tap number ``tap`` along one axis for source coordinate x."""
    mode = attrs["mode"]
    if mode == "nearest":
        return _cell(m, m.floor(x), size, attrs), 1.0 + 0 * x  # x is whole: rounded, then moved by whole steps
    base = m.floor(x)
    t = x - base
    offset = tap + TAPS[mode][1]
    cell = _cell(m, base + offset, size, attrs)
    weight = (1 - t if offset == 0 else t) if mode == "linear" else _cubic(t, offset)
    return cell, weight


# ----- grid_coordinates and grid_taps -----------------------------------------------------
def _check_modes(call: OpCall) -> tuple[int, ...]:
    attrs = call.attrs
    for name, allowed in (("mode", MODES), ("padding_mode", PADDING_MODES)):
        if attrs[name] not in allowed:
            raise call.fail(f"{name}={attrs[name]!r} should be one of {', '.join(allowed)}")
    sizes = attrs["sizes"]
    if any(n < 1 for n in sizes):
        raise call.fail(f"sizes {list(sizes)} must be >= 1: there is nothing to sample")
    return tuple(sizes)


def _check_grid(call: OpCall) -> tuple[int, ...]:
    sizes = _check_modes(call)
    grid = call.input(0)
    require_float(call, grid)
    if grid.rank != len(sizes) + 2 or grid.shape[-1] != len(sizes):
        raise call.fail(f"grid must be [N, spatial..., {len(sizes)}] for {len(sizes)} sizes, got {grid}")
    return sizes


def _infer_coordinates(call: OpCall) -> list[TensorType]:
    _check_grid(call)
    return [call.input(0)]


def _reference_coordinates(xs, attrs):
    grid, sizes = xs[0], attrs["sizes"]
    out = np.empty_like(grid)
    for axis, size in enumerate(sizes):
        out[..., axis] = _coordinate(_Math(False), grid[..., len(sizes) - 1 - axis], size, attrs)
    return [out]


def _access_coordinates(call: OpCall) -> list[Stmt]:
    sizes = _check_grid(call)
    grid = call.input(0)
    lead = out_indices(grid.rank - 1)
    return [Stmt(0, grid.shape[:-1], (Read(0, lead + (sp.Integer(len(sizes) - 1 - axis),)),),
                 as_expr(_coordinate(_Math(True), v_sym(0), size, call.attrs)), write=lead + (sp.Integer(axis),))
            for axis, size in enumerate(sizes)]


def _infer_taps(call: OpCall) -> list[TensorType]:
    sizes = _check_grid(call)
    coordinates = call.input(0)
    shape = coordinates.shape[:-1] + (len(sizes), TAPS[call.attrs["mode"]][0])
    # cells in the float type too (whole numbers, cast to int64 for gather_taps): both outputs
    # computed in one precision, so a cell and its weight come from one rounding of the coordinate
    return [TensorType(shape, coordinates.dtype), TensorType(shape, coordinates.dtype)]


def _reference_taps(xs, attrs):
    coordinates, sizes = xs[0], attrs["sizes"]
    m, count = _Math(False), TAPS[attrs["mode"]][0]
    cells = np.empty(coordinates.shape[:-1] + (len(sizes), count), coordinates.dtype)
    weights = np.empty(cells.shape, coordinates.dtype)
    for axis, size in enumerate(sizes):
        for tap in range(count):
            with np.errstate(invalid="ignore"):
                cell, weight = _tap(m, coordinates[..., axis], size, tap, attrs)
            cells[..., axis, tap] = cell
            weights[..., axis, tap] = weight
    return [cells, weights]


def _access_taps(call: OpCall) -> list[Stmt]:
    sizes = _check_grid(call)
    coordinates = call.input(0)
    lead = out_indices(coordinates.rank - 1)
    m, count = _Math(True), TAPS[call.attrs["mode"]][0]
    stmts = []
    for axis, size in enumerate(sizes):
        read = Read(0, lead + (sp.Integer(axis),))
        for tap in range(count):
            cell, weight = _tap(m, v_sym(0), size, tap, call.attrs)
            at = lead + (sp.Integer(axis), sp.Integer(tap))
            for output, value in ((0, cell), (1, weight)):
                stmts.append(Stmt(output, coordinates.shape[:-1], (read,), as_expr(value), write=at))
    return stmts


# ----- gather_taps ------------------------------------------------------------------------
def _check_gather(call: OpCall) -> int:
    x, cells, weights = call.input(0), call.input(1), call.input(2)
    rank = x.rank - 2
    require_float(call, x)
    if rank < 1 or cells.dtype != "int64" or cells.rank != rank + 3 or cells.shape[-2] != rank \
            or cells.shape[0] != x.shape[0]:
        raise call.fail(f"cells must be int64 [{x.shape[0] if x.rank else 'N'}, spatial..., {rank}, taps] for "
                        f"{x}, got {cells}")
    if weights.shape != cells.shape or not weights.dtype.startswith("float"):
        raise call.fail(f"weights must be floats shaped like cells {list(cells.shape)}, got {weights}")
    return rank


def _infer_gather(call: OpCall) -> list[TensorType]:
    _check_gather(call)
    x, cells = call.input(0), call.input(1)
    return [TensorType(x.shape[:2] + cells.shape[1:-2], x.dtype)]


def _reference_gather(xs, attrs):
    x, cells, weights = xs
    rank, count = x.ndim - 2, cells.shape[-1]
    out = np.zeros(x.shape[:2] + cells.shape[1:-2], np.float64)
    n = np.arange(x.shape[0]).reshape((-1,) + (1,) * (cells.ndim - 3))
    for taps in itertools.product(range(count), repeat=rank):
        at = [cells[..., axis, t] for axis, t in enumerate(taps)]
        inside = np.all([(a >= 0) & (a < n_a) for a, n_a in zip(at, x.shape[2:])], axis=0)
        weight = np.prod([weights[..., axis, t].astype(np.float64) for axis, t in enumerate(taps)], axis=0)
        # X[n, :, cells...] for every location: channels moved to axis 1
        values = np.moveaxis(x[(n, slice(None)) + tuple(np.clip(a, 0, n_a - 1) for a, n_a in zip(at, x.shape[2:]))],
                             -1, 1)
        out += np.where(inside, weight, 0)[:, None] * values
    return [out.astype(x.dtype)]


def _access_gather(call: OpCall) -> list[Stmt]:
    rank = _check_gather(call)
    x = call.input(0)
    out = _infer_gather(call)[0]
    n, c, where = i_sym(0), i_sym(1), out_indices(out.rank)[2:]
    reads = []
    for axis in range(rank):
        reads.append(Read(1, (n,) + where + (sp.Integer(axis), r_sym(axis))))  # v{2a}: the cell
        reads.append(Read(2, (n,) + where + (sp.Integer(axis), r_sym(axis))))  # v{2a+1}: its weight
    cells = tuple(v_sym(2 * axis) for axis in range(rank))
    reads.append(Read(0, (n, c) + cells, pad=0.0))  # -1 (or any cell outside) reads 0
    body = sp.Mul(*(v_sym(2 * axis + 1) for axis in range(rank)), v_sym(2 * rank))
    return [Stmt(0, out.shape, tuple(reads), body, reduce="sum", reduce_extents=(call.input(1).shape[-1],) * rank)]


_GRID_ATTRS = {"sizes": Attr("ints", doc="the sampled input's spatial sizes"),
               "mode": Attr("str", "linear", "nearest, linear or cubic"),
               "padding_mode": Attr("str", "zeros", "zeros, border or reflection"),
               "align_corners": Attr("int", 0, "1: -1 and 1 are the centers of the corner cells")}

register(
    OpDef(
        name="grid_coordinates",
        inputs=("grid",),
        attrs=_GRID_ATTRS,
        infer=_infer_coordinates,
        reference=_reference_coordinates,
        access=_access_coordinates,
        doc="For GridSample: each normalized grid coordinate as a source coordinate of its axis (the grid's "
            "last entry is the first axis, and is listed first here), rounded (nearest) and moved inside by the "
            "padding mode, following ONNX's reference.",
    )
)

register(
    OpDef(
        name="grid_taps",
        inputs=("coordinates",),
        attrs=_GRID_ATTRS,
        infer=_infer_taps,
        reference=_reference_taps,
        access=_access_taps,
        num_outputs=2,
        doc="For GridSample: per source coordinate (from grid_coordinates) and tap, the input cell it reads (a "
            "whole number; -1 outside: it reads 0) and its weight, following ONNX's reference.",
    )
)

register(
    OpDef(
        name="gather_taps",
        inputs=("x", "cells", "weights"),
        infer=_infer_gather,
        reference=_reference_gather,
        access=_access_gather,
        doc="out[n, c, loc...] = sum over one tap per spatial axis of the product of their weights times "
            "x[n, c, cells...] (a cell outside the input, as -1, reads 0): GridSample with grid_taps "
            "(its cells cast to int64).",
    )
)
