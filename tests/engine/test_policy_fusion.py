"""Extended policies on small graphs: an importing file's strategy block, replaced and
denied (`nofuse`) entries and guards change the kernels as the policy says."""

from __future__ import annotations

import math

import pytest

import fusionlang
from fusionlang.engine import partition
from fusionlang.errors import FuseError
from fusionlang.ops import GraphBuilder

CHAIN = ["relu", "exp", "neg", "sqrt", "abs"]


def _rules(tmp_path, text: str, name: str = "policy.fuse"):
    path = tmp_path / name
    path.write_text(text)
    return fusionlang.load_rules(str(path))


def chain_graph(ops, shape=(64, 64)):
    b = GraphBuilder("chain")
    v = b.input("x", shape)
    for k, op in enumerate(ops):
        v = b.op(op, v, name=f"n{k}")
    b.output(v)
    return b.build()


def softmax_graph(rows: int):
    b = GraphBuilder("softmax")
    b.output(b.softmax(b.input("x", (rows, 16)), axis=-1))
    return b.build()


def _edges_inside_groups(plan):
    """(producer op, consumer op) of every edge both of whose ends share a group."""
    owner = plan.group_of()
    producer = {out: n for n in plan.graph.nodes for out in n.outputs}
    return [(producer[v].op, n.op) for n in plan.graph.nodes for v in n.present_inputs()
            if v in producer and owner[producer[v].name] == owner[n.name]]


def test_an_importing_strategy_block_caps_the_imported_policy(tmp_path):
    rules = _rules(tmp_path, 'import "apollo.fuse"\nstrategy apollo { max_ops = 2 }\n')
    graph = chain_graph(CHAIN)
    assert partition(graph, fusionlang.load_rules("apollo"), "apollo").launches == 1
    plan = partition(graph, rules, "apollo")
    assert max(len(g.nodes) for g in plan.groups) == 2
    assert plan.launches == math.ceil(len(CHAIN) / 2)


def test_nofuse_denies_the_imported_stitching(tmp_path):
    rules = _rules(tmp_path, 'import "apollo.fuse"\nnofuse reduce -> elemwise|broadcast|reduce\n')
    apollo = fusionlang.fuse(softmax_graph(8), "apollo", feedback=False)
    denied = fusionlang.fuse(softmax_graph(8), rules, feedback=False)
    assert apollo.stitches and not denied.stitches
    assert denied.launches > apollo.launches
    assert not [edge for edge in _edges_inside_groups(denied) if edge[0].startswith("reduce_")]


def test_a_local_entry_replaces_the_imported_one(tmp_path):
    # the fused pair becomes opaque, so nothing joins it afterwards
    rules = _rules(tmp_path, 'import "apollo.fuse"\nfuse elemwise -> elemwise : opaque\n')
    plan = partition(chain_graph(CHAIN[:3]), rules, "apollo")
    assert sorted(len(g.nodes) for g in plan.groups) == [1, 2]
    assert {g.category for g in plan.groups if len(g.nodes) == 2} == {"opaque"}


@pytest.mark.parametrize("strategy", ["apollo", "dp"])
def test_a_guarded_nofuse_applies_only_where_its_guard_holds(tmp_path, strategy):
    rules = _rules(tmp_path, 'import "apollo.fuse"\nnofuse elemwise -> elemwise when size(consumer) > 1024\n')
    small, large = chain_graph(CHAIN, (16, 16)), chain_graph(CHAIN, (64, 64))
    assert partition(small, rules, strategy).launches == 1
    assert partition(large, rules, strategy).launches == len(CHAIN)


def test_a_guarded_entry_sees_the_producer_of_the_edge(tmp_path):
    # stitch only reductions over few rows: the reduction's result is [rows, 1]
    rules = _rules(tmp_path, 'import "apollo.fuse"\n'
                             'nofuse reduce -> elemwise|broadcast|reduce when dim(producer, 0) > 8\n')
    few, many = (fusionlang.fuse(softmax_graph(rows), rules, feedback=False) for rows in (8, 32))
    assert few.stitches and few.launches == fusionlang.fuse(softmax_graph(8), "apollo", feedback=False).launches
    assert not many.stitches and many.launches > few.launches


def test_the_tvm_strategy_refuses_nofuse_and_guards(tmp_path):
    denied = _rules(tmp_path, 'import "tvm.fuse"\nnofuse injective -> elemwise\n', "deny.fuse")
    with pytest.raises(FuseError, match=r"/deny.fuse:2:1: nofuse entries are not supported by the tvm strategy$"):
        partition(chain_graph(CHAIN), denied, "tvm")
    guarded = _rules(tmp_path, 'import "tvm.fuse"\n'
                               'fuse injective -> elemwise : injective [path=injective] when rank(producer) == 2\n',
                     "guard.fuse")
    with pytest.raises(FuseError, match=r"/guard.fuse:2:1: guards on fuse entries are not supported by the tvm "
                                        r"strategy$"):
        partition(chain_graph(CHAIN), guarded, "tvm")


def test_explain_names_the_nofuse_entry_that_denied_a_merge(tmp_path):
    from fusionlang.engine.explain import explain

    rules = _rules(tmp_path, 'import "apollo.fuse"\nnofuse elemwise -> elemwise when size(consumer) > 1024\n')
    plan = partition(chain_graph(CHAIN[:2]), rules, "apollo")
    (refusal,) = explain(plan, rules, "n1").refusals
    assert refusal.reason == f"{tmp_path / 'policy.fuse'}:2:1: nofuse elemwise -> elemwise when size(consumer) > 1024 " \
                             "denies it"


def test_explain_says_which_guard_left_a_pair_without_an_entry(tmp_path):
    from fusionlang.engine.explain import explain

    rules = _rules(tmp_path, 'import "std/ops.fuse"\nfuse elemwise -> elemwise : elemwise when rank(producer) == 3\n')
    plan = partition(chain_graph(CHAIN[:2]), rules, "apollo")
    (refusal,) = explain(plan, rules, "n1").refusals
    assert refusal.reason == (f"no fuse entry for elemwise -> elemwise in rules 'policy' (the guard of "
                              f"{tmp_path / 'policy.fuse'}:2:1: fuse elemwise -> elemwise : elemwise when "
                              f"rank(producer) == 3 does not hold)")


def test_dp_records_the_nofuse_entry_that_cut_a_segment(tmp_path):
    from fusionlang.engine.decisions import Verdict
    from fusionlang.engine.explain import explain

    rules = _rules(tmp_path, 'import "apollo.fuse"\nnofuse elemwise -> elemwise\n')
    plan = partition(chain_graph(CHAIN[:2]), rules, "dp")
    assert plan.launches == 2
    assert [d.verdict for d in plan.decisions] == [Verdict.DENIED]
    (refusal,) = explain(plan, rules, "n1").refusals
    assert refusal.reason == f"{tmp_path / 'policy.fuse'}:2:1: nofuse elemwise -> elemwise denies it"


def test_nofuse_leaves_sibling_entries_alone(tmp_path):
    # two reductions of one input: `nofuse reduce -> reduce` is about a reduction feeding
    # another, not about two readers of one value
    rules = _rules(tmp_path, 'import "std/ops.fuse"\nfuse sibling reduce, reduce : reduce\nnofuse reduce -> reduce\n')
    assert rules.fuse_result("reduce", "reduce", flag="sibling") is not None
    b = GraphBuilder("siblings")
    x = b.input("x", (16, 32))
    b.output(b.reduce_sum(x, axes=[1], name="r0"))
    b.output(b.reduce_max(x, axes=[1], name="r1"))
    plan = partition(b.build(), rules, "apollo")
    assert [sorted(g.nodes) for g in plan.groups] == [["r0", "r1"]]
