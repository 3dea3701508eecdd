"""Compound ops a policy keeps whole are opened inside their groups before code generation."""

import numpy as np
import pytest

import fusionlang
from fusionlang.engine.lowering import lower_compound_groups
from fusionlang.engine.partition import partition
from fusionlang.ops import GraphBuilder
from fusionlang.ops.registry import REGISTRY


def attention_scores():
    b = GraphBuilder("scores")
    q, k = b.input("q", (8, 16)), b.input("k", (16, 8))
    b.output(b.relu(b.softmax(b.matmul(q, k), axis=-1)), b.log_softmax(q, axis=0))
    return b.build()


def compound(plan):
    return [n.op for n in plan.graph.nodes if REGISTRY.get(n.op).compound]


def test_tvm_plan_keeps_its_groups_and_opens_softmax_inside_them():
    graph = attention_scores()
    rules = fusionlang.load_rules("tvm")
    whole = partition(graph, rules, "tvm")
    assert sorted(compound(whole)) == ["log_softmax", "softmax"]
    lowered = lower_compound_groups(whole, rules)
    assert compound(lowered) == []
    assert len(lowered.groups) == len(whole.groups) and lowered.launches == whole.launches
    assert lowered.graph.outputs == whole.graph.outputs
    softmax_group = whole.group_of()[next(n.name for n in whole.graph.nodes if n.op == "softmax")]
    opened = lowered.groups[softmax_group].nodes
    assert {"reduce_max", "exp", "reduce_sum"} <= {lowered.graph.node(n).op for n in opened}


def test_fuse_returns_primitive_plans_that_compute_the_same():
    graph = attention_scores()
    plan = fusionlang.fuse(graph, "tvm", "tvm")
    assert compound(plan) == []
    feeds = {"q": np.random.default_rng(0).standard_normal((8, 16), np.float32),
             "k": np.random.default_rng(1).standard_normal((16, 8), np.float32)}
    got = fusionlang.compile(plan, target="c").run(feeds)
    want = fusionlang.reference.run(graph, feeds)
    for name in graph.outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5)


def test_a_plan_without_compound_ops_is_returned_as_is():
    plan = fusionlang.fuse(attention_scores(), "apollo")
    assert lower_compound_groups(plan) is plan


def test_a_compound_op_no_rule_opens_is_a_clear_error():
    from fusionlang.engine.lowering import open_compound_ops
    from fusionlang.errors import FuseError

    graph = attention_scores()
    no_cases = fusionlang.load_rules("std/ops")
    assert not no_cases.decompositions.get("softmax")
    softmax = next(n.name for n in graph.nodes if n.op == "softmax")
    with pytest.raises(FuseError, match=rf"node '{softmax}' \(softmax\) is a compound op and no decomposition in "
                                        r"\S+ opens it"):
        open_compound_ops(graph, [softmax], [no_cases])


def test_fuse_opens_each_compound_op_once_for_feedback_and_lowering(monkeypatch):
    import fusionlang.backend.feedback as feedback
    import fusionlang.engine.lowering as lowering

    opened = []
    real = lowering.open_node
    monkeypatch.setattr(lowering, "open_node", lambda index, ruleset, node, case, recorder:
                        opened.append(node.name) or real(index, ruleset, node, case, recorder))
    feedback.forget_verdicts()
    graph = attention_scores()
    plan = fusionlang.fuse(graph, "tvm", "tvm")  # tvm keeps softmax whole; the feedback check asks about it
    assert compound(plan) == []
    originals = {n.name for n in graph.nodes if REGISTRY.get(n.op).compound}
    assert originals <= set(opened)
    assert len(opened) == len(set(opened))
