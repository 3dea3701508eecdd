"""Grouping keeps the quotient acyclic: merges that would create a cycle are refused."""

from fusionlang.engine.grouping import Grouping
from fusionlang.ops import GraphBuilder


def diamond_with_tail():
    b = GraphBuilder("g")
    x = b.input("x", (4,))
    a = b.relu(x, name="a")
    c = b.exp(a, name="c")
    d = b.add(a, c, name="d")
    e = b.neg(d, name="e")
    b.output(e)
    return b.build()


def make(graph):
    return Grouping(graph, {n.name: "elemwise" for n in graph.nodes})


def test_direct_edge_with_a_bypass_is_refused():
    g = diamond_with_tail()
    grouping = make(g)
    ga, gd = grouping.group_of["a"], grouping.group_of["d"]
    # a -> c -> d: merging a and d alone would make c both consumer and producer
    assert not grouping.can_merge(ga, gd)
    assert grouping.can_merge(grouping.group_of["a"], grouping.group_of["c"])


def test_after_merging_the_bypass_the_merge_is_legal():
    g = diamond_with_tail()
    grouping = make(g)
    merged = grouping.merge(grouping.group_of["c"], grouping.group_of["d"], "elemwise")
    assert grouping.can_merge(grouping.group_of["a"], merged)
    grouping.merge(grouping.group_of["a"], merged, "elemwise")
    order = [grp.members for grp in grouping.ordered_groups()]
    assert sorted(order[0]) == ["a", "c", "d"] and order[1] == ["e"]


def test_independent_groups_can_merge_and_keep_edges():
    b = GraphBuilder("two")
    x = b.input("x", (4,))
    p = b.relu(x, name="p")
    q = b.exp(x, name="q")
    r = b.add(p, q, name="r")
    b.output(r)
    g = b.build()
    grouping = make(g)
    gid = grouping.merge(grouping.group_of["p"], grouping.group_of["q"], "elemwise")
    assert grouping.groups[gid].succ == {grouping.group_of["r"]}
    plan, _ = grouping.to_plan("test", lambda members: "kernel")
    plan.validate()
    assert [sorted(grp.nodes) for grp in plan.groups] == [["p", "q"], ["r"]]
