"""GatherElements: each output element reads `data` where `indices` says, along one axis."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, out_indices, v_sym
from fusionlang.ops.gather import INDEX_DTYPES
from fusionlang.ops.registry import Attr, OpCall, OpDef, register

if TYPE_CHECKING:
    from fusionlang.ops import scalar
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import lazy_module

    scalar = lazy_module("fusionlang.ops.scalar")


def checked_indices(indices: np.ndarray, n: int, axis: int) -> np.ndarray:
    """``indices`` into an axis of size n with negative ones counted from the end;
    IndexError for one outside [-n, n)."""
    bad = (indices < -n) | (indices >= n)
    if np.any(bad):
        raise IndexError(f"index {int(indices[bad].flat[0])} is out of range for axis {axis} of size {n}")
    return np.where(indices < 0, indices + n, indices)


def _axis(call: OpCall) -> int:
    data, indices = call.input(0), call.input(1)
    if indices.dtype not in INDEX_DTYPES:
        raise call.fail(f"indices must be int64 or int32, got {indices.dtype}")
    if data.rank < 1 or indices.rank != data.rank:
        raise call.fail(f"data and indices must have the same rank >= 1, got {data.rank} and {indices.rank}")
    axis = call.axis(call.attrs["axis"], data.rank)
    for d, (n, m) in enumerate(zip(data.shape, indices.shape)):
        if d != axis and m > n:
            raise call.fail(f"indices dim {d} is {m}, larger than data's {n}")
    return axis


def _infer(call: OpCall) -> list[TensorType]:
    _axis(call)
    return [TensorType(call.input(1).shape, call.input(0).dtype)]


def _reference(xs, attrs):
    data, indices = xs
    axis = attrs["axis"] % data.ndim
    places = checked_indices(indices, data.shape[axis], axis)
    # indices may be shorter than data on the other axes (never broadcast): cut data to them
    window = tuple(slice(None) if d == axis else slice(0, m) for d, m in enumerate(indices.shape))
    return [np.asarray(np.take_along_axis(data[window], places.astype(np.int64), axis=axis), order="C")]


def _access(call: OpCall) -> list[Stmt]:
    axis = _axis(call)
    data = call.input(0)
    out = call.out_types[0]
    index_read = Read(1, out_indices(out.rank))
    at = list(out_indices(out.rank))
    # v0, the loaded index, checked against [-n, n) in generated code too, as Gather's
    n = data.shape[axis]
    at[axis] = scalar.CheckedIndex(v_sym(0), n, axis)
    # an empty axis admits no index at all: the (failing) read must not touch memory either
    data_read = Read(0, tuple(at), pad=0.0 if n == 0 else None)
    return [Stmt(0, out.shape, (index_read, data_read), v_sym(1))]


register(
    OpDef(
        name="gather_elements",
        inputs=("data", "indices"),
        attrs={"axis": Attr("int", 0)},
        infer=_infer,
        reference=_reference,
        access=_access,
        doc="out[i...] = data[i...] with the `axis` coordinate replaced by indices[i...]; negative "
            "indices count from the end (ONNX GatherElements). An index outside [-n, n) is an error, in "
            "compiled code too (unless compiled with check_indices=False).",
    )
)

__all__ = ["checked_indices"]
