"""GatherND: slices of `data` addressed by index tuples (the last axis of `indices`)."""

from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import sympy as sp

    from fusionlang.ops import scalar
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import lazy_module, sp

    scalar = lazy_module("fusionlang.ops.scalar")

from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, i_sym, v_sym
from fusionlang.ops.gather_elements import checked_indices
from fusionlang.ops.registry import Attr, OpCall, OpDef, register


def _depth(call: OpCall) -> tuple[int, int]:
    """(batch_dims, entries per index tuple)."""
    data, indices = call.input(0), call.input(1)
    if indices.dtype != "int64":  # ONNX GatherND takes no other index type
        raise call.fail(f"indices must be int64, got {indices.dtype}")
    b = call.attrs["batch_dims"]
    if data.rank < 1 or indices.rank < 1:
        raise call.fail(f"data and indices need rank >= 1, got {data.rank} and {indices.rank}")
    if not 0 <= b < min(data.rank, indices.rank):
        raise call.fail(f"batch_dims={b} must be below both ranks ({data.rank} and {indices.rank})")
    if data.shape[:b] != indices.shape[:b]:
        raise call.fail(f"the batch dims of data {list(data.shape[:b])} and indices {list(indices.shape[:b])} differ")
    m = indices.shape[-1]
    if not 1 <= m <= data.rank - b:
        raise call.fail(f"index tuples have {m} entries; data has {data.rank - b} axes past the batch dims")
    return b, m


def _infer(call: OpCall) -> list[TensorType]:
    b, m = _depth(call)
    data, indices = call.input(0), call.input(1)
    return [TensorType(indices.shape[:-1] + data.shape[b + m:], data.dtype)]


def _reference(xs, attrs):
    data, indices = xs
    b = attrs["batch_dims"]
    m = indices.shape[-1]
    places = [checked_indices(indices[..., k], data.shape[b + k], b + k).astype(np.int64) for k in range(m)]
    batch = prod(data.shape[:b])
    flat = data.reshape((batch,) + data.shape[b:])
    tuples = [p.reshape((batch,) + indices.shape[b:-1]) for p in places]
    picked = [flat[t][tuple(p[t] for p in tuples)] for t in range(batch)]
    out_shape = indices.shape[:-1] + data.shape[b + m:]
    out = np.stack(picked) if picked else np.zeros(out_shape, data.dtype)
    return [np.asarray(out.reshape(out_shape), order="C")]


def _access(call: OpCall) -> list[Stmt]:
    b, m = _depth(call)
    data, indices = call.input(0), call.input(1)
    q = indices.rank
    lead = tuple(i_sym(k) for k in range(q - 1))  # the output axes of the index tuples
    reads = tuple(Read(1, lead + (sp.Integer(k),)) for k in range(m))  # v0..v{m-1}: one tuple's entries
    # each loaded entry checked against [-n, n) of its axis in generated code too, as Gather's
    picked = tuple(scalar.CheckedIndex(v_sym(k), data.shape[b + k], b + k) for k in range(m))
    rest = tuple(i_sym(q - 1 + k) for k in range(data.rank - b - m))
    empty = any(data.shape[b + k] == 0 for k in range(m))  # no index is legal: the read must not touch memory
    data_read = Read(0, lead[:b] + picked + rest, pad=0.0 if empty else None)
    return [Stmt(0, call.out_types[0].shape, reads + (data_read,), v_sym(m))]


register(
    OpDef(
        name="gather_nd",
        inputs=("data", "indices"),
        attrs={"batch_dims": Attr("int", 0, "leading axes data and indices share")},
        infer=_infer,
        reference=_reference,
        access=_access,
        doc="out[b..., i..., j...] = data[b..., indices[b..., i..., :], j...]: each index tuple picks a slice; "
            "negative indices count from the end (ONNX GatherND). An index outside [-n, n) is an error, in compiled "
            "code too (unless compiled with check_indices=False).",
    )
)
