"""Rewrite order as data: priorities are phases, and the trace shows the order rules fired in."""

from __future__ import annotations

import numpy as np

from fusionlang.engine.rewrite import apply_rules
from fusionlang.lang import load_rules, parse_text
from fusionlang.ops import GraphBuilder
from fusionlang.ops.interpreter import run

# T5's norm has an all-ones weight; the standard cleanup `mul_one` (simplify.fuse, priority 0)
# takes it away at the inner node before a recognizer rooted at the projection sees it
RECOGNIZER = """
import "simplify.fuse"
rewrite fold_norm_weight_into_projection priority {priority}:
    matmul(mul(x, g), w)
    where const(g, w) and rank(g) == 1 and rank(w) == 2
    => matmul(x, reshape(g) {{shape=[-1, 1]}} * w)
"""


def t5_like_graph():
    b = GraphBuilder("t5_norm")
    x = b.input("x", (4, 8))
    g = b.constant(np.ones(8, np.float32), name="g")
    w = b.constant(np.random.default_rng(0).standard_normal((8, 3)).astype(np.float32), name="w")
    b.output(b.matmul(b.mul(x, g, name="scaled"), w, name="proj"))
    return b.build()


def test_a_higher_priority_recognizer_fires_before_a_cleanup_at_an_inner_node(tmp_path):
    rules = parse_text(RECOGNIZER.format(priority=10), str(tmp_path / "t5.fuse"))
    graph = t5_like_graph()
    result = apply_rules(graph, rules)
    assert result.fired == {"fold_norm_weight_into_projection": 1}
    assert [(e.rule, e.priority, e.node) for e in result.trace] == [("fold_norm_weight_into_projection", 10, "proj")]
    assert "priority 10" in str(result.trace[0])
    feeds = {"x": np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)}
    np.testing.assert_allclose(run(result.graph, feeds)["proj"], run(graph, feeds)["proj"], rtol=1e-5)


def test_at_equal_priority_the_inner_cleanup_still_fires_first(tmp_path):
    # the order is data: without the priority the author gets the graph-order behaviour
    rules = parse_text(RECOGNIZER.format(priority=0), str(tmp_path / "t5.fuse"))
    result = apply_rules(t5_like_graph(), rules)
    assert result.fired == {"mul_one": 1}
    assert [(e.rule, e.priority) for e in result.trace] == [("mul_one", 0)]


def test_a_later_phase_that_builds_nodes_leaves_each_node_once():
    # phase 10 (the conv folds) fires nothing; phase 0 builds a gemm: the node list must
    # not hold the new node twice (the index once aliased the graph's list after a quiet pass)
    b = GraphBuilder("bias")
    x = b.input("x", (4, 8))
    w = b.constant(np.ones((8, 5), np.float32), name="w")
    c = b.constant(np.ones(5, np.float32), name="c")
    b.output(b.add(b.matmul(x, w, name="m"), c, name="y"))
    result = apply_rules(b.build(), load_rules("simplify"))
    assert [n.op for n in result.graph.nodes] == ["gemm"]
