"""The dependences a program's schedules are checked against, without isl's flow analysis:
on data arrays exactly isl's flow dependences; through accumulators the write-then-read
pairs, which lie between isl's flow dependences and their transitive closure, so every
legality question has the same answer (and the same candidates are legal)."""

from __future__ import annotations

import islpy as isl
import pytest
from hypothesis import given, settings
from helpers import operand_sizes
from strategies import graphs

from fusionlang.backend.fusion import candidate_trees
from fusionlang.backend.poly import _union_map, _written_once, access_map_text, build_program, original_order
from fusionlang.backend.schedule import is_legal, to_isl
from fusionlang.ops import GraphBuilder


def isl_flow(prog, kind: str) -> isl.UnionMap:
    """What compute_dependences computed before: isl's must flow, in the original order."""
    accumulator = kind == "acc"
    reads = [access_map_text(s, a) for s in prog.stmts for a in s.reads
             if a.array.role != "input" and (a.array.role == "acc") == accumulator]
    writes = [access_map_text(s, s.write) for s in prog.stmts if (s.write.array.role == "acc") == accumulator]

    sink = _union_map(prog, reads).intersect_domain(prog.domain)
    source = _union_map(prog, writes).intersect_domain(prog.domain)
    flow = isl.UnionAccessInfo.from_sink(sink).set_must_source(source).set_schedule_map(original_order(prog))
    return flow.compute_flow().get_must_dependence()


def assert_same_questions(prog):
    assert prog.deps_data.is_equal(isl_flow(prog, "data"))
    flow = isl_flow(prog, "acc")
    closure, exact = flow.transitive_closure()
    assert flow.is_subset(prog.deps_acc)
    if exact:
        assert prog.deps_acc.is_subset(closure)
    for tree in candidate_trees(prog):
        schedule = to_isl(prog, tree)
        legal = is_legal(prog, schedule)
        prog.__dict__["_flow"], mine = {"data": prog.deps_data, "acc": flow, "acc_carried": None}, prog.__dict__["_flow"]
        try:
            assert is_legal(prog, schedule) == legal
        finally:
            prog.__dict__["_flow"] = mine


def program(graph):
    return build_program(graph, [n.name for n in graph.nodes])


def padded_conv_pool_concat():
    b = GraphBuilder("cpc")
    x = b.input("x", (1, 3, 8, 8))
    w = b.input("w", (4, 3, 3, 3))
    c = b.relu(b.conv(x, w, pads=[1, 1, 1, 1]))
    p = b.max_pool(c, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    q = b.average_pool(c, kernel_shape=[2, 2], strides=[2, 2])
    b.output(b.concat(b.reduce_sum(p, axes=[1], keepdims=1), b.reduce_max(q, axes=[1], keepdims=1), axis=1))
    return b.build()


def test_a_padded_conv_pools_and_a_concat_ask_the_same_questions():
    assert_same_questions(program(padded_conv_pool_concat()))


@pytest.mark.parametrize("writes, once", [
    ("{ S0[i] -> A[i] : 0 <= i < 4; S1[i] -> A[i + 4] : 0 <= i < 4 }", True),  # a concat's slices
    ("{ S0[i, j] -> A[i] : 0 <= i < 4 and 0 <= j < 2 }", False),  # two instances write A[i]
    ("{ S0[i] -> A[i] : 0 <= i < 4; S1[i] -> A[i + 3] : 0 <= i < 4 }", False),  # A[3] twice
    ("{ S0[i] -> A[2i] : 0 <= i < 4; S1[i] -> A[2i + 1] : 0 <= i < 4 }", True),  # boxes meet, sets do not
    ("{ S0[i] -> A[i] : 0 <= i; S1[i] -> A[i + 5] : 0 <= i }", False),  # unbounded
    ("{ S0[i] -> A[i] : 0 <= i; S1[i] -> A[-1 - i] : 0 <= i }", True),
    ("{ S0[] -> A[]; S1[] -> A[] }", False),  # one scalar written twice
    ("{ S0[i] -> A[i] : 0 <= i < 4; S1[i] -> A[i] : 0 <= i < 0; S2[i] -> A[i + 4] : 0 <= i < 4 }", True),
    ("{ S0[i, j] -> A[i, j] : 0 <= j <= i < 4; S1[i, j] -> A[j, i] : 0 <= j < i < 4 }", True),  # two triangles
    ("{ S0[i, j] -> A[i, j] : 0 <= j <= i < 4; S1[i, j] -> A[j, i] : 0 <= j <= i < 4 }", False),  # the diagonal
])
def test_an_array_written_twice_is_left_to_isl(writes, once):
    assert _written_once(isl.UnionMap(writes)) is once


@settings(max_examples=40, deadline=None)
@given(graphs(max_ops=6))
def test_random_programs_ask_the_same_questions(case):
    graph, _ = case
    assert_same_questions(program(graph))


def test_the_slices_of_a_long_concat_are_not_each_tested_against_all_before_them(monkeypatch):
    """Each slice was intersected with the union of the slices before it, so a concat of n
    slices intersected sets of 1, 2, .. n-1 pieces: quadratic (a 5,000-input concat of an
    unrolled loop spent 22 s there). Now only slices whose bounding boxes meet are
    intersected, so the pieces intersected grow with n at most."""
    slices = 1000
    writes = isl.UnionMap("{ " + "; ".join(f"S{k}[i] -> A[{k}, i] : 0 <= i < 4" for k in range(slices)) + " }")
    pieces = operand_sizes(monkeypatch, isl.Set, "intersect", isl.Set.n_basic_set)
    assert _written_once(writes)
    assert sum(pieces) <= 2 * slices
