"""The codegen passes: each decision recorded on the loop IR (``For.plan``), with a case
that takes it and one that does not (see backend.codegen_passes)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import layer_norm, planned_loops, softmax

from fusionlang.backend import codegen_passes
from fusionlang.backend.codegen_passes import PREFETCH_AHEAD, REDUCTION_STREAMS, row_offset
from fusionlang.engine.plan import per_node_plan, single_group_plan
from fusionlang.ops import GraphBuilder


def _rows(kind: str, rows: int = 6, cols: int = 256, dtype: str = "float32"):
    b = GraphBuilder(kind)
    x = b.input("x", (rows, cols), dtype)
    if kind == "layer_norm":
        b.output(layer_norm(b, x, b.constant(np.linspace(0.5, 1.5, cols, dtype=np.float32)),
                            b.constant(np.zeros(cols, np.float32))))
    elif kind == "softmax":
        b.output(softmax(b, x))
    elif kind == "divide":
        b.output(b.div(x, b.reduce_sum(x, axes=[1], keepdims=1)))
    elif kind == "divide_elementwise":
        b.output(b.div(x, b.input("y", (rows, cols))))
    elif kind == "exp":
        b.output(b.exp(x))
    else:
        b.output(b.op(kind, x, axes=[-1]))
    return b.build()


def _gather_columns():
    b = GraphBuilder("columns")
    x = b.input("x", (3, 40), "float32")
    b.output(b.exp(b.gather(x, b.input("ids", (64,), "int64"), axis=1)))
    return b.build()


def _plans(graph, target="c", fused=True, **options):
    plan = single_group_plan(graph) if fused else per_node_plan(graph)
    return [f.plan for f in planned_loops(plan, target, **options)]


# ----- pragma ---------------------------------------------------------------------------------
def test_only_a_large_kernel_with_openmp_gets_one_parallel_loop():
    assert [p.pragma for p in _plans(_rows("softmax", 257, 129), openmp=True)].count("parallel") == 1
    assert "parallel" not in [p.pragma for p in _plans(_rows("softmax", 257, 129))]
    assert 3 * 17 < codegen_passes.PARALLEL_MIN_ELEMENTS
    assert "parallel" not in [p.pragma for p in _plans(_rows("softmax", 3, 17), openmp=True)]


def test_innermost_loops_are_simd_and_reductions_name_their_clauses():
    assert [p.pragma for p in _plans(_rows("exp"))][-1] == "simd"
    total, = [r for p in _plans(_rows("reduce_sum")) for r in p.reductions]
    assert (total.op, total.clause, total.dtype) == ("sum", "fl_add", "float32")  # lanes start at -0.0
    largest, = [r for p in _plans(_rows("reduce_max", dtype="int64")) for r in p.reductions]
    assert (largest.op, largest.clause) == ("max", "max")


def test_cuda_loops_get_no_openmp_pragma():
    assert {p.pragma for p in _plans(_rows("softmax", 257, 129), "cuda", openmp=True)} == {""}


# ----- reciprocals ----------------------------------------------------------------------------
def test_on_cuda_a_division_by_a_row_scalar_hoists_its_reciprocal():
    hoisted = [p.reciprocals for p in _plans(_rows("divide"), "cuda") if p.reciprocals]
    assert len(hoisted) == 1 and list(hoisted[0].values()) == ["float32"]


def test_no_reciprocal_on_the_cpu_or_for_a_divisor_that_is_not_a_scalar():
    assert not any(p.reciprocals for p in _plans(_rows("divide")))
    assert not any(p.reciprocals for p in _plans(_rows("divide_elementwise"), "cuda"))


# ----- streamed stores ------------------------------------------------------------------------
def test_a_streamed_output_row_short_enough_for_l1_is_stored_streaming():
    graph = _rows("softmax", 64, 1024)
    streamed, = [p.streamed_store for p in _plans(graph, streamed=frozenset(graph.outputs)) if p.streamed_store]
    assert (streamed.first, streamed.last) == (0, 1023) and streamed.store.array.value == graph.outputs[0]


def test_no_streamed_store_for_an_output_not_streamed_or_a_row_past_l1():
    graph = _rows("softmax", 64, 1024)
    assert not any(p.streamed_store for p in _plans(graph))
    long_rows = _rows("softmax", 4, 8192)  # 32 KiB rows
    assert not any(p.streamed_store for p in _plans(long_rows, streamed=frozenset(long_rows.outputs)))


# ----- split reduction streams ----------------------------------------------------------------
def test_long_float_sums_split_into_streams():
    split = [p for p in _plans(_rows("layer_norm")) if p.split_streams > 1]
    assert len(split) == 2  # the mean and the variance
    assert all(p.split_streams == REDUCTION_STREAMS and p.span == (0, 255) for p in split)


@pytest.mark.parametrize("kind,cols", [("reduce_sum", 64), ("reduce_sum", 258), ("reduce_max", 256)])
def test_short_uneven_or_max_reductions_are_not_split(kind, cols):
    # 16 iterations per stream; not a multiple of four; a max waits one cycle (no gain)
    plans = _plans(_rows(kind, cols=cols))
    assert any(p.reductions for p in plans) and all(p.split_streams == 1 for p in plans)


def test_a_reduction_checking_indices_is_not_split():
    b = GraphBuilder("gather_sum")
    x = b.input("x", (3, 40), "float32")
    b.output(b.reduce_sum(b.gather(x, b.input("ids", (256,), "int64"), axis=1), axes=[-1]))
    graph = b.build()
    assert all(p.split_streams == 1 for p in _plans(graph))
    assert any(p.split_streams > 1 for p in _plans(graph, check_indices=False))


# ----- NaN flags ------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
def test_float_max_min_reductions_carry_a_nan_flag(op):
    flagged = [p for p in _plans(_rows(op)) if p.nan_flags]
    assert len(flagged) == 1 and flagged[0].nan_flags == tuple(r.acc for r in flagged[0].reductions)


@pytest.mark.parametrize("op,dtype", [("reduce_max", "int64"), ("reduce_sum", "float32")])
def test_integer_max_and_sums_carry_no_nan_flag(op, dtype):
    plans = _plans(_rows(op, dtype=dtype))
    assert any(p.reductions for p in plans) and not any(p.nan_flags for p in plans)


# ----- lane checks ----------------------------------------------------------------------------
def test_a_simd_loop_checking_indices_reduces_lane_flags():
    assert any(p.lane_checks and p.pragma == "simd" for p in _plans(_gather_columns()))


def test_no_lane_checks_without_index_checks_or_checked_loads():
    assert not any(p.lane_checks for p in _plans(_gather_columns(), check_indices=False))
    assert not any(p.lane_checks for p in _plans(_rows("exp")))


# ----- prefetch -------------------------------------------------------------------------------
def test_a_multi_pass_nest_prefetches_its_input_row_after_the_first_pass():
    rows = 128
    loops = planned_loops(single_group_plan(_rows("layer_norm", rows)))
    outer, = [f for f in loops if f.plan.prefetch]
    row, = outer.plan.prefetch  # x moves with the row; gamma and beta are the same every row
    assert row.array.role == "input" and row.after is [n for n in outer.body if n in loops][0]
    ahead = -(-PREFETCH_AHEAD // (256 * 4))
    assert str(row.guard) == f"{outer.var} + {ahead} <= {rows - 1}" and row.step == 16


def test_few_rows_and_single_pass_kernels_prefetch_nothing():
    assert not any(p.prefetch for p in _plans(_rows("layer_norm")))  # all rows closer than the distance
    assert not any(p.prefetch for p in _plans(_rows("softmax", 128), fused=False))


def test_only_contiguous_rows_moving_with_the_outer_loop_are_prefetched():
    import sympy as sp

    outer, inner = sp.Symbol("c0", integer=True), sp.Symbol("c1", integer=True)
    assert row_offset(1024 * outer + inner + 3, outer, inner)
    assert not row_offset(inner, outer, inner)                          # the same row every time
    assert not row_offset(1024 * outer + 2 * inner, outer, inner)       # strided
    assert not row_offset(outer * inner, outer, inner)
    assert not row_offset(1024 * sp.floor(outer / 2) + inner, outer, inner)  # not a polynomial
    assert not row_offset(1024 * outer + inner + sp.Symbol("_ld1"), outer, inner)  # indirect
