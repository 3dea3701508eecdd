"""Gather: pick slices of `data` along one axis by an index tensor (an indirect read)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, i_sym, v_sym
from fusionlang.ops.registry import Attr, OpCall, OpDef, register

if TYPE_CHECKING:
    from fusionlang.ops import scalar
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import lazy_module

    scalar = lazy_module("fusionlang.ops.scalar")

INDEX_DTYPES = ("int64", "int32")


def _axis(call: OpCall) -> int:
    data, indices = call.input(0), call.input(1)
    if data.rank < 1:
        raise call.fail("data must have rank >= 1")
    if indices.dtype not in INDEX_DTYPES:
        raise call.fail(f"indices must be int64 or int32, got {indices.dtype}")
    return call.axis(call.attrs["axis"], data.rank)


def _infer(call: OpCall) -> list[TensorType]:
    axis = _axis(call)
    data, indices = call.input(0), call.input(1)
    return [data.with_shape(data.shape[:axis] + indices.shape + data.shape[axis + 1:])]


def _reference(xs, attrs):
    data, indices = xs
    axis = attrs["axis"] % data.ndim
    n = data.shape[axis]
    bad = (indices < -n) | (indices >= n)
    if np.any(bad):
        raise IndexError(f"index {int(indices[bad].flat[0])} is out of range for axis {axis} of size {n}")
    return [np.asarray(np.take(data, np.where(indices < 0, indices + n, indices), axis=axis), order="C")]


def _access(call: OpCall) -> list[Stmt]:
    axis = _axis(call)
    data, indices = call.input(0), call.input(1)
    q = indices.rank
    index_read = Read(1, tuple(i_sym(axis + k) for k in range(q)))
    # v0 is the loaded index: checked against [-n, n) and a negative one counted from the end
    n = data.shape[axis]
    picked = scalar.CheckedIndex(v_sym(0), n, axis)
    before = tuple(i_sym(k) for k in range(axis))
    after = tuple(i_sym(axis + q + k) for k in range(data.rank - axis - 1))
    # an empty axis admits no index at all: the (failing) read must not touch memory either
    data_read = Read(0, before + (picked,) + after, pad=0.0 if n == 0 else None)
    return [Stmt(0, call.out_types[0].shape, (index_read, data_read), v_sym(1))]


register(
    OpDef(
        name="gather",
        inputs=("data", "indices"),
        attrs={"axis": Attr("int", 0)},
        infer=_infer,
        reference=_reference,
        access=_access,
        doc="out[..., j..., ...] = data[..., indices[j...], ...] along `axis`; negative indices "
            "count from the end (ONNX Gather). An index outside [-n, n) is an error, in compiled code "
            "too (unless compiled with check_indices=False).",
    )
)
