"""The C conv template folds a batch's small planes into its GEMM's columns (n = images *
plane, column j is position j % plane of image j // plane): folded convs of every attribute
and epilogue against the reference interpreter, one and two threads alike, and the fold
planned for small planes only (the plan's ``GemmProblem.fold``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers import check_one_and_two_threads

import fusionlang
from fusionlang import reference
from fusionlang.backend import gemm_template, template
from fusionlang.ops import GraphBuilder


@pytest.fixture(autouse=True)
def _small_problems_use_the_template(monkeypatch):
    # the tests' shapes are tiny; in production a GEMM this small stays a loop nest
    monkeypatch.setattr(template, "MIN_MACS", 0)
    monkeypatch.setattr(gemm_template, "PARALLEL_MIN_MACS", 0)  # two threads share even these


def _folds(graph) -> list:
    """Each templated group's ``problem.fold`` (None: unfolded)."""
    plan = fusionlang.fuse(graph, "apollo")
    return [tg.problem.fold for g in plan.groups
            if (tg := template.plan_template(plan, g, dict(graph.constants))) is not None]


EPILOGUES = ["bias", "relu", "residual", "batch_norm", "tanh"]


@st.composite
def folded_conv(draw):
    """A conv of 2 to 5 images whose output plane is 1x1 to 3x3 (or 1 to 5 wide, 1-D):
    every attribute, groups, 1x1 pointwise, and a random epilogue; (graph, feeds)."""
    rank = draw(st.sampled_from([1, 2]))
    group = draw(st.integers(1, 3))
    cin, oc = group * draw(st.integers(1, 4)), group * draw(st.integers(1, 5))
    pointwise = draw(st.booleans())
    kernel = (1,) * rank if pointwise else tuple(draw(st.integers(1, 3)) for _ in range(rank))
    strides = (1,) * rank if pointwise else tuple(draw(st.integers(1, 2)) for _ in range(rank))
    dilations = (1,) * rank if pointwise else tuple(draw(st.integers(1, 2)) for _ in range(rank))
    pads = (0,) * 2 * rank if pointwise else tuple(draw(st.integers(0, 1)) for _ in range(2 * rank))
    out = tuple(draw(st.integers(1, 3 if rank == 2 else 5)) for _ in range(rank))
    # the input that gives that output (the last stride's leftover rows too)
    spatial = tuple((o - 1) * s + d * (k - 1) + 1 - pads[a] - pads[rank + a] + draw(st.integers(0, s - 1))
                    for a, (o, k, s, d) in enumerate(zip(out, kernel, strides, dilations)))
    if min(spatial) < 1:
        spatial = tuple(max(1, n) for n in spatial)
        out = tuple((n + pads[a] + pads[rank + a] - d * (k - 1) - 1) // s + 1
                    for a, (n, k, s, d) in enumerate(zip(spatial, kernel, strides, dilations)))
    batch = draw(st.integers(2, 5))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    b = GraphBuilder("fold")
    x = b.input("x", (batch, cin) + spatial)
    feeds = {"x": rng.standard_normal((batch, cin) + spatial).astype(np.float32)}
    y = b.conv(x, b.constant(rng.standard_normal((oc, cin // group) + kernel).astype(np.float32)),
               strides=strides, dilations=dilations, pads=pads, group=group)
    shape = (batch, oc) + out
    channel = (1, oc) + (1,) * rank
    for op in draw(st.lists(st.sampled_from(EPILOGUES), max_size=4)):
        if op == "bias":
            y = b.add(y, b.constant(rng.standard_normal(channel).astype(np.float32)))
        elif op == "batch_norm":  # folded into a per-channel scale and shift
            scale = b.constant(rng.standard_normal(channel).astype(np.float32))
            y = b.add(b.mul(y, scale), b.constant(rng.standard_normal(channel).astype(np.float32)))
        elif op == "residual":
            name = f"r{len(feeds)}"
            feeds[name] = rng.standard_normal(shape).astype(np.float32)
            y = b.add(y, b.input(name, shape))
        else:
            y = getattr(b, op)(y)
    b.output(y)
    return b.build(), feeds, cin == oc == group


@settings(max_examples=25, deadline=None)
@given(case=folded_conv())
def test_folded_convs_match_the_reference_on_one_and_two_threads(case):
    graph, feeds, depthwise = case
    # a conv of one channel per group runs as the depthwise template, unfolded
    assert all((fold is not None and fold.images == feeds["x"].shape[0]) != depthwise for fold in _folds(graph))
    check_one_and_two_threads(graph, feeds)


def _conv(batch, channels, plane, kernel=3, out_channels=8):
    rng = np.random.default_rng(1)
    b = GraphBuilder("conv")
    x = b.input("x", (batch, channels, plane, plane))
    w = b.constant(rng.standard_normal((out_channels, channels, kernel, kernel)).astype(np.float32))
    b.output(b.relu(b.conv(x, w, pads=(kernel // 2,) * 4)))
    return b.build()


@pytest.mark.parametrize("batch,plane,folded", [(4, 2, True), (3, 8, True), (4, 9, False), (1, 2, False)])
def test_the_fold_is_planned_for_a_batch_of_small_planes_only(batch, plane, folded):
    (fold,) = _folds(_conv(batch, 16, plane))
    assert (fold is not None) == folded
    if folded:
        assert fold == gemm_template.Fold(batch, 16 * plane * plane, 8 * plane * plane)


def test_a_folded_conv_is_one_gemm_over_every_image():
    # resnet18's last stage on 2x2 planes, a batch of 4: m=512 n=16, not n=4 four times
    rng = np.random.default_rng(2)
    graph = _conv(4, 64, 2, out_channels=48)
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c", profile=True)
    (kernel,) = compiled.kernels
    assert kernel.detail == "GEMM m=48 n=16 k=576"
    feeds = {"x": rng.standard_normal((4, 64, 2, 2)).astype(np.float32)}
    np.testing.assert_allclose(compiled.run(feeds)[graph.outputs[0]], reference.run(graph, feeds)[graph.outputs[0]],
                               rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("plane", [2, 8])
def test_k_blocks_add_up_in_the_folded_tiles(plane):
    # K past one KC block (600 channels x 9 taps): each block's tile adds C's partial sums;
    # 2x2 planes put 3 images in every tile (stored through the scratch tile), 8x8 planes
    # fill whole tiles of one image each (accumulated in place, the epilogue on a copy)
    rng = np.random.default_rng(3)
    graph = _conv(3, 600, plane, out_channels=20)
    (fold,) = _folds(graph)
    assert fold is not None
    feeds = {"x": rng.standard_normal((3, 600, plane, plane)).astype(np.float32)}
    got = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c").run(feeds)[graph.outputs[0]]
    np.testing.assert_allclose(got, reference.run(graph, feeds)[graph.outputs[0]], rtol=2e-4, atol=2e-3)


def _conv_transposed(batch, channels, plane, rank=2, relu=False):
    """A conv whose images and channels are swapped after it (a weight gradient's shape)."""
    rng = np.random.default_rng(4)
    b = GraphBuilder("wgrad")
    x = b.input("x", (batch, channels) + (plane,) * rank)
    w = b.constant(rng.standard_normal((6, channels) + (3,) * rank).astype(np.float32))
    y = b.conv(x, w, pads=(1,) * 2 * rank)
    y = b.relu(y) if relu else y
    b.output(b.transpose(y, perm=(1, 0) + tuple(range(2, rank + 2))))
    feeds = {"x": rng.standard_normal((batch, channels) + (plane,) * rank).astype(np.float32)}
    return b.build(), feeds


@pytest.mark.parametrize("batch,plane,rank,relu,folded", [(4, 3, 2, False, True), (3, 2, 2, True, True),
                                                          (2, 10, 2, False, False), (5, 4, 1, True, True)])
def test_the_template_stores_straight_into_the_images_channels_transpose(batch, plane, rank, relu, folded):
    graph, feeds = _conv_transposed(batch, 5, plane, rank, relu)
    plan = fusionlang.fuse(graph, "apollo")
    (tg,) = [tg for g in plan.groups if (tg := template.plan_template(plan, g, dict(graph.constants))) is not None]
    # no strided copy after the template: C's rows step every image's plane
    assert tg.after is None
    assert (tg.problem.fold is not None) == folded
    positions = plane ** rank
    assert tg.problem.c.rows == batch * positions
    if folded:
        assert tg.problem.fold.c_stride == positions
    got = fusionlang.compile(plan, "c").run(feeds)[graph.outputs[0]]
    np.testing.assert_allclose(got, reference.run(graph, feeds)[graph.outputs[0]], rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("threads", [1, 2])
def test_folded_images_of_wide_rows_pack_by_copying_runs_that_stop_at_each_image(threads):
    # 8-wide rows (half an AVX-512 vector): the taps of one output row are a run in the padded
    # planes; a sliver holding two images' positions has runs that end where an image does
    graph = _conv(3, 5, 8)
    plan = fusionlang.fuse(graph, "apollo")
    (planned,) = [tg for g in plan.groups if (tg := template.plan_template(plan, g, dict(graph.constants)))]
    assert planned.problem.fold is not None
    copies = gemm_template.copies_runs(planned.problem.b, planned.problem.fold, planned.blocking.vl)
    assert copies == (planned.blocking.vl <= 16)
    feeds = {"x": np.random.default_rng(2).standard_normal((3, 5, 8, 8)).astype(np.float32)}
    got = fusionlang.compile(plan, "c", threads=threads).run(feeds)
    want = reference.run(graph, feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-4)
