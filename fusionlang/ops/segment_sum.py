"""SegmentSum: rows of `updates` summed into the rows of a zero tensor that `indices` names.

``out[indices[r]] += updates[r]`` for every row r, on ``out`` zeros of ``num_segments``
rows: torch's ``index_put(zeros, [indices], values, accumulate=True)``, which is what
embedding's backward is (TensorFlow's ``unsorted_segment_sum``). Rows landing on one
segment are added in the order of ``indices``, so the sum is deterministic.

The access spec is in pull form, as ``scatter_elements``' is (each output element sums
the updates whose index names its row: output elements x rows); the C target runs the
op as a direct kernel instead (``backend/segment_template``): a zero fill, then one pass
over the rows in order, each added to its segment (the pass torch and Inductor make).
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
from fusionlang.ops.access import Read, Stmt, i_sym, out_indices, r_sym, v_sym
from fusionlang.ops.gather import INDEX_DTYPES
from fusionlang.ops.gather_elements import checked_indices
from fusionlang.ops.registry import Attr, OpCall, OpDef, register

#: the aux array a loaded index is checked and normalized through: arange(num_segments)
PLACES = "places"


def _infer(call: OpCall) -> list[TensorType]:
    updates, indices = call.input(0), call.input(1)
    segments = call.attrs["num_segments"]
    if indices.dtype not in INDEX_DTYPES:
        raise call.fail(f"indices must be int64 or int32, got {indices.dtype}")
    if indices.rank != 1 or updates.rank < 1 or updates.shape[0] != indices.shape[0]:
        raise call.fail(f"indices must be 1-D with one entry per row of updates, got {indices} for {updates}")
    if updates.dtype == "bool":
        raise call.fail("updates must be numeric, got bool")
    if segments < 1:
        raise call.fail(f"num_segments={segments} must be >= 1")
    return [TensorType((segments, *updates.shape[1:]), updates.dtype)]


def _reference(xs, attrs):
    updates, indices = xs
    segments = attrs["num_segments"]
    out = np.zeros((segments, *updates.shape[1:]), updates.dtype)
    np.add.at(out, checked_indices(indices, segments, 0), updates)  # in the order of indices
    return [out]


def _access(call: OpCall) -> list[Stmt]:
    out = _infer(call)[0]
    rows = call.input(1).shape[0]
    segments = call.attrs["num_segments"]
    here = out_indices(out.rank)
    if rows == 0:
        return [Stmt(0, out.shape, (), sp.Integer(0))]
    # v0: the index of row r0; v1: it, checked and normalized; v2: row r0's update here
    reads = (Read(1, (r_sym(0),)), Read(PLACES, (scalar.CheckedIndex(v_sym(0), segments, 0),)),
             Read(0, (r_sym(0), *here[1:])))
    body = sp.Piecewise((v_sym(2), sp.Eq(v_sym(1), i_sym(0))), (sp.Integer(0), True))
    return [Stmt(0, out.shape, reads, body, reduce="sum", reduce_extents=(rows,),
                 aux={PLACES: np.arange(segments, dtype=np.int64)})]


register(
    OpDef(
        name="segment_sum",
        inputs=("updates", "indices"),
        attrs={"num_segments": Attr("int", doc="rows of the output")},
        infer=_infer,
        reference=_reference,
        access=_access,
        doc="Zeros of `num_segments` rows (each shaped like a row of updates) with each row of updates added to "
            "the row its entry of the 1-D indices names, in order (torch's index_put with accumulate on zeros: "
            "embedding's backward). Negative indices count from the end; one outside [-n, n) is an error, in "
            "compiled code too.",
    )
)
