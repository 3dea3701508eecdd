"""A conv of stride 2 along rows that pads its planes packs B by copying runs of every
second tap (:func:`fusionlang.backend.gemm_template.copies_runs`: two vector loads and a
permute a vector, not a gather): odd and even planes, kernels, dilations, pads on one side,
row strides, groups, folded images and random epilogues, against the reference
interpreter on 1 and 2 threads, and the plan choosing that packer where it applies."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusionlang
from fusionlang.backend import gemm_template, template
from fusionlang.ops import GraphBuilder

from helpers import check_one_and_two_threads
# the autouse fixture: the tests' shapes are small, in production they stay loop nests
from test_conv_subsample import _small_problems_use_the_template  # noqa: F401
from test_template import _epilogue


def _packers(graph) -> list[str]:
    """Per template group of the graph's plan: the helpers its driver calls that pack B."""
    plan = fusionlang.fuse(graph, "apollo")
    planned = [tg for g in plan.groups if (tg := template.plan_template(plan, g, dict(plan.graph.constants)))]
    return [" ".join(h.name for h in gemm_template.gemm_function(
        "k", tg.problem, tg.blocking, packed_a=tg.packed_a, packed_b=tg.packed_b).driver.called
        if "pack_copies" in h.name or "pack_gather" in h.name) for tg in planned]


@st.composite
def row_stride_2_conv(draw):
    """(graph, feeds): output rows of 8 to 24 positions (half an AVX-512 vector and more,
    so runs end inside, at and past a vector), stride 2 along rows and 1 to 3 down
    columns, kernels 1 to 7, dilation 1 or 2, pads that differ at the two ends."""
    kernel = (draw(st.integers(1, 7)), draw(st.integers(1, 7)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    strides = (draw(st.integers(1, 3)), 2)
    pads = [draw(st.integers(0, 3)) for _ in range(4)]
    pads[1] = max(pads[1], 1)  # a padded left edge: the planes are padded, not read in place
    out_w = draw(st.integers(8, 24))
    width = max(1, (out_w - 1) * 2 + dilation[1] * (kernel[1] - 1) + 1 - pads[1] - pads[3] + draw(st.integers(0, 1)))
    low = max(1, dilation[0] * (kernel[0] - 1) + 1 - pads[0] - pads[2])
    height = draw(st.integers(low, low + 5))
    group = draw(st.integers(1, 2))
    cin, oc = group * draw(st.integers(1, 3)), group * draw(st.integers(1, 9))
    batch = draw(st.integers(1, 2))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    b = GraphBuilder("stride2")
    shape = (batch, cin, height, width)
    x = b.input("x", shape)
    feeds = {"x": rng.standard_normal(shape).astype(np.float32)}
    w = b.constant(rng.standard_normal((oc, cin // group, *kernel)).astype(np.float32))
    args = [x, w] + ([b.constant(rng.standard_normal(oc).astype(np.float32))] if draw(st.booleans()) else [])
    y = b.conv(*args, strides=list(strides), dilations=list(dilation), pads=pads, group=group)
    out = [(n + pads[a] + pads[a + 2] - d * (k - 1) - 1) // s + 1
           for a, (n, k, s, d) in enumerate(zip((height, width), kernel, strides, dilation))]
    b.output(_epilogue(draw, b, y, (batch, oc, *out), feeds, rng, 1))
    return b.build(), feeds


@settings(max_examples=25, deadline=None)
@given(case=row_stride_2_conv())
def test_row_stride_2_convs_copying_runs_match_the_reference(case):
    graph, feeds = case
    check_one_and_two_threads(graph, feeds)


def _stem(size: int, kernel: int, channels: int = 3, out_channels: int = 16):
    """ResNet's stem, scaled down: a kernel x kernel conv of stride 2 padded by kernel // 2."""
    rng = np.random.default_rng(size + kernel)
    b = GraphBuilder("stem")
    shape = (1, channels, size, size)
    x = b.input("x", shape)
    w = b.constant(rng.standard_normal((out_channels, channels, kernel, kernel)).astype(np.float32))
    y = b.conv(x, w, b.constant(rng.standard_normal(out_channels).astype(np.float32)), strides=[2, 2],
               pads=[kernel // 2] * 4)
    b.output(b.relu(y, name="y"))
    return b.build(), {"x": rng.standard_normal(shape).astype(np.float32)}


@pytest.mark.parametrize("size,kernel", [(64, 7), (57, 3), (40, 3)])
def test_a_padded_stride_2_conv_copies_every_second_tap(size, kernel):
    # 32, 29 and 20 outputs a row: whole vectors, a ragged last one, and one short of two
    graph, feeds = _stem(size, kernel)
    (packer,) = _packers(graph)
    assert packer.startswith("fl_gemm_pack_copies_s2_")
    check_one_and_two_threads(graph, feeds)


def test_stride_2_copies_can_be_turned_off(monkeypatch):
    monkeypatch.setattr(gemm_template, "COPY_STRIDES", (1,))
    graph, feeds = _stem(40, 3)
    assert _packers(graph)[0].startswith("fl_gemm_pack_gather_")
    check_one_and_two_threads(graph, feeds)


def test_a_stride_2_conv_read_in_place_still_gathers():
    # no padding, every window inside the input: gathered where it lies, and a run's last
    # vector would read past the input
    rng = np.random.default_rng(3)
    b = GraphBuilder("shortcut")
    x = b.input("x", (1, 8, 48, 48))
    y = b.conv(x, b.constant(rng.standard_normal((16, 8, 1, 1)).astype(np.float32)), strides=[2, 2])
    b.output(b.relu(y, name="y"))
    graph = b.build()
    assert _packers(graph)[0].startswith("fl_gemm_pack_gather_")
    check_one_and_two_threads(graph, {"x": rng.standard_normal((1, 8, 48, 48)).astype(np.float32)})
