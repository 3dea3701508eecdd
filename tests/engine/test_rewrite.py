"""The rewriter: fixpoint, priorities, budget, provenance, trace, folding at rewrite
time, cleanup, and the argument graph left untouched."""

from __future__ import annotations

import numpy as np
import pytest

from fusionlang.engine.rewrite import apply_rules
from fusionlang.errors import RewriteError
from fusionlang.ir import format_graph
from fusionlang.lang import load_rules, parse_text
from fusionlang.ops import GraphBuilder
from fusionlang.ops.interpreter import run


def conv_bn_graph():
    rng = np.random.default_rng(0)
    b = GraphBuilder("cbr")
    x = b.input("x", (1, 3, 6, 6))
    w = b.constant(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), name="w")
    c = b.conv(x, w, pads=[1, 1, 1, 1], name="conv1", provenance=("onnx:Conv_1",))
    params = [b.constant(v.astype(np.float32), name=n) for n, v in
              (("g", rng.uniform(0.5, 1.5, 4)), ("beta", rng.standard_normal(4)), ("mu", rng.standard_normal(4)),
               ("var", rng.uniform(0.5, 2, 4)))]
    y = b.batch_norm(c, *params, epsilon=1e-5, name="bn1", provenance=("onnx:BatchNormalization_2",))
    b.output(b.relu(y, name="out"))
    return b.build()


def test_conv_bn_folding_leaves_new_constant_weights_with_provenance():
    g = conv_bn_graph()
    before = format_graph(g)
    rules = load_rules("simplify")
    where = rules.rewrite("fold_conv_bn_no_bias").where
    assert where.startswith("simplify.fuse:")
    result = apply_rules(g, rules)
    assert format_graph(g) == before  # the argument is not modified
    assert [n.op for n in result.graph.nodes] == ["conv", "relu"]
    conv = result.graph.nodes[0]
    assert all(v in result.graph.constants for v in conv.inputs[1:])
    assert conv.inputs[1] != "w"  # new weights, folded when the rule fired
    assert conv.name == "bn1" and conv.outputs == ["bn1"]  # the replaced node's names survive
    assert conv.provenance == ("onnx:BatchNormalization_2", "onnx:Conv_1", f"rule fold_conv_bn_no_bias ({where})")
    assert result.fired == {"fold_conv_bn_no_bias": 1}
    assert [(e.step, e.pass_name, e.rule, e.where, e.node) for e in result.trace] == [
        (1, "simplify", "fold_conv_bn_no_bias", where, "bn1")]
    feeds = {"x": np.random.default_rng(1).standard_normal((1, 3, 6, 6)).astype(np.float32)}
    np.testing.assert_allclose(run(result.graph, feeds)["out"], run(g, feeds)["out"], rtol=1e-4, atol=1e-5)
    assert result.stop_reason == "fixpoint"


def test_priorities_then_file_order_decide():
    rules = parse_text("""
rewrite low: relu(x) => exp(x)
rewrite high priority 5: relu(x) => neg(x)
rewrite also_high priority 5: relu(x) => abs(x)
""")
    b = GraphBuilder()
    b.output(b.relu(b.input("x", (3,)), name="r"))
    result = apply_rules(b.build(), rules)
    assert [n.op for n in result.graph.nodes] == ["neg"]
    assert [r.name for r in rules.rewrites] == ["high", "also_high", "low"]


def test_worklist_reaches_a_fixpoint_through_chains():
    b = GraphBuilder()
    x = b.input("x", (2, 3, 4))
    t = x
    for perm in ([1, 0, 2], [2, 1, 0], [0, 2, 1], [1, 0, 2], [2, 0, 1]):
        t = b.transpose(t, perm=perm)
    b.output(b.exp(t, name="e"))
    g = b.build()
    result = apply_rules(g, load_rules("simplify"))
    assert [n.op for n in result.graph.nodes].count("transpose") <= 1
    feeds = {"x": np.arange(24, dtype=np.float32).reshape(2, 3, 4)}
    np.testing.assert_array_equal(run(result.graph, feeds)["e"], run(g, feeds)["e"])


def test_budget_stops_a_looping_rule_set_naming_the_rules():
    # opening sigmoid and fusing it back is a loop the static check cannot see: the
    # pattern matches what a decomposition builds
    rules = parse_text("""
import "decompose.fuse"
rewrite fuse_sigmoid: div(1, add(1, exp(neg(x)))) => sigmoid(x)
""")
    b = GraphBuilder()
    b.output(b.sigmoid(b.input("x", (4,)), name="s"))
    with pytest.raises(RewriteError) as info:
        apply_rules(b.build(), rules, budget=50)
    message = str(info.value)
    assert message.startswith("rewriting stopped: the budget of 50 rewrite applications is spent; rules that kept "
                              "firing (last 101 steps): ")
    assert "'decompose sigmoid' x51" in message and "'fuse_sigmoid' x50" in message
    assert info.value.result.stop_reason == "budget" and info.value.result.fired["fuse_sigmoid"] == 50


def test_replacement_with_the_wrong_type_is_an_error_naming_the_rule():
    rules = parse_text("rewrite widen: relu(x) => reduce_sum(x) {axes=[0]}\n", "w.fuse")
    b = GraphBuilder()
    b.output(b.relu(b.input("x", (2, 3)), name="r"))
    with pytest.raises(RewriteError, match=r"w.fuse:1: rewrite 'widen': the replacement of node 'r' \(relu\) "
                                           r"computes f32\[1,3\] for 'r', which is f32\[2,3\]"):
        apply_rules(b.build(), rules)


def test_graph_outputs_keep_their_names():
    rules = load_rules("simplify")
    b = GraphBuilder()
    x = b.input("x", (3,))
    e = b.exp(x, name="e")
    b.output(b.identity(e, name="out"), b.identity(x, name="passthrough"))
    result = apply_rules(b.build(), rules)
    g = result.graph
    assert g.outputs == ["out", "passthrough"]
    assert [(n.op, n.outputs) for n in g.nodes] == [("exp", ["out"]), ("identity", ["passthrough"])]


def test_cleanup_merges_common_subexpressions_and_drops_dead_code():
    b = GraphBuilder()
    x = b.input("x", (3,))
    b.relu(x, name="dead")
    y = b.add(b.exp(x, name="e1"), b.exp(x, name="e2"), name="y")
    b.output(y)
    result = apply_rules(b.build(), parse_text("rewrite nothing: neg(x) => x\n"))
    assert [n.name for n in result.graph.nodes] == ["e1", "y"]
    assert result.graph.nodes[1].inputs == ["e1", "e1"]


def test_decomposition_opens_compound_ops_recursively():
    rules = load_rules("decompose")
    b = GraphBuilder()
    x = b.input("x", (4, 6))
    b.output(b.silu(b.layer_norm(x, np.ones(6, np.float32), axis=-1, epsilon=1e-5, name="ln"), name="s"))
    g = b.build()
    result = apply_rules(g, rules)
    ops = {n.op for n in result.graph.nodes}
    assert not ops & {"layer_norm", "silu", "sigmoid", "reduce_mean"}
    assert result.fired["decompose layer_norm"] == 1 and result.fired["decompose reduce_mean"] == 2
    assert all(any(p.startswith("decompose ") for p in n.provenance) for n in result.graph.nodes)
    feeds = {"x": np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32)}
    np.testing.assert_allclose(run(result.graph, feeds, rules.registry)["s"], run(g, feeds)["s"], rtol=1e-4,
                               atol=1e-5)


def test_passes_can_be_switched_off():
    rules = load_rules("apollo")
    b = GraphBuilder()
    x = b.input("x", (2, 5))
    b.output(b.softmax(b.identity(x), axis=-1, name="sm"))
    g = b.build()
    assert [n.op for n in apply_rules(g, rules, decompose=False).graph.nodes] == ["softmax"]
    assert [n.op for n in apply_rules(g, rules, simplify=False, decompose=False).graph.nodes] == ["identity",
                                                                                                  "softmax"]
    assert "softmax" not in {n.op for n in apply_rules(g, rules).graph.nodes}


def test_rewrite_time_folding_runs_even_without_the_fold_pass():
    g = conv_bn_graph()
    result = apply_rules(g, load_rules("simplify"), fold=False)
    assert [n.op for n in result.graph.nodes] == ["conv", "relu"]


def test_cost_per_firing_does_not_grow_with_the_graph(monkeypatch):
    """Use-def maps are built once per pass, not once per firing."""
    from fusionlang.ir.graph import Graph

    calls = {"producers": 0, "consumers": 0}
    for name in calls:
        original = getattr(Graph, name)

        def counting(self, _original=original, _name=name):
            calls[_name] += 1
            return _original(self)

        monkeypatch.setattr(Graph, name, counting)
    b = GraphBuilder()
    t = b.input("x", (4,))
    for _ in range(300):
        t = b.exp(b.identity(t))
    b.output(t)
    result = apply_rules(b.build(verify=False), load_rules("simplify"))
    assert result.fired["drop_identity"] == 300
    assert calls["producers"] <= 6 and calls["consumers"] <= 6
