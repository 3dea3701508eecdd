"""Concat and split: slabs along one axis, one statement per slab."""

from __future__ import annotations

import numpy as np

from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, out_indices, v_sym
from fusionlang.ops.common import present_types, same_dtype
from fusionlang.ops.registry import Attr, OpCall, OpDef, register


def _offsets(sizes) -> list[int]:
    return [int(v) for v in np.concatenate([[0], np.cumsum(sizes)[:-1]])] if len(sizes) else []


def shifted(rank: int, axis: int, offset: int) -> tuple:
    """Index i with ``offset`` added on ``axis``."""
    index = list(out_indices(rank))
    index[axis] = index[axis] + offset
    return tuple(index)


# ----- concat ----------------------------------------------------------------------


def _concat_axis(call: OpCall) -> int:
    types = call.in_types
    if any(t is None for t in types):
        raise call.fail("inputs cannot be omitted")
    types = present_types(call)  # (all of them)
    first = types[0]
    if first.rank < 1:
        raise call.fail("inputs must have rank >= 1")
    axis = call.axis(call.attrs["axis"], first.rank)
    for k, t in enumerate(types[1:], start=1):
        if t.rank != first.rank:
            raise call.fail(f"input {k} {t} has rank {t.rank}, input 0 {first} has rank {first.rank}")
        if t.shape[:axis] + t.shape[axis + 1:] != first.shape[:axis] + first.shape[axis + 1:]:
            raise call.fail(f"input {k} {t} differs from input 0 {first} off the concat axis {axis}")
    return axis


def _concat_infer(call: OpCall) -> list[TensorType]:
    axis = _concat_axis(call)
    dtype = same_dtype(call, present_types(call))
    shape = list(present_types(call)[0].shape)
    shape[axis] = sum(t.shape[axis] for t in present_types(call))
    return [TensorType(tuple(shape), dtype)]


def _concat_access(call: OpCall) -> list[Stmt]:
    axis = _concat_axis(call)
    offsets = _offsets([t.shape[axis] for t in present_types(call)])
    return [Stmt(0, t.shape, (Read(k, out_indices(t.rank)),), v_sym(0), write=shifted(t.rank, axis, offset))
            for k, (t, offset) in enumerate(zip(present_types(call), offsets))]


register(
    OpDef(
        name="concat",
        inputs=("x",),
        variadic=True,
        min_inputs=1,
        attrs={"axis": Attr("int", doc="axis to join along; the others must agree")},
        infer=_concat_infer,
        reference=lambda xs, a: [np.concatenate(xs, axis=a["axis"])],
        access=_concat_access,
        doc="Join tensors along `axis`; each input is one statement writing its slab.",
    )
)

# ----- split -----------------------------------------------------------------------


def _split_axis(call: OpCall) -> int:
    x = call.input(0)
    if x.rank < 1:
        raise call.fail("input must have rank >= 1")
    axis = call.axis(call.attrs["axis"], x.rank)
    sizes = call.attrs["split"]
    if not sizes:
        raise call.fail("split must list at least one size")
    if min(sizes) < 0:
        raise call.fail(f"split {list(sizes)} has a negative size")
    if sum(sizes) != x.shape[axis]:
        raise call.fail(f"split {list(sizes)} sums to {sum(sizes)}, but axis {axis} of {x} has {x.shape[axis]}")
    return axis


def _split_infer(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    axis = _split_axis(call)
    return [x.with_shape(x.shape[:axis] + (n,) + x.shape[axis + 1:]) for n in call.attrs["split"]]


def _split_reference(xs, attrs):
    x = xs[0]
    axis = attrs["axis"] % x.ndim
    bounds = np.cumsum(attrs["split"])[:-1]
    return [np.ascontiguousarray(part) for part in np.split(x, bounds, axis=axis)]


def _split_access(call: OpCall) -> list[Stmt]:
    axis = _split_axis(call)
    rank = call.input(0).rank
    return [Stmt(k, t.shape, (Read(0, shifted(rank, axis, offset)),), v_sym(0))
            for k, (t, offset) in enumerate(zip(call.out_types, _offsets(call.attrs["split"])))]


register(
    OpDef(
        name="split",
        inputs=("x",),
        attrs={"axis": Attr("int", 0), "split": Attr("ints", doc="size of each output along axis")},
        num_outputs=1,
        max_outputs=1 << 16,
        infer=_split_infer,
        reference=_split_reference,
        access=_split_access,
        doc="Cut `x` along `axis` into len(split) outputs of the given sizes; one statement each.",
    )
)
