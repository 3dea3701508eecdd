"""Buffer planning: lifetimes, sharing, aliases."""

from __future__ import annotations

import numpy as np

from fusionlang.backend.memory import plan_buffers
from fusionlang.engine.plan import per_node_plan, single_group_plan
from fusionlang.ops import GraphBuilder


def test_a_chain_ping_pongs_between_two_buffers():
    b = GraphBuilder("chain")
    v = b.input("x", (256,))
    for _ in range(6):
        v = b.relu(v)
    b.output(v)
    graph = b.build()
    plan = plan_buffers(per_node_plan(graph), {}, {})
    arena = [x for x in plan.buffers.values() if x.kind == "arena"]
    assert len(arena) == 6
    assert plan.arena_bytes == 2 * 1024  # each step reads one buffer and writes the other
    assert plan.unshared_bytes == 6 * 1024 and plan.sharing == 6


def test_a_value_read_late_keeps_its_storage():
    b = GraphBuilder("skip")
    x = b.input("x", (64,))
    a = b.relu(x, name="a")
    c = b.tanh(b.exp(b.neg(a)))
    b.output(b.add(a, c))
    graph = b.build()
    plan = plan_buffers(per_node_plan(graph), {}, {})
    keep = plan.buffers["a"]
    assert keep.last == len(graph.nodes) - 1
    for other in plan.buffers.values():
        if other.kind == "arena" and other.value != "a":
            assert other.offset + other.nbytes <= keep.offset or keep.offset + keep.nbytes <= other.offset


def test_aliases_extend_their_roots_lifetime_and_take_no_space():
    b = GraphBuilder("alias")
    x = b.input("x", (8, 8))
    y = b.relu(x, name="y")
    r = b.reshape(y, shape=[64], name="r")
    z = b.exp(b.neg(x))
    b.output(b.add(r, b.reshape(z, shape=[64])))
    graph = b.build()
    plan = plan_buffers(per_node_plan(graph), {}, {"r": "y"})
    assert plan.buffers["r"].kind == "alias" and plan.root("r") == "y"
    assert plan.buffers["y"].last >= 5  # read (through r) by the final add


def test_graph_outputs_live_to_the_end_and_constants_are_not_in_the_arena():
    b = GraphBuilder("outs")
    x = b.input("x", (16,))
    c = b.constant(np.ones(16, np.float32))
    y = b.add(x, c, name="y")
    b.output(y, b.relu(b.exp(y)))
    graph = b.build()
    plan = plan_buffers(per_node_plan(graph), dict(graph.constants), {})
    assert plan.buffers["y"].last == len(graph.nodes)
    assert plan.buffers[c].kind == "const" and plan.buffers["x"].kind == "input"


def test_a_view_groups_inner_view_is_skipped_by_its_alias():
    # known defect view_chain_alias: the inner view is no group's output, so it has no buffer
    b = GraphBuilder("view_chain")
    x = b.input("x", (1, 1))
    t = b.transpose(x, perm=[1, 0], name="t")
    b.output(b.flatten(t, axis=2, name="f"))
    graph = b.build()
    plan = plan_buffers(single_group_plan(graph), {}, {"t": "x", "f": "t"})
    assert "t" not in plan.buffers and plan.buffers["f"].root == "x" and plan.root("f") == "x"
