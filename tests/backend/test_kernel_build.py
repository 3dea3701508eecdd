"""Runtimes build from a KernelBuild and return what they built (kernels, source, a run),
without a CompiledGraph to fill in."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import random_feeds

from fusionlang import reference
from fusionlang.backend.kernel_build import KernelBuild
from fusionlang.backend.memory import plan_buffers
from fusionlang.backend.runtime import RUNTIMES, lower_plan
from fusionlang.engine.plan import per_node_plan
from fusionlang.ops import GraphBuilder


def _graph():
    b = GraphBuilder("small")
    x = b.input("x", (4, 8))
    y = b.relu(b.add(b.exp(x), np.float32(1.0)))
    b.output(b.reduce_sum(y, axes=(1,)))
    return b.build()


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_runtime_returns_its_kernels_and_runs_without_an_owner(target):
    graph = _graph()
    plan = per_node_plan(graph)
    lowered, constants, aliases = lower_plan(plan, "c" if target == "c" else "cuda")
    build = KernelBuild(plan, lowered, {}, constants, plan_buffers(plan, constants, aliases))
    runtime = RUNTIMES[target](build)
    assert sorted(k.group for k in runtime.kernels) == sorted(lowered)
    assert all(k.name in runtime.source for k in runtime.kernels)
    feeds = random_feeds(graph)
    got = runtime.run({k: np.ascontiguousarray(v) for k, v in feeds.items()})
    want = reference.run(graph, feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5)
