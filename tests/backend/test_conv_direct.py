"""A stride-1 conv whose B the GEMM template reads in place from the padded planes
(:func:`fusionlang.backend.gemm_template.reads_planes`): no im2col panel packed, the GEMM
run over the padded width and the result copied into C, against the reference interpreter
on 1 and 2 threads, and the plan choosing that path where it pays."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusionlang
from fusionlang.backend import gemm_template, template
from fusionlang.ops import GraphBuilder

from helpers import check_one_and_two_threads
from test_template import conv_case


@pytest.fixture(autouse=True)
def _small_problems_use_the_template(monkeypatch):
    # the tests' shapes are tiny; in production a GEMM this small stays a loop nest
    monkeypatch.setattr(template, "MIN_MACS", 0)


def _planned(graph):
    plan = fusionlang.fuse(graph, "apollo")
    return [tg for g in plan.groups if (tg := template.plan_template(plan, g, dict(plan.graph.constants)))]


def _reads_planes(graph) -> list[bool]:
    """Per template group of the graph's plan: whether its driver calls the in-place micro-kernel."""
    return [any("micro_direct" in h.name for h in gemm_template.gemm_function(
        "k", tg.problem, tg.blocking, packed_a=tg.packed_a, packed_b=tg.packed_b).driver.called)
        for tg in _planned(graph)]


@pytest.fixture
def _every_stride_1_conv_in_place(monkeypatch):
    # however many columns the padded width adds, however many output channels
    monkeypatch.setattr(gemm_template, "DIRECT_MAX_COLUMNS", 1e9)
    monkeypatch.setattr(gemm_template, "DIRECT_MAX_ROWS", 1 << 30)


@pytest.mark.usefixtures("_every_stride_1_conv_in_place")
@settings(max_examples=20)
@given(data=st.data())
def test_stride_1_convs_read_in_place_with_random_epilogues_match_the_reference(data):
    # every stride-1 conv that gathers its B (odd planes, dilations, pads on one side,
    # groups, bias, epilogues)
    case = conv_case(data.draw, strides=st.just(1))
    if case is None:
        return
    graph, feeds = case
    check_one_and_two_threads(graph, feeds)


def _conv(height: int, width: int, stride: int, channels: int = 5, residual: bool = False, out_channels: int = 0):
    rng = np.random.default_rng(width * 7 + stride)
    b = GraphBuilder("direct")
    shape = (1, channels, height, width)
    out_channels = out_channels or channels
    x = b.input("x", shape)
    w = b.constant(rng.standard_normal((out_channels, channels, 3, 3)).astype(np.float32))
    y = b.conv(x, w, b.constant(rng.standard_normal(out_channels).astype(np.float32)), pads=[1, 1, 1, 1],
               strides=[stride, stride])
    if residual:  # a ResNet block's add of its input
        y = b.add(y, x)
    b.output(b.relu(y, name="y"))
    return b.build(), {"x": rng.standard_normal(shape).astype(np.float32)}


@pytest.mark.parametrize("height,width,stride,rows,direct", [(6, 40, 1, 128, True), (7, 7, 1, 128, True),
                                                             (6, 40, 2, 128, False), (6, 9, 1, 128, False),
                                                             (6, 9, 1, 8, True), (7, 7, 1, 512, False)])
def test_a_stride_1_conv_reads_its_planes_in_place_where_the_padded_width_costs_little(height, width, stride, rows,
                                                                                       direct):
    # 6 rows of 40 at the padded width 42: 252 columns against 240 (16 vectors each); a 7x7
    # plane (ResNet's last): 63 against 49 (4 vectors each); 6 rows of 9: 66 against 54 (5
    # vectors against 4): packed for 128 output channels, in place for 8 (the packing saved
    # weighs more against fewer rows), and a strided conv's taps are no run of the planes;
    # 512 output channels pack (ResNet's last convs: the panel is shared by 512 rows)
    graph, feeds = _conv(height, width, stride, out_channels=rows)
    assert _reads_planes(graph) == [direct]
    check_one_and_two_threads(graph, feeds)


@pytest.mark.usefixtures("_every_stride_1_conv_in_place")
@pytest.mark.parametrize("width", [3, 15, 16, 17, 32, 33, 47])
def test_in_place_results_are_copied_into_c_on_rows_of_every_width(width):
    # fl_gemm_copy_rows: a row under a vector (one memcpy), whole vectors, and whole vectors
    # with a last one overlapping the one before; the residual's epilogue reads C after it
    graph, feeds = _conv(5, width, 1, channels=6, residual=True)
    assert _reads_planes(graph) == [True]
    check_one_and_two_threads(graph, feeds)


def test_a_residual_block_reads_in_place_on_a_plane_over_a_panel_and_two_threads():
    # 48 channels at 6 x 200: more columns (6 x 202) than one B panel of the blocking, K in
    # two blocks, and the epilogue adding the conv's own input after the copy into C
    graph, feeds = _conv(6, 200, 1, channels=48, residual=True)
    (planned,) = _planned(graph)
    assert planned.blocking.nc < 6 * 202 and planned.blocking.kc < 48 * 9
    assert _reads_planes(graph) == [True]
    check_one_and_two_threads(graph, feeds)


def test_an_in_place_conv_allocates_its_planes_offsets_and_padded_result():
    graph, _ = _conv(6, 40, 1)
    (planned,) = _planned(graph)
    floats = gemm_template.packing_floats(planned.problem, planned.blocking, planned.packed_a, planned.packed_b)
    # 5 planes of 8 x 42, zeros for 2 + 64 floats after them, 240 positions, 45 offsets (two
    # floats each) and 5 rows of 6 x 42 columns, each in whole 64-byte lines
    assert floats == 5 * 8 * 42 + 80 + 240 + 96 + 5 * 256
