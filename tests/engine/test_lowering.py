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


def assert_computes_the_same(graph, plan):
    feeds = {"q": np.random.default_rng(0).standard_normal((8, 16), np.float32),
             "k": np.random.default_rng(1).standard_normal((16, 8), np.float32)}
    got = fusionlang.compile(plan, target="c").run(feeds)
    want = fusionlang.reference.run(graph, feeds)
    for name in graph.outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5)


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
    assert_computes_the_same(graph, plan)


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
    with pytest.raises(FuseError, match=rf"^node '{softmax}' \(softmax\) is a compound op and no decomposition in "
                                        r"'ops' opens it \(its attributes: axis=-1\); a policy that keeps softmax "
                                        r"whole names the decompositions that lower it: "
                                        r"import \"decompose.fuse\" for lowering$"):
        open_compound_ops(graph, [softmax], [no_cases], no_cases.registry)


def test_fuse_opens_each_compound_op_once_for_feedback_and_lowering(monkeypatch):
    import fusionlang.engine.lowering as lowering

    opened = []
    real = lowering.open_node
    monkeypatch.setattr(lowering, "open_node", lambda index, ruleset, node, case, recorder:
                        opened.append(node.name) or real(index, ruleset, node, case, recorder))
    graph = attention_scores()
    plan = fusionlang.fuse(graph, "tvm", "tvm")  # tvm keeps softmax whole; the feedback check asks about it
    assert compound(plan) == []
    originals = {n.name for n in graph.nodes if REGISTRY.get(n.op).compound}
    assert originals <= set(opened)
    assert len(opened) == len(set(opened))


def test_a_graph_without_compound_ops_is_searched_for_them_once_not_once_per_group(monkeypatch):
    """The feedback check asks about every group; finding that the graph has no compound
    op to open read every node each time: a Loop of 5,000 iterations (20,000 nodes, 236
    groups checked) read 4.7 million nodes, 14 s of its 22 s of partitioning."""
    import fusionlang.engine.lowering as lowering

    searched = []
    real = lowering.compound_nodes
    monkeypatch.setattr(lowering, "compound_nodes", lambda graph, registry:
                        searched.append(graph) or real(graph, registry))
    b = GraphBuilder("chain")
    x = b.input("x", (4,))
    for _ in range(40):
        x = b.relu(b.add(x, x))
    b.output(x)
    graph = b.build()
    plan = fusionlang.fuse(graph, "apollo")  # the backend's feedback asks about every group
    assert plan.groups and len(searched) == 1  # fuse searched once, and handed "none" on


MINIMAL_POLICY = 'import "std/ops.fuse"\n{lowering}fuse elemwise -> elemwise : elemwise\n'


def test_a_policy_that_names_no_lowering_cannot_lower_what_it_keeps_whole(tmp_path):
    from fusionlang.errors import FuseError

    path = tmp_path / "mine.fuse"
    path.write_text(MINIMAL_POLICY.format(lowering=""))
    with pytest.raises(FuseError, match=r"\(softmax\) is a compound op and no decomposition in 'mine' opens it .*"
                                        r"import \"decompose.fuse\" for lowering$"):
        fusionlang.fuse(attention_scores(), fusionlang.load_rules(str(path)))


def test_a_policy_lowers_with_the_rule_sets_it_imports_for_lowering(tmp_path, monkeypatch):
    import fusionlang.engine.lowering as lowering

    path = tmp_path / "mine.fuse"
    path.write_text(MINIMAL_POLICY.format(lowering='import "decompose.fuse" for lowering\n'))
    rules = fusionlang.load_rules(str(path))
    used = []
    real = lowering.open_node
    monkeypatch.setattr(lowering, "open_node", lambda index, ruleset, node, case, recorder:
                        used.append(ruleset) or real(index, ruleset, node, case, recorder))
    graph = attention_scores()
    plan = fusionlang.fuse(graph, rules)
    assert used and all(r is rules.lowering[0] for r in used)
    assert compound(plan) == [] and "softmax" not in rules.decompositions
    assert_computes_the_same(graph, plan)


def test_a_lowering_rule_set_without_a_case_for_the_attributes_says_so(tmp_path):
    from fusionlang.engine.lowering import open_compound_ops
    from fusionlang.errors import FuseError

    (tmp_path / "narrow.fuse").write_text("decompose softmax(x; axis=0) {\n    return x\n}\n")
    graph = attention_scores()
    rules = fusionlang.load_rules(str(tmp_path / "narrow.fuse"))
    softmax = next(n.name for n in graph.nodes if n.op == "softmax")
    with pytest.raises(FuseError, match=r"opens it \(its attributes: axis=-1\): no decompose case for softmax "
                                        r"accepts these attributes$"):
        open_compound_ops(graph, [softmax], [rules], rules.registry)


def test_lowering_takes_the_opening_it_is_given_and_otherwise_opens_afresh():
    from fusionlang.engine.lowering import opened

    rules = fusionlang.load_rules("tvm")
    whole = partition(attention_scores(), rules, "tvm")
    opening = opened(whole.graph, rules)
    given = lower_compound_groups(whole, rules, opening)
    assert given.graph is opening.graph  # taken over, not copied
    first, second = lower_compound_groups(whole, rules), lower_compound_groups(whole, rules)
    assert first.graph is not second.graph
    assert [n.op for n in first.graph.nodes] == [n.op for n in given.graph.nodes] == [n.op for n in second.graph.nodes]
    # each piece names the compound node it came from
    softmax = next(n.name for n in whole.graph.nodes if n.op == "softmax")
    assert set(opening.replaced[softmax]) == {piece for piece, origin in given.opened_from.items() if origin == softmax}
    assert [g.nodes for g in first.groups] == [g.nodes for g in second.groups]
