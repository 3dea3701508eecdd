"""Round trip: every compound op that decompose.fuse opens, decomposed and fused again
(the apollo policy, which imports decompose.fuse), compiles to one kernel that computes
what the op computes.

Instances are drawn by hypothesis over shapes and attributes (axes, epsilons, the GeLU
form...). As in an inference model, an op's first input is a graph input and its
parameters (scale, bias, running statistics) are constants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from fusionlang.lang import load_rules
from fusionlang.testing import check_equivalence
from fusionlang.testing.instances import Reject, decompose_instance

POLICY = load_rules("apollo")
OPENED = load_rules("decompose")
CASES = [(op, case) for op, cases in POLICY.decompositions.items() for case in cases
         if any(c.where == case.where for c in OPENED.decompositions.get(op, ()))]


def _with_constant_parameters(instance):
    graph = instance.graph
    for leaf in instance.leaves[1:]:
        graph.inputs.remove(leaf.value)
        graph.constants[leaf.value] = np.ascontiguousarray(instance.feeds.pop(leaf.value))
    return graph, instance.feeds


def _nearly_constant_rows(graph, feeds) -> bool:
    """Whether some normalized row of the (only) mean_variance_norm node varies by less
    than float32 rounding of its magnitude: its output is then ill-conditioned, since the
    mean's last-bit rounding (which differs between a scaled and a divided sum) is all that
    is left to normalize."""
    node = graph.nodes[0]
    x = np.asarray(feeds[node.inputs[0]], dtype=np.float64)
    axes = tuple(a % x.ndim for a in node.attrs["axes"])
    spread = np.std(x, axis=axes) if x.size else np.zeros(0)
    scale = np.max(np.abs(x), axis=axes) if x.size else np.zeros(0)
    return bool(np.any(spread <= 1e-5 * scale))


def test_every_case_of_decompose_fuse_is_covered():
    assert {op for op, _ in CASES} == set(OPENED.decompositions)
    assert len(CASES) == sum(len(c) for c in OPENED.decompositions.values())


#: decompositions that stay more than one kernel under apollo, and why
KERNELS = {
    # the target's class is gathered (injective), and apollo fuses no injective op into
    # the elementwise ops after it: the gather and the loss are two kernels
    "nll_loss": 2,
    # two matmuls (complex ops, never merged into one group) and the softmax between them
    "attention": 3,
    # the slices that pick the pairs and the concat (and, interleaved, the reshape) that
    # puts them back are injective: kernels of their own next to the elementwise rotation
    "rotary_embedding": 5,
    # the reshape back from (batch, group, rest) to the channels is injective: the group's
    # statistics and the scale and shift per channel are two kernels
    "group_norm": 2,
}


@pytest.mark.parametrize("op,case", CASES, ids=[f"{op}@{case.where}" for op, case in CASES])
@settings(max_examples=max(5, settings.default.max_examples // 4))
@given(data=st.data())
def test_decomposed_op_fuses_back_into_one_kernel(op, case, data):
    try:
        instance = decompose_instance(data.draw, case, POLICY)
    except Reject:
        reject()  # not an instance of this case: hypothesis draws another
    graph, feeds = _with_constant_parameters(instance)
    if op == "mean_variance_norm" and _nearly_constant_rows(graph, feeds):
        reject()  # (x - mean) / (std + 1e-9) of equal values is rounding noise over itself: +-1 or 0
    verdict = check_equivalence(graph, POLICY, "apollo", feeds=feeds)
    assert verdict.ok, verdict.report()
    assert verdict.kernels <= KERNELS.get(op, 1), verdict.report()
