"""ScatterElements: `updates` written into a copy of `data` where `indices` says, along one axis.

The write target is data-dependent, and the loop layer only knows writes at affine places,
so scatters are written in pull form: each output element looks at every update that could
land on it (the updates on its line along ``axis``) and keeps the ones whose index names it.
That is a reduction over the indexed axis, which fuses and compiles like any other, costs
(output elements) x (indices along the axis), and never races: no two iterations write one
element.

* ``scatter_elements`` combines the updates landing on an element with its data value:
  add, mul, max or min, so duplicates all count, in any order.
* Plain assignment (ONNX ``reduction="none"``) keeps the last update landing on an element,
  as ONNX's reference and onnxruntime do when indices repeat: ``scatter_position`` finds its
  place along the axis (a max over the positions that match, -1 for none) and
  ``scatter_pick`` reads it, or the data where nothing lands.

Every index is checked against [-n, n) of the axis, in compiled code too (each element of
`indices` is looked at by the output elements on its line, through a checked lookup).
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
from fusionlang.ops.access import Read, Stmt, acc_sym, i_sym, out_indices, r_sym, v_sym
from fusionlang.ops.gather import INDEX_DTYPES
from fusionlang.ops.gather_elements import checked_indices
from fusionlang.ops.registry import Attr, OpCall, OpDef, register

REDUCTIONS = ("add", "mul", "max", "min")

#: reduction -> (access-spec reduction, the body's value where an update does not land)
_FOLD = {"add": ("sum", 0), "mul": ("prod", 1), "max": ("max", None), "min": ("min", None)}

#: the aux array a loaded index is checked and normalized through: arange(n)
PLACES = "places"


def _check_indices(call: OpCall, data: TensorType, indices: TensorType) -> int:
    """The axis; indices of data's rank, no longer than data off the axis, and legal at all."""
    if indices.dtype not in INDEX_DTYPES:
        raise call.fail(f"indices must be int64 or int32, got {indices.dtype}")
    if data.rank < 1 or indices.rank != data.rank:
        raise call.fail(f"data and indices must have the same rank >= 1, got {data.rank} and {indices.rank}")
    axis = call.axis(call.attrs["axis"], data.rank)
    for d, (n, m) in enumerate(zip(data.shape, indices.shape)):
        if d != axis and m > n:
            raise call.fail(f"indices dim {d} is {m}, larger than data's {n}")
    if data.shape[axis] == 0 and indices.size > 0:
        raise call.fail(f"axis {axis} of data is empty: no index into it is legal")
    return axis


def _check_scatter(call: OpCall) -> int:
    data, indices, updates = call.input(0), call.input(1), call.input(2)
    axis = _check_indices(call, data, indices)
    if updates.shape != indices.shape or updates.dtype != data.dtype:
        raise call.fail(f"updates must be {data.dtype} shaped like indices {list(indices.shape)}, got {updates}")
    return axis


def _infer_scatter(call: OpCall) -> list[TensorType]:
    _check_scatter(call)
    reduction = call.attrs["reduction"]
    if reduction not in REDUCTIONS:
        raise call.fail(f"reduction={reduction!r} should be one of {', '.join(REDUCTIONS)} (plain assignment is "
                        "scatter_pick of scatter_position)")
    if reduction in ("add", "mul") and call.input(0).dtype == "bool":
        raise call.fail(f"reduction {reduction} needs numeric data, got bool")
    return [call.input(0)]


def _targets(data_shape: tuple, indices: np.ndarray, axis: int) -> np.ndarray:
    """The flat place in data of each update (C order of indices); checks every index."""
    places = checked_indices(indices, data_shape[axis], axis).astype(np.int64)
    grid: list[np.ndarray] = list(np.indices(indices.shape, dtype=np.int64))
    grid[axis] = places
    return np.ravel_multi_index(tuple(grid), data_shape).reshape(-1)


def _last_writer(data_shape: tuple, indices: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """(flat targets, flat update positions) of the last update landing on each target."""
    targets = _targets(data_shape, indices, axis)
    order = np.arange(targets.size)[::-1]
    targets, first = np.unique(targets[::-1], return_index=True)  # first in reverse: the last one
    return targets, order[first]


def _reference_scatter(xs, attrs):
    data, indices, updates = xs
    axis = attrs["axis"] % data.ndim
    out = np.array(data, order="C")
    fold = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[attrs["reduction"]]
    fold.at(out.reshape(-1), _targets(data.shape, indices, axis), updates.reshape(-1))
    return [out]


def _along(index: tuple, axis: int, at) -> tuple:
    """``index`` with its ``axis`` coordinate replaced by ``at``."""
    out = list(index)
    out[axis] = at
    return tuple(out)


def _landing(call: OpCall, axis: int, data: TensorType, indices: TensorType) -> tuple[list[Read], sp.Basic, dict]:
    """Reads v0 (the index at the reduction position r0 on this element's line), v1 (it,
    checked and normalized), and when the update at r0 lands on this output element."""
    here = out_indices(data.rank)
    n = data.shape[axis]
    at_r = _along(here, axis, r_sym(0))
    reads = [Read(1, at_r, pad=0.0),  # outside indices (a shorter line) reads 0, then never lands
             Read(PLACES, (scalar.CheckedIndex(v_sym(0), n, axis),))]
    inside = [i_sym(d) < m for d, m in enumerate(indices.shape) if d != axis and m < data.shape[d]]
    lands = sp.And(*inside, sp.Eq(v_sym(1), i_sym(axis)))
    return reads, lands, {PLACES: np.arange(max(n, 1), dtype=np.int64)}


def _access_scatter(call: OpCall) -> list[Stmt]:
    axis = _check_scatter(call)
    data, indices = call.input(0), call.input(1)
    if indices.shape[axis] == 0:  # no updates: a copy
        return [Stmt(0, data.shape, (Read(0, out_indices(data.rank)),), v_sym(0))]
    reads, lands, aux = _landing(call, axis, data, indices)
    reads += [Read(2, _along(out_indices(data.rank), axis, r_sym(0)), pad=0.0),  # v2: the update
              Read(0, out_indices(data.rank))]  # v3: the data
    reduce, identity = _FOLD[call.attrs["reduction"]]
    missing = None if identity is None else sp.Integer(identity)
    body = sp.Piecewise((v_sym(2), lands), (v_sym(3) if missing is None else missing, True))
    finalize = {"sum": v_sym(3) + acc_sym(), "prod": v_sym(3) * acc_sym(), "max": sp.Max(acc_sym(), v_sym(3)),
                "min": sp.Min(acc_sym(), v_sym(3))}[reduce]
    return [Stmt(0, data.shape, tuple(reads), body, reduce=reduce, reduce_extents=(indices.shape[axis],),
                 finalize=finalize, aux=aux)]


# ----- plain assignment: the last update landing on each element -------------------------
def _infer_position(call: OpCall) -> list[TensorType]:
    _check_indices(call, call.input(0), call.input(1))
    return [TensorType(call.input(0).shape, "int64")]


def _reference_position(xs, attrs):
    data, indices = xs
    axis = attrs["axis"] % data.ndim
    targets, writers = _last_writer(data.shape, indices, axis)
    out = np.full(data.size, -1, np.int64)
    out[targets] = np.unravel_index(writers, indices.shape)[axis] if indices.size else writers
    return [out.reshape(data.shape)]


def _access_position(call: OpCall) -> list[Stmt]:
    data, indices = call.input(0), call.input(1)
    axis = _check_indices(call, data, indices)
    if indices.shape[axis] == 0:  # nothing lands anywhere
        return [Stmt(0, data.shape, (), sp.Integer(-1))]
    reads, lands, aux = _landing(call, axis, data, indices)
    body = sp.Piecewise((r_sym(0), lands), (sp.Integer(-1), True))
    return [Stmt(0, data.shape, tuple(reads), body, reduce="max", reduce_extents=(indices.shape[axis],), aux=aux)]


def _check_pick(call: OpCall) -> int:
    data, updates, position = call.input(0), call.input(1), call.input(2)
    if position.dtype != "int64" or position.shape != data.shape:
        raise call.fail(f"position must be int64 shaped like data {list(data.shape)}, got {position}")
    if updates.dtype != data.dtype or updates.rank != data.rank:
        raise call.fail(f"updates must be {data.dtype} of rank {data.rank}, got {updates}")
    axis = call.axis(call.attrs["axis"], data.rank)
    for d, (n, m) in enumerate(zip(data.shape, updates.shape)):
        if d != axis and m > n:
            raise call.fail(f"updates dim {d} is {m}, larger than data's {n}")
    return axis


def _infer_pick(call: OpCall) -> list[TensorType]:
    _check_pick(call)
    return [call.input(0)]


def _reference_pick(xs, attrs):
    data, updates, position = xs
    axis = attrs["axis"] % data.ndim
    m = updates.shape[axis]
    bad = (position < -m) | (position >= m) if m else position >= 0
    if np.any(bad):
        raise IndexError(f"position {int(position[bad].flat[0])} is out of range for axis {axis} of updates "
                         f"of size {m} (a negative one keeps the data)")
    # updates shorter than data off the axis reads as zeros there
    padded = np.zeros(tuple(m if d == axis else n for d, n in enumerate(data.shape)), data.dtype)
    padded[tuple(slice(0, k) for k in updates.shape)] = updates
    picked = np.take_along_axis(padded, np.maximum(position, 0), axis=axis) if m else data
    return [np.asarray(np.where(position >= 0, picked, data), order="C")]


def _access_pick(call: OpCall) -> list[Stmt]:
    axis = _check_pick(call)
    data, updates = call.input(0), call.input(1)
    here = out_indices(data.rank)
    m = updates.shape[axis]
    if m == 0:  # nothing to pick (position holds only negatives), and no index is legal to read at
        return [Stmt(0, data.shape, (Read(0, here),), v_sym(0))]
    shorter = any(k < n for d, (n, k) in enumerate(zip(data.shape, updates.shape)) if d != axis)
    # v0: where along the axis the update is, or negative (checked against [-m, m) like an index:
    # a negative one reads a legal element, left unused)
    reads = (Read(2, here),
             Read(1, _along(here, axis, scalar.CheckedIndex(v_sym(0), m, axis)), pad=0.0 if shorter else None),
             Read(0, here))  # v2: the data
    body = sp.Piecewise((v_sym(1), v_sym(0) >= 0), (v_sym(2), True))
    return [Stmt(0, data.shape, reads, body)]


register(
    OpDef(
        name="scatter_elements",
        inputs=("data", "indices", "updates"),
        attrs={"axis": Attr("int", 0), "reduction": Attr("str", "add", "add, mul, max or min")},
        infer=_infer_scatter,
        reference=_reference_scatter,
        access=_access_scatter,
        doc="A copy of data where each update, at its own position with the `axis` coordinate replaced by "
            "indices there, is combined into the element it lands on by `reduction` (add, mul, max, min; ONNX "
            "ScatterElements). Negative indices count from the end; one outside [-n, n) is an error, in compiled "
            "code too. ONNX's reduction none is scatter_pick of scatter_position.",
    )
)

register(
    OpDef(
        name="scatter_position",
        inputs=("data", "indices"),
        attrs={"axis": Attr("int", 0)},
        infer=_infer_position,
        reference=_reference_position,
        access=_access_position,
        doc="For each element of data (only its shape is used): the position along `axis` in indices of the "
            "last index (in C order) that names it, or -1. Negative indices count from the end; one outside "
            "[-n, n) is an error, in compiled code too.",
    )
)

register(
    OpDef(
        name="scatter_pick",
        inputs=("data", "updates", "position"),
        attrs={"axis": Attr("int", 0)},
        infer=_infer_pick,
        reference=_reference_pick,
        access=_access_pick,
        doc="data where position is negative, else updates at the element's index with the `axis` coordinate "
            "replaced by position (updates shorter than data off the axis reads 0 there; a position outside "
            "[-m, m) is an error, in compiled code too). With scatter_position: ONNX ScatterElements with "
            "reduction none (the last of repeated indices wins).",
    )
)
