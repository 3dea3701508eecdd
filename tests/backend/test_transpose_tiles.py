"""A loop pair reading across rows is cut into strips run outermost (backend.transpose_tiles),
and only such a pair: each case compiled for C matches the reference interpreter."""

from __future__ import annotations

import numpy as np
from helpers import random_feeds
from hypothesis import given, settings
from hypothesis import strategies as st

import fusionlang
from fusionlang import reference
from fusionlang.backend.collapse import collapse_rows
from fusionlang.backend.loopir import For, walk
from fusionlang.backend.runtime import lower_group
from fusionlang.backend.transpose_tiles import tile_transposes
from fusionlang.engine.plan import single_group_plan
from fusionlang.ops import GraphBuilder


def _strip_loops(graph) -> list[For]:
    """The strip loops of the graph's single fused group, as the C target prints it."""
    plan = single_group_plan(graph)
    group, = plan.groups
    lowered = tile_transposes(collapse_rows(lower_group(plan, group, "c")))
    return [n for n in walk(lowered.body) if isinstance(n, For) and n.var.name.endswith("_strip")]


def _matches_reference(graph) -> None:
    feeds = random_feeds(graph)
    got = fusionlang.compile(single_group_plan(graph), "c").run(feeds)
    want = reference.run(graph, feeds)
    for name in graph.outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5)


def _scaled_transpose(shape, perm, scale: float = 0.35):
    b = GraphBuilder("scaled_transpose")
    x = b.input("x", shape, "float32")
    b.output(b.mul(b.transpose(x, perm=perm), b.constant(np.asarray(scale, np.float32))))
    return b.build()


def test_attentions_scaled_k_transpose_runs_in_strips_of_a_cache_line():
    # ViT's K^T: per head, 64 rows of 197 tokens read 1152 floats apart (here 3 heads, 37
    # tokens, rows 40 floats apart: a strip of 16 and a last one of 5)
    graph = _scaled_transpose((3, 37, 40), [0, 2, 1])
    strips, = _strip_loops(graph)
    assert strips.step == 16
    _matches_reference(graph)


def test_a_row_walked_in_order_keeps_its_loops():
    b = GraphBuilder("rows")
    x = b.input("x", (3, 37, 40), "float32")
    b.output(b.exp(b.add(x, b.input("y", (3, 37, 40), "float32"))))
    graph = b.build()
    assert not _strip_loops(graph)
    _matches_reference(graph)


def test_a_row_shorter_than_two_strips_keeps_its_loops():
    graph = _scaled_transpose((3, 31, 40), [0, 2, 1])
    assert not _strip_loops(graph)
    _matches_reference(graph)


def test_a_reduction_across_rows_keeps_its_loops():
    b = GraphBuilder("column_sums")
    x = b.input("x", (3, 40, 37), "float32")
    b.output(b.reduce_sum(b.transpose(x, perm=[0, 2, 1]), axes=[2], keepdims=0))
    graph = b.build()
    assert not _strip_loops(graph)
    _matches_reference(graph)


@settings(max_examples=12, deadline=None)
@given(shape=st.tuples(st.integers(1, 3), st.integers(1, 70), st.integers(1, 40), st.integers(1, 24)),
       perm=st.permutations(range(4)), scale=st.floats(-2, 2, width=32))
def test_any_scaled_transpose_computes_what_the_reference_does(shape, perm, scale):
    # strips or not, every permutation of every shape: the same elements, the same values
    _matches_reference(_scaled_transpose(shape, list(perm), scale))
