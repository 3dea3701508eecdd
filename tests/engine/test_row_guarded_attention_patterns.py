"""The row-guarded attention patterns of apollo_patterns.fuse (torch's SDPA decomposition in
core ATen: a row of scores that are all -inf gives 0s, not NaN): the forms they take, the
forms they leave to the aggregation table, and the forms the pattern takes but the
attention kernel refuses (the feedback then drops the group)."""

from __future__ import annotations

import numpy as np
import pytest

import fusionlang
from fusionlang.backend.attention_template import plan_attention
from fusionlang.ops import GraphBuilder

ENTRIES = ("row_guarded_attention_block", "row_guarded_masked_attention_block")


def guarded_attention(*, mask=False, minus_inf=-np.inf, above=0.0, reduce="reduce_max", axis=-1, tested="scores",
                      swapped=False):
    """softmax(Q K^T [+ mask]) V with torch's row guard before the product; the keywords
    change one part of the guard: the number compared with, the threshold, the reduction
    and its axis, the tensor tested (the mask instead of the scores), the branches."""
    b = GraphBuilder("row_guarded")
    x = scores = b.op("matmul", b.input("q", (2, 3, 6, 4)), b.input("kt", (2, 3, 4, 6)))
    if mask:
        x = b.op("add", scores, b.input("mask", (6, 6)))
    test = x if tested == "scores" else b.input("other", (2, 3, 6, 6))
    live = b.op("not", b.op("equal", test, b.constant(np.array(minus_inf, np.float32))))
    top = b.op(reduce, b.op("cast", live, to="float32"), axes=[axis], keepdims=1)
    cond = b.op("not", b.op("greater", top, b.constant(np.array(above, np.float32))))
    zeros, p = b.constant(np.zeros((2, 3, 6, 6), np.float32)), b.op("softmax", x, axis=-1)
    guarded = b.op("where", cond, p, zeros) if swapped else b.op("where", cond, zeros, p)
    b.output(b.op("matmul", guarded, b.input("v", (2, 3, 6, 5))))
    return b.build()


def formed_by(graph):
    """The row-guarded entries that formed a group, and whether the kernel takes it."""
    plan = fusionlang.fuse(graph, "apollo_patterns", feedback=False)
    out = []
    for group in plan.groups:
        entries = [e for e in ENTRIES if any(rule.endswith(f"fuse pattern {e}") for rule in group.rules)]
        if entries:
            out.append((entries[0], plan_attention(plan.graph, group.nodes) is not None))
    return out


@pytest.mark.parametrize("mask, entry", [(False, ENTRIES[0]), (True, ENTRIES[1])])
def test_the_guard_of_core_aten_matches_and_runs_as_the_attention_kernel(mask, entry):
    assert formed_by(guarded_attention(mask=mask)) == [(entry, True)]
    compiled = fusionlang.compile(fusionlang.fuse(guarded_attention(mask=mask), "apollo_patterns"))
    assert [k.strategy for k in compiled.kernels] == ["attention template"]


@pytest.mark.parametrize("change", [dict(reduce="reduce_sum"), dict(above=0.5), dict(swapped=True)])
def test_another_reduction_threshold_or_branch_order_is_no_match(change):
    assert formed_by(guarded_attention(**change)) == []


@pytest.mark.parametrize("change", [dict(minus_inf=-1e9), dict(axis=2), dict(tested="other")])
def test_a_guard_that_tests_something_else_matches_but_the_kernel_refuses_it(change):
    graph = guarded_attention(**change)
    assert formed_by(graph) == [(ENTRIES[0], False)]
    # with the feedback the group is dropped, and its ops run as the table fuses them
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo_patterns"))
    assert "attention template" not in [k.strategy for k in compiled.kernels]
