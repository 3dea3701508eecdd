"""Property tests: compiled C equals the reference interpreter on random small graphs,
unfused (one group per node), fully fused (one group) and cut into random groups."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import chunked_plans, graphs

import fusionlang.backend as backend
from fusionlang import reference
from fusionlang.engine.plan import make_group, per_node_plan, single_group_plan, FusionPlan


def assert_same(got, want):
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5, err_msg=name)


@settings(max_examples=25)
@given(graphs())
def test_per_node_plan_matches_reference(case):
    graph, feeds = case
    assert_same(backend.compile(per_node_plan(graph)).run(feeds), reference.run(graph, feeds))


@settings(max_examples=25)
@given(graphs())
def test_single_group_plan_matches_reference(case):
    graph, feeds = case
    compiled = backend.compile(single_group_plan(graph))
    assert_same(compiled.run(feeds), reference.run(graph, feeds))
    # the feedback the partitioner gets agrees with what compile did
    verdict = backend.check_group(graph, [n.name for n in graph.nodes])
    assert (verdict is None) == (compiled.kernels[0].nests == 1), verdict


@settings(max_examples=20)
@given(st.data())
def test_random_groups_match_reference(data):
    graph, feeds = data.draw(graphs())
    chunks = data.draw(chunked_plans(graph))
    plan = FusionPlan(graph, [make_group(graph, k, c) for k, c in enumerate(chunks)])
    plan.validate()
    assert_same(backend.compile(plan).run(feeds), reference.run(graph, feeds))
