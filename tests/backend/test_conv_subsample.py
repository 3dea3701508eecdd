"""A strided conv whose windows all lie inside its input (ResNet's and RegNet's 1x1
downsampling shortcuts) gathers its B from the input where it lies
(:func:`fusionlang.backend.gemm_template.gathers_in_place`): no padded copy of the planes,
against the reference interpreter on 1 and 2 threads, and the plan copying nothing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusionlang
from fusionlang.backend import gemm_template, template
from fusionlang.ops import GraphBuilder

from helpers import check_one_and_two_threads
from test_template import _epilogue


@pytest.fixture(autouse=True)
def _small_problems_use_the_template(monkeypatch):
    # the tests' shapes are tiny; in production a GEMM this small stays a loop nest
    monkeypatch.setattr(template, "MIN_MACS", 0)
    monkeypatch.setattr(gemm_template, "PARALLEL_MIN_MACS", 0)  # two threads share even these


def _planned(graph):
    plan = fusionlang.fuse(graph, "apollo")
    return [tg for g in plan.groups if (tg := template.plan_template(plan, g, dict(plan.graph.constants)))]


def _pads_planes(graph) -> list[bool]:
    """Per template group of the graph's plan: whether its driver copies its input into padded planes."""
    return [any(h.name == "fl_gemm_pad_planes" for h in gemm_template.gemm_function(
        "k", tg.problem, tg.blocking, packed_a=tg.packed_a, packed_b=tg.packed_b).driver.called)
        for tg in _planned(graph)]


@st.composite
def subsampling_conv(draw):
    """A 1x1 conv of stride 2 or 3 (or, now and then, a 3x3 one without padding), odd and
    even planes, 1 to 3 images (several small planes fold), groups, bias and a random
    epilogue; sometimes an end pad that puts the last window outside the input.
    (graph, feeds, whether every window lies inside the input)."""
    kernel = draw(st.sampled_from([1, 1, 1, 3]))
    strides = (draw(st.integers(2, 3)), draw(st.integers(2, 3)))
    spatial = (draw(st.integers(kernel, 13)), draw(st.integers(kernel, 13)))
    end_pads = (draw(st.integers(0, 1)), draw(st.integers(0, 1))) if draw(st.booleans()) else (0, 0)
    group = draw(st.integers(1, 2))
    cin, oc = group * draw(st.integers(1, 5)), group * draw(st.integers(1, 6))
    batch = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    b = GraphBuilder("subsample")
    x = b.input("x", (batch, cin) + spatial)
    feeds = {"x": rng.standard_normal((batch, cin) + spatial).astype(np.float32)}
    w = b.constant(rng.standard_normal((oc, cin // group, kernel, kernel)).astype(np.float32))
    args = [x, w] + ([b.constant(rng.standard_normal(oc).astype(np.float32))] if draw(st.booleans()) else [])
    y = b.conv(*args, strides=list(strides), pads=[0, 0, *end_pads], group=group)
    out = [(n + p - kernel) // s + 1 for n, p, s in zip(spatial, end_pads, strides)]
    b.output(_epilogue(draw, b, y, (batch, oc, *out), feeds, rng, 1))
    inside = all((o - 1) * s + kernel <= n for o, s, n in zip(out, strides, spatial))
    return b.build(), feeds, inside


@settings(max_examples=12, deadline=None)
@given(case=subsampling_conv())
def test_strided_convs_inside_their_input_gather_in_place_and_match_the_reference(case):
    graph, feeds, inside = case
    if inside:
        assert not any(_pads_planes(graph))
    check_one_and_two_threads(graph, feeds)


def _downsample(channels: int, out_channels: int, size: int, batch: int = 1):
    """A ResNet/RegNet downsampling shortcut: 1x1 conv of stride 2, batch norm folded into
    its bias, no padding."""
    rng = np.random.default_rng(size)
    b = GraphBuilder("shortcut")
    shape = (batch, channels, size, size)
    x = b.input("x", shape)
    w = b.constant(rng.standard_normal((out_channels, channels, 1, 1)).astype(np.float32))
    y = b.conv(x, w, b.constant(rng.standard_normal(out_channels).astype(np.float32)), strides=[2, 2])
    b.output(b.relu(y, name="y"))
    return b.build(), {"x": rng.standard_normal(shape).astype(np.float32)}


@pytest.mark.parametrize("batch", [1, 3])
def test_a_downsampling_shortcut_copies_no_padded_planes(batch):
    # RegNet's 32 -> 48 shortcut on a 15x15 plane (odd: the last input row and column are
    # never read); three images fold into one GEMM
    graph, feeds = _downsample(32, 48, 15, batch)
    (planned,) = _planned(graph)
    assert (planned.problem.fold is not None) == (batch > 1)
    assert _pads_planes(graph) == [False]
    floats = gemm_template.packing_floats(planned.problem, planned.blocking, planned.packed_a, planned.packed_b)
    panels = (0 if planned.packed_a else gemm_template._a_block(planned.blocking)) \
        + gemm_template._b_panel(planned.blocking)
    # each of the 8x8 positions' index (and, folded, its column's offset in C), in whole
    # 64-byte lines: no planes
    assert floats == panels + (64 if batch == 1 else 3 * 2 * 64)
    check_one_and_two_threads(graph, feeds)


def test_a_strided_conv_with_padding_still_pads_its_planes():
    rng = np.random.default_rng(1)
    b = GraphBuilder("padded")
    x = b.input("x", (1, 4, 9, 9))
    y = b.conv(x, b.constant(rng.standard_normal((6, 4, 3, 3)).astype(np.float32)), strides=[2, 2], pads=[1, 1, 1, 1])
    b.output(b.relu(y, name="y"))
    graph = b.build()
    assert _pads_planes(graph) == [True]
    check_one_and_two_threads(graph, {"x": rng.standard_normal((1, 4, 9, 9)).astype(np.float32)})
