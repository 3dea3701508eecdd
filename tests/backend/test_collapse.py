"""Loop pairs walking memory as one row collapse into one loop (backend.collapse), and
only those: each case compiled for C matches the reference interpreter."""

from __future__ import annotations

import numpy as np
from helpers import random_feeds

import fusionlang
from fusionlang import reference
from fusionlang.backend.collapse import collapse_rows
from fusionlang.backend.codegen_passes import constant_span
from fusionlang.backend.loopir import For, walk
from fusionlang.backend.runtime import lower_group
from fusionlang.engine.plan import single_group_plan
from fusionlang.ops import GraphBuilder

SHAPE = (3, 5, 7, 9)  # odd extents: no row is a whole number of vectors


def _innermost_trips(graph) -> list[int]:
    """The trip counts of the innermost loops of the graph's single fused group, collapsed."""
    plan = single_group_plan(graph)
    group, = plan.groups
    lowered = collapse_rows(lower_group(plan, group, "c"))
    loops = [n for n in walk(lowered.body) if isinstance(n, For) and not any(isinstance(m, For) for m in n.body)]
    return [constant_span(f)[1] - constant_span(f)[0] + 1 for f in loops]


def _matches_reference(graph, tolerance: float = 1e-4) -> None:
    feeds = random_feeds(graph)
    got = fusionlang.compile(single_group_plan(graph), "c").run(feeds)
    want = reference.run(graph, feeds)
    for name in graph.outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=tolerance, atol=tolerance)


def _batch_statistics():
    """A training batch norm's per-channel mean and variance and the normalized output."""
    b = GraphBuilder("statistics")
    x = b.input("x", SHAPE, "float32")
    mean = b.reduce_mean(x, axes=[0, 2, 3], keepdims=1)
    centered = b.sub(x, mean)
    var = b.reduce_mean(b.mul(centered, centered), axes=[0, 2, 3], keepdims=1)
    b.output(b.div(centered, b.sqrt(b.add(var, b.constant(np.asarray(1e-5, np.float32))))))
    return b.build()


def test_a_planes_rows_and_columns_are_one_loop_in_the_channel_reductions():
    graph = _batch_statistics()
    assert set(_innermost_trips(graph)) == {SHAPE[2] * SHAPE[3]}
    _matches_reference(graph)


def test_an_elementwise_chain_walks_each_outer_iteration_as_one_row():
    b = GraphBuilder("chain")
    x = b.input("x", SHAPE, "float32")
    b.output(b.exp(b.add(x, b.input("y", SHAPE, "float32"))))
    graph = b.build()
    assert _innermost_trips(graph) == [SHAPE[1] * SHAPE[2] * SHAPE[3]]  # the outer loop keeps the team
    _matches_reference(graph)


def test_a_uniform_stride_collapses_and_reads_the_same_elements():
    b = GraphBuilder("every_other")
    x = b.input("x", (4, 5, 14), "float32")
    b.output(b.exp(b.slice(x, starts=[0], ends=[14], axes=[2], steps=[2])))
    graph = b.build()
    assert _innermost_trips(graph) == [5 * 7]
    _matches_reference(graph)


def test_an_operand_broadcast_along_rows_keeps_its_loops():
    b = GraphBuilder("per_column")
    x = b.input("x", SHAPE, "float32")
    b.output(b.mul(x, b.input("w", (1, 1, 1, SHAPE[3]), "float32")))
    graph = b.build()
    assert _innermost_trips(graph) == [SHAPE[3]]
    _matches_reference(graph)


def test_a_transposed_read_keeps_its_loops():
    b = GraphBuilder("swapped")
    x = b.input("x", SHAPE, "float32")
    b.output(b.exp(b.transpose(x, perm=[0, 1, 3, 2])))
    graph = b.build()
    assert SHAPE[2] * SHAPE[3] not in _innermost_trips(graph)
    _matches_reference(graph)


def test_a_padded_read_keeps_its_loops():
    b = GraphBuilder("padded")
    x = b.input("x", SHAPE, "float32")
    b.output(b.exp(b.pad(x, pads=[0, 0, 1, 2, 0, 0, 1, 0])))
    graph = b.build()
    assert max(_innermost_trips(graph)) < (SHAPE[2] + 2) * (SHAPE[3] + 2)
    _matches_reference(graph)


def test_a_row_reduction_under_a_parallel_loop_is_not_merged_with_it():
    b = GraphBuilder("row_sums")
    x = b.input("x", SHAPE, "float32")
    b.output(b.reduce_sum(x, axes=[3], keepdims=0))
    graph = b.build()
    assert _innermost_trips(graph) == [SHAPE[3]]
    _matches_reference(graph)
