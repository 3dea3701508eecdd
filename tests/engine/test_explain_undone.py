"""`explain` shows the decomposition that opened what a rewrite built (undoing it)."""

from __future__ import annotations

from fusionlang.api import fuse
from fusionlang.engine.explain import explain
from fusionlang.lang import load_rules
from fusionlang.ops import GraphBuilder


def test_the_step_that_undid_a_rewrite_is_shown(tmp_path):
    path = tmp_path / "silu.fuse"
    path.write_text('import "apollo.fuse"\nrewrite to_silu: mul(x, sigmoid(x)) => silu(x)\n')
    b = GraphBuilder()
    x = b.input("x", (8,))
    b.output(b.mul(x, b.sigmoid(x), name="m"))
    rules = load_rules(str(path))
    plan = fuse(b.build(), rules)
    opened = rules.decompositions["silu"][0].where
    lines = explain(plan, rules, "m").lines()
    assert f"  rewrites: to_silu ({path}:2); then opened by decompose silu ({opened})" in lines


def test_a_rewrite_that_stays_shows_no_opening(tmp_path):
    path = tmp_path / "silu.fuse"
    path.write_text('import "tvm.fuse"\nrewrite to_silu: mul(x, sigmoid(x)) => silu(x)\n')
    b = GraphBuilder()
    x = b.input("x", (8,))
    b.output(b.mul(x, b.sigmoid(x), name="m"))
    rules = load_rules(str(path))
    plan = fuse(b.build(), rules)
    (node,) = plan.graph.nodes
    assert f"  rewrites: to_silu ({path}:2)" in explain(plan, rules, node.name).lines()
