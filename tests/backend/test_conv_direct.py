"""A stride-1 conv whose B the GEMM template reads in place from the padded planes
(:func:`fusionlang.backend.gemm_template.reads_planes`): no im2col panel packed, the GEMM
run over the padded width and the result copied into C, against the reference interpreter
on 1 and 2 threads, and the plan choosing that path where it pays."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusionlang
from fusionlang.backend import gemm_template, template
from fusionlang.backend.machine import host, machine_for
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


def _conv(height: int, width: int, stride: int, channels: int = 5, residual: bool = False, out_channels: int = 0,
          batch: int = 1):
    rng = np.random.default_rng(width * 7 + stride)
    b = GraphBuilder("direct")
    shape = (batch, channels, height, width)
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
    # 64 channels at 6 x 200: more columns (6 x 202) than one B panel of the blocking, K in
    # two blocks, and the epilogue adding the conv's own input after the copy into C
    graph, feeds = _conv(6, 200, 1, channels=64, residual=True)
    (planned,) = _planned(graph)
    assert planned.blocking.nc < 6 * 202 and planned.blocking.kc < 64 * 9
    assert _reads_planes(graph) == [True]
    check_one_and_two_threads(graph, feeds)


def _images_shared(graph) -> list[bool]:
    """Per template group of the graph's plan: whether its threaded driver shares out images."""
    return [gemm_template.images_shared(tg.problem, tg.blocking, tg.packed_a, tg.packed_b, True)
            for tg in _planned(graph)]


@pytest.mark.parametrize("batch,shared", [(1, False), (3, False), (4, True), (5, True), (8, True)])
def test_a_batch_of_in_place_convs_gives_each_member_of_the_team_its_own_images(batch, shared):
    # 4 images or more: each thread its images, its buffer and its pad step (5 on two
    # threads: 3 and 2); fewer: the team shares each image's tiles; on 1, 2 and 3 threads
    graph, feeds = _conv(12, 40, 1, out_channels=16, batch=batch)
    assert _reads_planes(graph) == [True] and _images_shared(graph) == [shared]
    check_one_and_two_threads(graph, feeds)
    one = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c").run(feeds)
    three = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c", threads=3).run(feeds)
    np.testing.assert_array_equal(three["y"], one["y"])


@pytest.fixture
def _images_shared_from_2(monkeypatch):
    # however little work: conv_case's convs are tiny
    monkeypatch.setattr(gemm_template, "IMAGES_SHARED_MIN", 2)
    monkeypatch.setattr(gemm_template, "PARALLEL_MIN_MACS", 0)


@pytest.mark.usefixtures("_every_stride_1_conv_in_place", "_images_shared_from_2")
@settings(max_examples=20)
@given(data=st.data())
def test_in_place_convs_with_images_shared_by_the_team_match_the_reference(data):
    # every conv of conv_case's that reads in place (batch 1 or 2, groups 1 to 3: up to 6
    # images, 2 or more shared by the team)
    case = conv_case(data.draw, strides=st.just(1))
    if case is None:
        return
    graph, feeds = case
    check_one_and_two_threads(graph, feeds)


def test_an_in_place_conv_allocates_its_planes_offsets_and_padded_result():
    graph, _ = _conv(6, 40, 1)
    (planned,) = _planned(graph)
    floats = gemm_template.packing_floats(planned.problem, planned.blocking, planned.packed_a, planned.packed_b)
    # 5 planes of 8 x 42, zeros for 2 + 64 floats after them, 240 positions, 45 offsets (two
    # floats each) and 5 rows of 6 x 42 columns, each in whole 64-byte lines
    assert floats == 5 * 8 * 42 + 80 + 240 + 96 + 5 * 256



def _conv_problem(rows: int, size: int, stride: int = 1) -> gemm_template.GemmProblem:
    """A batch-1 3x3 conv of 16 channels on a size x size plane, 'same' padding."""
    out = -(-size // stride)
    b = gemm_template.Im2Col(16, size, size, (3, 3), (stride, stride), (1, 1), (1, 1), out, out)
    return gemm_template.GemmProblem(rows, out * out, 16 * 9, gemm_template.Operand(16 * 9, 1), b,
                                     gemm_template.Operand(out * out, 1))


@pytest.mark.parametrize("rows,size,stride,tile", [(64, 56, 1, (8, 3)), (16, 14, 1, (8, 3)), (24, 14, 1, (8, 3)),
                                                   (64, 28, 1, (8, 3)), (64, 56, 2, (8, 3)), (12, 14, 1, (6, 4)),
                                                   (64, 7, 1, (6, 4)), (64, 13, 1, (6, 4)), (64, 28, 2, (6, 4))])
def test_a_conv_takes_the_conv_tile_where_it_pads_no_more_rows_and_fills_its_slivers(rows, size, stride, tile):
    # AVX-512: 8 rows x 3 vectors where M pads to 8 no more than to 6 and the columns hold 4
    # of its 48-wide slivers (14x14 in place: 14 rows of 16), or 16 where the last is one
    # vector (28x28 at stride 2: 784 columns, 16 slivers and 16 columns). The default stays
    # for 12 rows (16 against 12), a 7x7 plane (63 columns), 13x13 (packed: 169 columns)
    # and 14x14 at stride 2 (196 columns: 4 slivers and one vector)
    blocking = gemm_template.blocking_for(machine_for("avx512"), _conv_problem(rows, size, stride))
    assert (blocking.mr, blocking.nv) == tile


@pytest.fixture
def _conv_tile_everywhere(monkeypatch):
    # 8 x 3 on this machine for every conv, however few its columns
    monkeypatch.setattr(gemm_template, "CONV_TILES", {host().isa: (8, 3)})
    monkeypatch.setattr(gemm_template, "CONV_TILE_MIN_SLIVERS", 0)
    monkeypatch.setattr(gemm_template, "CONV_TILE_MIN_SLIVERS_ONE", 0)


@pytest.mark.usefixtures("_every_stride_1_conv_in_place", "_conv_tile_everywhere")
@settings(max_examples=25)
@given(data=st.data())
def test_convs_by_the_conv_tile_with_random_epilogues_match_the_reference(data):
    # 8-row tiles over odd planes, strides 1 (read in place) and 2 (packed), dilations,
    # one-sided pads, groups and 1 to 24 output channels (where M pads to 8 no more than
    # to 6), on 1 and 2 threads
    case = conv_case(data.draw, channels=st.integers(1, 8))
    if case is None:
        return
    graph, feeds = case
    check_one_and_two_threads(graph, feeds)


@pytest.mark.usefixtures("_conv_tile_everywhere")
@pytest.mark.parametrize("height,width,stride,rows", [(14, 14, 1, 16), (9, 30, 1, 40), (6, 200, 1, 64),
                                                      (15, 33, 2, 24)])
def test_the_conv_tile_over_several_panels_and_k_blocks_matches_the_reference(height, width, stride, rows):
    # 64 channels in (K = 576: two blocks); 16 rows at 14x14 (ResNet's third stage in
    # small), 40 rows (five 8-row tiles) over 9 rows of 32, 64 rows over 6 x 202 columns
    # (several B panels) with a residual add after the copy into C; 24 rows packed at stride 2
    graph, feeds = _conv(height, width, stride, channels=64, residual=rows == 64, out_channels=rows)
    (planned,) = _planned(graph)
    assert (planned.blocking.mr, planned.blocking.nv) == (8, 3)
    assert _reads_planes(graph) == [stride == 1]
    check_one_and_two_threads(graph, feeds)


def test_a_pointwise_conv_takes_the_conv_tile_and_a_matmul_of_its_shape_does_not():
    # a 1x1 conv's B is its input as a plain matrix: the plan says it is a conv
    problem = gemm_template.GemmProblem(64, 3136, 64, gemm_template.Operand(64, 1), gemm_template.Operand(3136, 1),
                                        gemm_template.Operand(3136, 1))
    conv = gemm_template.blocking_for(machine_for("avx512"), problem, conv=True)
    matmul = gemm_template.blocking_for(machine_for("avx512"), problem)
    assert (conv.mr, conv.nv, matmul.mr, matmul.nv) == (8, 3, 6, 4)


@pytest.mark.usefixtures("_conv_tile_everywhere")
def test_a_pointwise_conv_by_the_conv_tile_matches_the_reference():
    # 40 -> 24 channels at 10 x 30, + bias + relu: its B packed from the input's rows
    rng = np.random.default_rng(3)
    b = GraphBuilder("pointwise")
    x = b.input("x", (1, 40, 10, 30))
    w = b.constant(rng.standard_normal((24, 40, 1, 1)).astype(np.float32))
    b.output(b.relu(b.conv(x, w, b.constant(rng.standard_normal(24).astype(np.float32))), name="y"))
    graph = b.build()
    (planned,) = _planned(graph)
    assert isinstance(planned.problem.b, gemm_template.Operand) and (planned.blocking.mr, planned.blocking.nv) == (8, 3)
    check_one_and_two_threads(graph, {"x": rng.standard_normal((1, 40, 10, 30)).astype(np.float32)})


def test_a_conv_whose_columns_are_one_sliver_walks_longer_k_blocks():
    # 512 -> 512 at 7x7 (49 columns, packed): K = 4608 in 4 blocks of 1152, not 12 of 384
    # as a matmul of its shape (48 KiB of L1); a small K stays one block, and a wide
    # plane's K keeps its blocks
    avx512 = machine_for("avx512", l1d=48 * 1024)
    b = gemm_template.Im2Col(512, 7, 7, (3, 3), (1, 1), (1, 1), (1, 1), 7, 7)
    conv = gemm_template.GemmProblem(512, 49, 4608, gemm_template.Operand(4608, 1), b, gemm_template.Operand(49, 1))
    matmul = replace(conv, b=gemm_template.Operand(49, 1))
    assert gemm_template.blocking_for(avx512, conv).kc == 1152
    assert gemm_template.blocking_for(avx512, matmul).kc == 384
    assert gemm_template.blocking_for(avx512, matmul, conv=True).kc == 1152
    assert gemm_template.blocking_for(avx512, _conv_problem(64, 7)).kc == 16 * 9
    wide = replace(_conv_problem(64, 56), k=64 * 9, b=replace(_conv_problem(64, 56).b, channels=64))
    assert gemm_template.blocking_for(avx512, wide).kc == 288


@pytest.mark.parametrize("size,channels,rows,pointwise", [(5, 144, 40, False), (4, 1300, 24, True), (7, 130, 12, False)])
def test_one_sliver_convs_over_long_k_blocks_match_the_reference(size, channels, rows, pointwise):
    # 3x3 convs of K = 1296 and 1170 on a 5x5 and a 7x7 plane (one sliver of columns, K in
    # two blocks of 648 and one of 1170) and a 1x1 conv of 1300 channels on a 4x4 plane,
    # + bias + relu, on 1 and 2 threads
    rng = np.random.default_rng(size)
    b = GraphBuilder("one_sliver")
    kernel = 1 if pointwise else 3
    x = b.input("x", (1, channels, size, size))
    w = b.constant(rng.standard_normal((rows, channels, kernel, kernel)).astype(np.float32))
    y = b.conv(x, w, b.constant(rng.standard_normal(rows).astype(np.float32)), pads=[kernel // 2] * 4)
    b.output(b.relu(y, name="y"))
    graph = b.build()
    (planned,) = _planned(graph)
    k = channels * kernel * kernel
    assert planned.blocking.kc == (k if k <= 1152 else -(-k // 2))
    check_one_and_two_threads(graph, {"x": rng.standard_normal((1, channels, size, size)).astype(np.float32)})
