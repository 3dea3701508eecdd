"""The CUDA-only codegen passes: how a group splits into units, which arrays units share,
how each unit maps to the GPU and which rows move as float4 (see backend.cuda_passes)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import softmax

from fusionlang.backend.codegen_passes import CodegenOptions, plan_codegen
from fusionlang.backend.cuda_passes import (SHARED_LIMIT, VECTOR, WARPS, UnitFacts, UnitPlan, cross_arrays,
                                            place_buffers, placed, plan_units, split_units)
from fusionlang.backend.loopir import For, Storage, walk
from fusionlang.backend.poly import Array
from fusionlang.backend.runtime import lower_group
from fusionlang.engine.plan import single_group_plan
from fusionlang.ops import GraphBuilder


def _planned(graph):
    """The group of ``graph`` lowered for CUDA with its loops planned, and its unit plans."""
    plan = single_group_plan(graph)
    group = plan_codegen(lower_group(plan, plan.groups[0], "cuda"), CodegenOptions("cuda"))
    units = split_units(group)
    cross, _ = cross_arrays(group, units)
    return group, [unit_plan for _, unit_plan in plan_units(group, units, cross)]


def _unit_plans(graph):
    return _planned(graph)[1]


def _softmax_rows(rows: int, cols: int):
    b = GraphBuilder("rows")
    b.output(softmax(b, b.input("x", (rows, cols))))
    return b.build()


def _elementwise(shape):
    b = GraphBuilder("wide")
    x = b.input("x", shape)
    bias = b.constant(np.ones(shape[-1], np.float32))
    b.output(b.tanh(b.add(x, bias)))
    return b.build()


@pytest.mark.parametrize("rows,cols,mode", [(37, 70, "warp"), (3, 1500, "block")])
def test_short_rows_run_a_warp_per_row_and_long_rows_a_block(rows, cols, mode):
    assert [p.mode for p in _unit_plans(_softmax_rows(rows, cols))] == [mode]


def test_a_wide_elementwise_unit_runs_a_thread_per_point_and_moves_its_rows_as_float4():
    (unit,) = _unit_plans(_elementwise((256, 260)))
    assert unit.mode == "thread" and unit.vector is not None
    assert len(unit.vector.loads) == 2 and len(unit.vector.stores) == 1  # x and the bias; the output
    assert all(offset.as_coefficients_dict().get(1, 0) % VECTOR == 0 for _, offset in unit.vector.loads.values())


@pytest.mark.parametrize("shape", [(3, 5), (256, 258)])  # too few points; rows not a multiple of VECTOR
def test_small_or_unaligned_elementwise_units_stay_scalar(shape):
    (unit,) = _unit_plans(_elementwise(shape))
    assert unit.mode == "thread" and unit.vector is None


def test_a_global_statistic_read_by_the_next_unit_goes_through_the_scratch_area():
    b = GraphBuilder("centered")  # one kernel computes the mean, the next reads it
    x = b.input("x", (256, 300))
    b.output(b.sub(x, b.reduce_mean(x, axes=[0, 1], keepdims=1)))
    plan = single_group_plan(b.build())
    group = plan_codegen(lower_group(plan, plan.groups[0], "cuda"), CodegenOptions("cuda"))
    units = split_units(group)
    cross, size = cross_arrays(group, units)
    assert len(units) > 1 and cross and size % 16 == 0


def test_a_single_nest_shares_nothing_through_scratch():
    plan = single_group_plan(_softmax_rows(37, 70))
    group = plan_codegen(lower_group(plan, plan.groups[0], "cuda"), CodegenOptions("cuda"))
    assert cross_arrays(group, split_units(group)) == ({}, 0)


def test_a_row_team_reduces_its_statistics_and_shares_its_parallel_loop():
    group, _ = _planned(_softmax_rows(3, 1500))
    threads = [f.plan.threads for f in walk(group.body) if isinstance(f, For) and f.plan.threads]
    assert threads == ["reduce", "reduce", "split"]  # max, exp + sum, divide
    reduced = [f.plan.block_scalars for f in walk(group.body) if isinstance(f, For) and f.plan.threads == "reduce"]
    assert all(len(accs) == 1 for accs in reduced)


def test_loops_of_a_thread_mapped_unit_are_not_planned_for_a_team():
    b = GraphBuilder("rows")
    b.output(b.reduce_sum(b.input("x", (8192, 3000)), axes=[-1]))  # many rows, each too long for a warp
    group, (unit,) = _planned(b.build())
    assert unit.mode == "thread"
    assert all(not f.plan.threads for f in walk(group.body) if isinstance(f, For))


def _buffer(aid: int, floats: int) -> Storage:
    return Storage(Array(aid, (floats,), "float32", "temp"), "local", (True,))


def _facts(*buffers: Storage) -> UnitFacts:
    return UnitFacts([(0, 64)], [64], 64, list(buffers), [], [])


def test_buffers_go_to_shared_memory_while_they_fit_and_then_to_scratch():
    fits, too_big, small = _buffer(1, 1024), _buffer(2, SHARED_LIMIT // 4), _buffer(3, 16)
    assert place_buffers([fits, too_big, small], SHARED_LIMIT) == {1, 3}  # the small one still fits after


def test_a_warp_unit_whose_buffers_exceed_a_warps_share_runs_a_block_per_point():
    share = SHARED_LIMIT // WARPS // 4  # floats
    assert placed(UnitPlan("warp"), _facts(_buffer(1, share))) == UnitPlan("warp", shared=frozenset({1}))
    moved = placed(UnitPlan("warp"), _facts(_buffer(1, share + 1)))
    assert moved == UnitPlan("block", shared=frozenset({1}))
