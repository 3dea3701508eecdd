"""FusionPlan invariants: every node in exactly one group, an acyclic quotient, groups in
topological order, boundaries that match the graph."""

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import fusionlang
from fusionlang.engine.plan import (FusionPlan, PlanStats, boundary, group_boundaries, make_group, per_node_plan,
                                    single_group_plan)
from fusionlang.errors import PlanError
from fusionlang.ops import GraphBuilder
from fusionlang.testing.graphgen import graphs


def diamond():
    b = GraphBuilder("diamond")
    x = b.input("x", (4, 8))
    a = b.relu(x, name="a")
    c = b.exp(a, name="c")
    d = b.add(a, c, name="d")
    b.output(d)
    return b.build()


def test_per_node_and_single_group_plans_validate():
    g = diamond()
    for plan in (per_node_plan(g), single_group_plan(g)):
        plan.validate()
    assert len(per_node_plan(g).kernels) == 3
    assert single_group_plan(g).groups[0].inputs == ["x"]
    assert single_group_plan(g).groups[0].outputs == ["d"]


def test_node_in_two_groups_is_rejected():
    g = diamond()
    plan = FusionPlan(g, [make_group(g, 0, ["a", "c"]), make_group(g, 1, ["c", "d"])])
    with pytest.raises(PlanError, match=r"node 'c' is in groups 0 and 1"):
        plan.validate()


def test_missing_node_is_rejected():
    g = diamond()
    plan = FusionPlan(g, [make_group(g, 0, ["a", "c"])])
    with pytest.raises(PlanError, match=r"node 'd' is in no group"):
        plan.validate()


def test_non_convex_grouping_is_a_cycle():
    # {a, d} leaves through c and comes back: the quotient has a -> c -> a
    g = diamond()
    plan = FusionPlan(g, [make_group(g, 0, ["a", "d"]), make_group(g, 1, ["c"])])
    with pytest.raises(PlanError, match=r"groups form a cycle"):
        plan.validate()


def test_groups_out_of_topological_order_are_rejected():
    g = diamond()
    plan = FusionPlan(g, [make_group(g, 0, ["c"]), make_group(g, 1, ["a"]), make_group(g, 2, ["d"])])
    with pytest.raises(PlanError, match=r"group 0 is listed before group 1, which feeds it"):
        plan.validate()


def test_stale_boundary_is_rejected():
    g = diamond()
    group = make_group(g, 0, ["a", "c", "d"])
    group.outputs = ["c"]
    with pytest.raises(PlanError, match=r"group 0: recorded inputs/outputs do not match"):
        FusionPlan(g, [group]).validate()


def test_json_round_trips_and_names_ops():
    g = diamond()
    plan = single_group_plan(g)
    plan.stats = PlanStats(kernels_before=3, bytes_before=10, bytes_after=5, rewrite_seconds=0.1, partition_seconds=0.05)
    data = json.loads(plan.to_json())
    assert data["kernels_after"] == 1
    assert data["groups"][0]["ops"] == ["relu", "exp", "add"]
    assert data["kernels_before"] == 3
    assert "2.00x less" in plan.summary()
    # fields never recorded stay out of the JSON
    assert "feedback" not in data and "ops_before" not in data


def test_fused_plan_stats_round_trip_through_json_with_their_keys():
    b = GraphBuilder("s")
    x = b.input("x", (4, 8))
    b.output(b.exp(b.relu(x)))
    plan = fusionlang.fuse(b.build(), "apollo")
    data = json.loads(plan.to_json())
    keys = {"kernels_before", "bytes_before", "estimated_seconds_before", "ops_before", "rewrites", "rewrite_order",
            "rewrite_stop", "rewrite_seconds", "partition_seconds", "kernels_after", "bytes_after", "flops",
            "estimated_seconds_after", "device", "feedback"}
    assert keys <= set(data) and set(plan.stats.to_dict()) == keys
    assert PlanStats.from_dict(data) == plan.stats


def test_stats_are_frozen_and_take_only_their_fields():
    stats = PlanStats(kernels_before=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.kernels_before = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        PlanStats(kernel_before=1)  # type: ignore[call-arg]
    with pytest.raises(AttributeError):
        stats.__dict__  # slotted: no stray attribute can be added


def test_views_do_not_count_as_launches():
    b = GraphBuilder("v")
    x = b.input("x", (2, 6))
    y = b.reshape(b.relu(x), shape=(3, 4))
    b.output(y)
    g = b.build()
    plan = per_node_plan(g, kind_of=lambda n: "view" if n.op == "reshape" else "kernel")
    assert plan.launches == 1
    plan.horizontal = []
    assert len(plan.kernels) == 1


@given(graphs(max_nodes=10), st.data())
def test_one_groups_boundary_is_its_part_of_the_partition_boundaries(graph, data):
    # boundary() walks only the members; group_boundaries() the whole graph, every group
    names = [n.name for n in graph.nodes]
    members = set(data.draw(st.lists(st.sampled_from(names), min_size=1, unique=True)))
    owner = {name: 0 if name in members else 1 for name in names}
    assert boundary(graph, members) == group_boundaries(graph, owner)[0]
