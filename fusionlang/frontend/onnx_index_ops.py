"""Converters of ONNX's indexing ops: scatters, TopK, OneHot and friends.

Kept apart from ``onnx_ops`` (which merges this table into its CONVERTERS) because most of
them are small decompositions into several fusionlang ops rather than table rows.
"""

from __future__ import annotations

from math import prod
from typing import Callable, cast

import numpy as np

from fusionlang.frontend.onnx_context import NodeContext

INDEX_CONVERTERS: dict[str, Callable[[NodeContext], None]] = {}

SCATTER_REDUCTIONS = ("none", "add", "mul", "max", "min")


def _converts(*op_types: str):
    def register(fn):
        for op_type in op_types:
            INDEX_CONVERTERS[op_type] = fn
        return fn

    return register


# ----- scatters ---------------------------------------------------------------------------
def _reduction(ctx: NodeContext) -> str:
    reduction = ctx.attr("reduction", "none")
    if reduction not in SCATTER_REDUCTIONS:
        raise ctx.fail(f"reduction={reduction!r} should be one of {', '.join(SCATTER_REDUCTIONS)}")
    return reduction


def _scatter_along(ctx: NodeContext, data: str, indices: str, updates: str, axis: int, reduction: str,
                   output: str | None) -> str:
    """ScatterElements: a reduction into data, or (none) the last update landing on each element."""
    if reduction != "none":
        return ctx.emit1("scatter_elements", [data, indices, updates], {"axis": axis, "reduction": reduction},
                         output)
    position = ctx.emit1("scatter_position", [data, indices], {"axis": axis})
    return ctx.emit1("scatter_pick", [data, updates, position], {"axis": axis}, output)


@_converts("ScatterElements", "Scatter")
def _scatter_elements(ctx: NodeContext) -> None:
    # Scatter (opsets 9 to 10) is ScatterElements without a reduction
    _scatter_along(ctx, ctx.input(0), ctx.input(1), ctx.input(2), ctx.attr("axis", 0), _reduction(ctx),
                   ctx.output(0))


@_converts("ScatterND")
def _scatter_nd(ctx: NodeContext) -> None:
    """ScatterND as ScatterElements along axis 0 of data seen as (places, slice): each index
    tuple, checked and normalized axis by axis (a gather from arange(n) does both), becomes
    the flat place of its slice."""
    data, indices, updates = ctx.type(0), ctx.type(1), ctx.type(2)
    reduction = _reduction(ctx)
    if indices.dtype != "int64":
        raise ctx.fail(f"indices must be int64, got {indices.dtype}")
    if indices.rank < 1 or not 1 <= indices.shape[-1] <= data.rank:
        raise ctx.fail(f"index tuples of {list(indices.shape[-1:])} entries cannot index {data}")
    m = indices.shape[-1]
    tuples, places, width = prod(indices.shape[:-1]), prod(data.shape[:m]), prod(data.shape[m:])
    if updates.shape != indices.shape[:-1] + data.shape[m:]:
        raise ctx.fail(f"updates must have shape {list(indices.shape[:-1] + data.shape[m:])}, got {updates}")
    rows = ctx.emit1("reshape", [ctx.input(1)], {"shape": (tuples, m), "allowzero": 1})
    flat = None
    for k in range(m):
        entry = ctx.emit1("gather", [rows, ctx.constant(np.int64(k))], {"axis": 1})
        place = ctx.emit1("gather", [ctx.constant(np.arange(data.shape[k], dtype=np.int64)), entry], {"axis": 0})
        stride = prod(data.shape[k + 1:m])
        scaled = place if stride == 1 else ctx.emit1("mul", [place, ctx.constant(np.int64(stride))])
        flat = scaled if flat is None else ctx.emit1("add", [flat, scaled])
    column = ctx.emit1("reshape", [cast(str, flat)], {"shape": (tuples, 1), "allowzero": 1})  # m >= 1: set above
    spread = ctx.emit1("expand", [column], {"shape": (tuples, width)})
    table = ctx.emit1("reshape", [ctx.input(0)], {"shape": (places, width), "allowzero": 1})
    rows_of_updates = ctx.emit1("reshape", [ctx.input(2)], {"shape": (tuples, width), "allowzero": 1})
    result = _scatter_along(ctx, table, spread, rows_of_updates, 0, reduction, None)
    ctx.emit_output("reshape", [result], {"shape": data.shape, "allowzero": 1})


# ----- TopK: places in sorted order, the first k of them, the values there ------------------
@_converts("TopK")
def _top_k(ctx: NodeContext) -> None:
    k = ctx.attr("k") if ctx.opset < 10 else ctx.scalar(1, "k")
    if k is None or int(k) != k:
        raise ctx.fail(f"k must be an integer, got {k!r}")
    x, axis = ctx.input(0), ctx.attr("axis", -1)
    largest = ctx.attr("largest", 1)
    places = ctx.emit1("sort_position", [x], {"axis": axis, "largest": largest})
    # sorted=0 leaves the order to the implementation: sorted is one of them
    indices = ctx.emit1("sorted_indices", [places], {"axis": axis, "k": int(k)}, ctx.output(1))
    ctx.emit1("gather_elements", [x, indices], {"axis": axis}, ctx.output(0))


# ----- OneHot: depth decides the output's shape, so it is known at import -------------------
@_converts("OneHot")
def _one_hot(ctx: NodeContext) -> None:
    depth = ctx.scalar(1, "depth")
    if depth != int(depth):  # ONNX casts depth to int64; a fraction is a mistake, not a size
        raise ctx.fail(f"depth must be a whole number, got {depth}")
    indices = ctx.input(0)
    if not ctx.type(0).dtype.startswith(("int", "uint")):  # cast to int64 (truncated), as ONNX says
        indices = ctx.emit1("cast", [indices], {"to": "int64"})
    ctx.emit_output("one_hot", [indices, ctx.input(2)], {"depth": int(depth), "axis": ctx.attr("axis", -1)})


# ----- CenterCropPad: one pad whose negative pads crop ---------------------------------------
@_converts("CenterCropPad")
def _center_crop_pad(ctx: NodeContext) -> None:
    """Each listed axis cropped or zero-padded to its size, centered: the odd element of a
    difference goes to the end, as ONNX's reference puts it."""
    rank = ctx.type(0).rank
    sizes = ctx.ints(1, "shape")
    axes = ctx.attr("axes", list(range(rank)))
    if len(sizes) != len(axes):
        raise ctx.fail(f"shape {list(sizes)} should have one entry per axis of {list(axes)}")
    pads = [0] * (2 * rank)
    for axis, size in zip(axes, sizes):
        if not -rank <= axis < rank:
            raise ctx.fail(f"axis {axis} is out of range for rank {rank}")
        if size < 0:
            raise ctx.fail(f"shape {list(sizes)} has a negative size")
        axis %= rank
        grow = size - ctx.type(0).shape[axis]
        begin = grow // 2 if grow >= 0 else -(-grow // 2)
        pads[axis], pads[rank + axis] = begin, grow - begin
    ctx.emit_output("pad", [ctx.input(0)], {"pads": tuple(pads), "mode": "constant", "value": 0.0})


# ----- GridSample: the taps of each grid location, then the weighted cells --------------------
#: opset 16 names of the modes
_GRID_MODES = {"bilinear": "linear", "bicubic": "cubic"}


@_converts("GridSample")
def _grid_sample(ctx: NodeContext) -> None:
    x = ctx.type(0)
    mode = ctx.attr("mode", "linear" if ctx.opset >= 20 else "bilinear")
    attrs = {"sizes": x.shape[2:], "mode": _GRID_MODES.get(mode, mode),
             "padding_mode": ctx.attr("padding_mode", "zeros"), "align_corners": ctx.attr("align_corners", 0)}
    coordinates = ctx.emit1("grid_coordinates", [ctx.input(1)], attrs)
    cells, weights = ctx.emit("grid_taps", [coordinates], attrs, ["", ""])
    ctx.emit_output("gather_taps", [ctx.input(0), ctx.emit1("cast", [cells], {"to": "int64"}), weights])


# ----- AffineGrid: theta times a constant grid of normalized coordinates -------------------
def _normalized_positions(size: int, align_corners: int) -> np.ndarray:
    """Cell centers of one axis in [-1, 1] (align_corners: the corner cells' centers are -1 and 1)."""
    if align_corners:
        return np.linspace(-1.0, 1.0, size) if size > 1 else np.full(1, -1.0)
    step = 2.0 / size
    return -1 + step / 2 + step * np.arange(size)


@_converts("AffineGrid")
def _affine_grid(ctx: NodeContext) -> None:
    theta = ctx.type(0)
    size = ctx.ints(1, "size")
    spatial = size[2:]
    rank = len(spatial)
    if rank not in (2, 3) or theta.shape != (size[0], rank, rank + 1):
        raise ctx.fail(f"theta must be [N, {rank}, {rank + 1}] for size {list(size)}, got {theta}")
    if any(n < 1 for n in spatial):
        raise ctx.fail(f"size {list(size)} must have spatial sizes >= 1")
    axes = np.meshgrid(*(_normalized_positions(n, ctx.attr("align_corners", 0)) for n in spatial), indexing="ij")
    # homogeneous coordinates, x (the last axis) first, as a [rank + 1, cells] matrix
    base = np.stack([a.reshape(-1) for a in reversed(axes)] + [np.ones(int(np.prod(spatial)))])
    moved = ctx.emit1("matmul", [ctx.input(0), ctx.constant(base.astype(theta.dtype))])  # [N, rank, cells]
    cells_last = ctx.emit1("transpose", [moved], {"perm": (0, 2, 1)})
    ctx.emit_output("reshape", [cells_last], {"shape": (size[0],) + tuple(spatial) + (rank,), "allowzero": 1})


# ----- Col2Im: the image and block shapes decide the output, so they are known at import ----
@_converts("Col2Im")
def _col2im(ctx: NodeContext) -> None:
    attrs = {"image_shape": ctx.ints(1, "image_shape"), "block_shape": ctx.ints(2, "block_shape"),
             "dilations": tuple(ctx.attr("dilations", ())), "pads": tuple(ctx.attr("pads", ())),
             "strides": tuple(ctx.attr("strides", ()))}
    ctx.emit_output("col2im", [ctx.input(0)], attrs)
