"""A gathered conv of few taps (a stem: 3 channels, K up to ROWS_OUTSIDE_MAX_K) walks its
tiles row block by row block (:func:`fusionlang.backend.gemm_template.rows_outside`):
odd planes, strides 1 to 3, padding, dilation, groups, 1 or 2 images and random epilogues
against the reference interpreter on 1 and 2 threads, and the plan taking that loop order."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusionlang
from fusionlang.backend import gemm_template, template
from fusionlang.ops import GraphBuilder

from helpers import check_one_and_two_threads
from test_conv_subsample import _small_problems_use_the_template  # noqa: F401 (autouse: tiny GEMMs on the template)
from test_template import _epilogue


def _loop_orders(graph) -> list[bool]:
    """Per template group of the graph's plan: whether its tile loops put row blocks outside."""
    plan = fusionlang.fuse(graph, "apollo")
    orders = []
    for group in plan.groups:
        tg = template.plan_template(plan, group, dict(plan.graph.constants))
        if tg is not None:
            text = gemm_template.print_gemm(gemm_template.gemm_function(
                "k", tg.problem, tg.blocking, packed_a=tg.packed_a, packed_b=tg.packed_b))
            orders.append(text.find("for (long ir = 0") < text.find("for (long jr = 0"))
    return orders


@st.composite
def few_tap_conv(draw):
    """A conv of 1 to 4 input channels per group (K up to 4 * 5 * 5), odd and even planes, strides
    1 to 3, padding, dilation, bias and a random epilogue. (graph, feeds)."""
    kernel = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilations = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = [draw(st.integers(0, 2)) for _ in range(4)]
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    spatial = (draw(st.integers(max(1, extent[0] - pads[0] - pads[2]), 23)),
               draw(st.integers(max(1, extent[1] - pads[1] - pads[3]), 23)))
    group = draw(st.integers(1, 2))
    cin, oc = group * draw(st.integers(1, 4)), group * draw(st.integers(1, 20))
    batch = draw(st.integers(1, 2))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    b = GraphBuilder("few_taps")
    x = b.input("x", (batch, cin) + spatial)
    feeds = {"x": rng.standard_normal((batch, cin) + spatial).astype(np.float32)}
    w = b.constant(rng.standard_normal((oc, cin // group) + kernel).astype(np.float32))
    args = [x, w] + ([b.constant(rng.standard_normal(oc).astype(np.float32))] if draw(st.booleans()) else [])
    y = b.conv(*args, strides=list(strides), pads=pads, dilations=list(dilations), group=group)
    out = [(n + pads[i] + pads[i + 2] - e) // s + 1 for i, (n, e, s) in enumerate(zip(spatial, extent, strides))]
    b.output(_epilogue(draw, b, y, (batch, oc, *out), feeds, rng, 1))
    return b.build(), feeds


@settings(max_examples=25, deadline=None)
@given(case=few_tap_conv())
def test_few_tap_convs_match_the_reference_on_one_and_two_threads(case):
    graph, feeds = case
    check_one_and_two_threads(graph, feeds)


def _stem(size: int = 33, stride: int = 2, kernel: int = 3):
    """MobileNetV2's stem, smaller: 3 -> 32 channels, 3x3 stride 2, padding 1, bias and relu."""
    rng = np.random.default_rng(size)
    b = GraphBuilder("stem")
    x = b.input("x", (1, 3, size, size))
    w = b.constant(rng.standard_normal((32, 3, kernel, kernel)).astype(np.float32))
    bias = b.constant(rng.standard_normal(32).astype(np.float32))
    b.output(b.relu(b.conv(x, w, bias, strides=[stride, stride], pads=[kernel // 2] * 4)))
    return b.build(), {"x": rng.standard_normal((1, 3, size, size)).astype(np.float32)}


@pytest.mark.parametrize("kernel", [3, 7])
def test_a_stem_walks_row_blocks_outside_and_matches_the_reference(kernel):
    graph, feeds = _stem(kernel=kernel)
    assert _loop_orders(graph) == [True]
    check_one_and_two_threads(graph, feeds)


def test_a_conv_of_many_taps_keeps_columns_outside(monkeypatch):
    monkeypatch.setattr(gemm_template, "ROWS_OUTSIDE_MAX_K", 26)
    graph, _ = _stem()
    assert _loop_orders(graph) == [False]
