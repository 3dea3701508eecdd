"""Apollo's partition of a squeeze-excite block: the mean's scaling joins the mean's kernel
instead of the conv's epilogue, so the conv writes its output once (apollo.fuse's
`reduced_only` entry)."""

from __future__ import annotations

import numpy as np
import pytest

import fusionlang
from fusionlang.ops import GraphBuilder
from fusionlang.testing.equivalence import check_equivalence


def squeeze_excite(group: int) -> fusionlang.Graph:
    """conv (dense, or depthwise for group == channels) -> silu -> mean over the plane ->
    sigmoid gate multiplying the conv's output."""
    channels = 8
    rng = np.random.default_rng(0)
    b = GraphBuilder("se")
    x = b.input("x", (1, channels, 10, 10))
    w = b.constant(rng.standard_normal((channels, channels // group, 3, 3)).astype(np.float32))
    a = b.op("silu", b.op("conv", x, w, group=group, pads=[1, 1, 1, 1]))
    m = b.op("reduce_mean", a, axes=[2, 3], keepdims=1)
    b.output(b.op("mul", a, b.op("sigmoid", m)))
    return b.build()


def _plane_sized_outputs(plan, group) -> list[str]:
    return [v for v in group.outputs if plan.graph.types[v].size == 8 * 10 * 10]


@pytest.mark.parametrize("group", [1, 8])
def test_the_conv_kernel_writes_its_output_once(group):
    plan = fusionlang.fuse(squeeze_excite(group), "apollo", feedback=False)
    conv_group = next(g for g in plan.groups if any(plan.graph.node(n).op == "conv" for n in g.nodes))
    assert len(_plane_sized_outputs(plan, conv_group)) == 1
    assert "reduce_mean" not in {n.op for n in plan.graph.nodes}  # opened into the scaled sum


@pytest.mark.parametrize("group", [1, 8])
def test_the_squeeze_excite_block_matches_the_reference(group):
    result = check_equivalence(squeeze_excite(group))
    assert result.ok, (result.stage, result.error)
