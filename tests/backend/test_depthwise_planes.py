"""The depthwise template's plane method (phase planes, register chunks over the flattened
output) against a direct NumPy window reference, and where it is chosen.

The reference pads the input (asymmetrically: the bottom and right pads come from the output
size) with the tap's padding and slides the window: a weighted sum, a max or a plain sum. The
kernels run the plane method at every stride (it splits the input by stride phase), on
vectors of 4, 8 or 16 floats (which changes the chunking; up to 4x4 outputs and 4 or 8
channels, whole vectors of channels run in lanes), with the epilogues the networks
fold in: a bias and ReLU6, a batch normalisation and a clip (both run over the wide
accumulator), and a residual read at the element's position (run over the compacted plane)."""

from __future__ import annotations

import ctypes
from unittest import mock

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_template_threads import _one_and_two, _threaded, every_size_in_parallel

from fusionlang.backend import depthwise_template
from fusionlang.backend.ccompile import TEMPLATE_OPT, build_library, load_library
from fusionlang.backend.depthwise_template import (DEPTHWISE, MAX_POOL, SUM_POOL, Planes, depthwise_kernel,
                                                   full_rows_for, lanes_for, planes_for, reads_position,
                                                   rows_per_pass)
from fusionlang.backend.epilogue import Text
from fusionlang.backend.gemm_template import Epilogue, GemmProblem, Im2Col, Operand

TAPS = {"depthwise": DEPTHWISE, "max": MAX_POOL, "sum": SUM_POOL}
EPILOGUES = {
    "none": None,
    "bias_relu6": Epilogue((Text("v = v + p[o1];"), Text("v = v < 0.0f ? 0.0f : v > 6.0f ? 6.0f : v;")),
                           ("const float *restrict p", "const float *restrict q")),
    "bn_clip": Epilogue((Text("v = v * p[o1] + q[o1];"), Text("v = v < -1.0f ? -1.0f : v > 2.0f ? 2.0f : v;")),
                        ("const float *restrict p", "const float *restrict q")),
}
ODD_KERNELS = st.sampled_from([1, 3, 5, 7])


def _residual(channels: int, plane: int) -> Epilogue:
    """Adds the element of a second array at the element's own position (``j``): the epilogue
    must see the compacted plane, not the wide one."""
    return Epilogue((Text(f"v = v * p[o1] + q[(o0 * {channels} + o1) * {plane} + j];"),),
                    ("const float *restrict p", "const float *restrict q"))


def _out_size(h, w, kernel, stride, dilation, before, after, **_) -> tuple[int, int]:
    return ((h + before[0] + after[0] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1,
            (w + before[1] + after[1] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1)


def _conv(batch, channels, h, w, kernel, stride, dilation, before, after) -> tuple[GemmProblem, tuple[int, int]]:
    """The problem of a depthwise conv padded ``before`` (top, left) and ``after`` (bottom, right)."""
    oh, ow = _out_size(h, w, kernel, stride, dilation, before, after)
    taps = kernel[0] * kernel[1]
    return GemmProblem(1, oh * ow, taps, Operand(taps, 1, 0, (0, taps)),
                       Im2Col(1, h, w, kernel, stride, dilation, before, oh, ow, 0, (channels * h * w, h * w)),
                       Operand(oh * ow, 1, 0, (channels * oh * ow, oh * ow)), (batch, channels)), (oh, ow)


def _reference(x, weight, tap: str, kernel, stride, dilation, before, out_size) -> np.ndarray:
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, stride, dilation, out_size
    fill = -np.inf if tap == "max" else 0.0
    bottom = max(0, (oh - 1) * sh + (kh - 1) * dh + 1 - before[0] - x.shape[2])
    right = max(0, (ow - 1) * sw + (kw - 1) * dw + 1 - before[1] - x.shape[3])
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (before[0], bottom), (before[1], right)), constant_values=fill)
    y = np.full(x.shape[:2] + (oh, ow), fill)
    for ky in range(kh):
        for kx in range(kw):
            window = xp[:, :, ky * dh:ky * dh + sh * (oh - 1) + 1:sh, kx * dw:kx * dw + sw * (ow - 1) + 1:sw]
            if tap == "max":
                y = np.maximum(y, window)
            else:
                y += window * (weight[None, :, 0, ky, kx, None, None] if tap == "depthwise" else 1.0)
    return y


def _epilogue_reference(y, epilogue: str, p, q):
    if epilogue == "residual":
        return y * p[None, :, None, None] + q.reshape(y.shape)
    if epilogue == "bias_relu6":
        return np.clip(y + p[None, :, None, None], 0.0, 6.0)
    if epilogue == "bn_clip":
        return np.clip(y * p[None, :, None, None] + q[None, :, None, None], -1.0, 2.0)
    return y


@st.composite
def convolutions(draw, tiny: bool = False, wide: bool = False):
    """A depthwise conv's attributes; ``tiny``: inputs up to 4x4 over 4 to 19 channels (the
    lanes method's when the output has at most 16 elements), else planes up to 15x15 over up
    to 9 channels (at 4 floats a vector, lanes for whole vectors of them and a rest);
    ``wide``: rows 24 to 90 wide, up to 6 high, over up to 3 channels (at 4 floats a
    vector, outputs 12 to 90 wide: the full-rows method, in one or more segments a row)."""
    kernel = (draw(st.sampled_from([1, 3, 5]) if tiny else ODD_KERNELS), draw(ODD_KERNELS))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pad = st.integers(0, 1 if tiny else 3)
    before, after = (draw(pad), draw(pad)), (draw(pad), draw(pad))
    side = st.integers(1, 4 if tiny else 15)
    size = (draw(st.integers(1, 6)), draw(st.integers(24, 90))) if wide else (draw(side), draw(side))
    channels = st.integers(4, 19) if tiny else st.integers(1, 3) if wide else st.integers(1, 9)
    conv = dict(batch=draw(st.integers(1, 2)), channels=draw(channels),
                h=size[0], w=size[1], kernel=kernel, stride=stride, dilation=dilation, before=before, after=after)
    assume(min(_out_size(**conv)) >= 1)
    return conv


def _arrays(conv: dict, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((conv["batch"], conv["channels"], conv["h"], conv["w"])).astype(np.float32)
    weight = rng.standard_normal((conv["channels"], 1) + conv["kernel"]).astype(np.float32)
    p, q = (rng.uniform(0.5, 1.5, conv["channels"]).astype(np.float32) for _ in range(2))
    return x, weight, p, q


def _pointers(tap: str, x, weight, y, p, q):
    arrays = ((weight,) if tap == "depthwise" else ()) + (x, y, p, q)
    return [a.ctypes.data_as(ctypes.c_void_p) for a in arrays]


@settings(max_examples=30, deadline=None)
@given(conv=convolutions(), tap=st.sampled_from(sorted(TAPS)),
       epilogue=st.sampled_from(sorted(EPILOGUES) + ["residual"]), vl=st.sampled_from([4, 8, 16]),
       seed=st.integers(0, 2**16))
def test_plane_method_matches_the_window_reference(conv, tap, epilogue, vl, seed):
    problem, _ = _conv(**conv)
    assert planes_for(problem.b, vl) is not None  # these planes are small: the plane method runs
    with mock.patch.object(depthwise_template, "full_rows_for", lambda *_: None):  # where rows are wide enough too
        _check_against_the_reference(conv, tap, epilogue, vl, seed)


@settings(max_examples=30, deadline=None)
@given(conv=convolutions(wide=True), tap=st.sampled_from(sorted(TAPS)),
       epilogue=st.sampled_from(sorted(EPILOGUES) + ["residual"]), vl=st.sampled_from([4, 16]),
       seed=st.integers(0, 2**16))
def test_full_rows_method_matches_the_window_reference(conv, tap, epilogue, vl, seed):
    # at 16 floats a vector, rows from 12 wide: under a vector (one partial vector a row) too
    problem, _ = _conv(**conv)
    assume(full_rows_for(problem.b, vl) is not None)
    _check_against_the_reference(conv, tap, epilogue, vl, seed)


@settings(max_examples=20, deadline=None)
@given(conv=convolutions(tiny=True), tap=st.sampled_from(sorted(TAPS)),
       epilogue=st.sampled_from(sorted(EPILOGUES) + ["residual"]), vl=st.sampled_from([4, 8]),
       seed=st.integers(0, 2**16))
def test_lanes_method_matches_the_window_reference(conv, tap, epilogue, vl, seed):
    problem, _ = _conv(**conv)
    assume(lanes_for(problem, planes_for(problem.b, vl)) == vl)
    _check_against_the_reference(conv, tap, epilogue, vl, seed)


def _check_against_the_reference(conv: dict, tap: str, epilogue: str, vl: int, seed: int) -> None:
    problem, (oh, ow) = _conv(**conv)
    chosen = _residual(conv["channels"], oh * ow) if epilogue == "residual" else EPILOGUES[epilogue]
    source = depthwise_kernel("fl_dw_planes", problem, chosen, tap=TAPS[tap], vl=vl)
    fn = load_library(build_library(["#include <math.h>\n" + source], opts=[TEMPLATE_OPT])).fl_dw_planes
    x, weight, p, q = _arrays(conv, seed)
    if epilogue == "residual":
        q = np.random.default_rng(seed + 1).standard_normal(conv["batch"] * conv["channels"] * oh * ow)
        q = q.astype(np.float32)
    y = np.full((conv["batch"], conv["channels"], oh, ow), np.nan, np.float32)
    assert fn(*_pointers(tap, x, weight, y, p, q)) == 0
    want = _reference(x, weight, tap, conv["kernel"], conv["stride"], conv["dilation"], conv["before"], (oh, ow))
    np.testing.assert_allclose(y, _epilogue_reference(want, epilogue, p, q), rtol=1e-4, atol=1e-4)


@settings(max_examples=8, deadline=None)
@given(conv=st.one_of(convolutions(), convolutions(wide=True)), tap=st.sampled_from(sorted(TAPS)),
       seed=st.integers(0, 2**16))
def test_plane_method_on_two_threads_gives_the_one_thread_result(conv, tap, seed):
    problem, (oh, ow) = _conv(**conv)
    with every_size_in_parallel():
        source = depthwise_kernel("fl_dw_planes_omp", problem, EPILOGUES["bn_clip"], tap=TAPS[tap], threads=True,
                                  vl=4)
    fn, set_threads = _threaded("#include <math.h>\n" + source, name="fl_dw_planes_omp")
    x, weight, p, q = _arrays(conv, seed)
    y = np.empty((conv["batch"], conv["channels"], oh, ow), np.float32)
    one, two = _one_and_two(fn, set_threads, y, *_pointers(tap, x, weight, y, p, q))
    np.testing.assert_array_equal(one, two)
    want = _reference(x, weight, tap, conv["kernel"], conv["stride"], conv["dilation"], conv["before"], (oh, ow))
    np.testing.assert_allclose(one, _epilogue_reference(want, "bn_clip", p, q), rtol=1e-4, atol=1e-4)


def _planes(plane, kernel, stride, vl=16) -> Planes | None:
    problem, _ = _conv(1, 8, plane, plane, (kernel, kernel), (stride, stride), (1, 1), (kernel // 2,) * 2,
                       (kernel // 2,) * 2)
    assert isinstance(problem.b, Im2Col)
    return planes_for(problem.b, vl)


@pytest.mark.parametrize("plane, kernel, stride", [(7, 3, 1), (7, 5, 1), (14, 3, 1), (14, 3, 2), (14, 5, 2),
                                                   (28, 3, 2), (56, 3, 1), (56, 3, 2), (56, 5, 2), (112, 3, 1),
                                                   (112, 5, 2)])
def test_the_plane_method_runs_on_small_planes_and_at_stride_two(plane, kernel, stride):
    planes = _planes(plane, kernel, stride)
    assert planes is not None and planes.phases == (stride, stride)
    out = (plane - 1) // stride + 1
    assert planes.span >= (out - 1) * planes.width + out  # the chunks cover the flattened output
    assert depthwise_template.MIN_UNROLL <= planes.unroll <= depthwise_template.MAX_UNROLL


def test_the_row_method_runs_on_wide_strided_rows_with_few_taps_and_on_planes_over_the_stack_budget():
    assert _planes(112, 3, 2) is None  # 56-wide rows, 2.25 taps per input element
    assert _planes(94, 3, 2) is not None  # 47 wide: under the rows' limit
    assert _planes(112, 5, 2) is not None  # 56 wide, but 6.25 taps per input element
    assert _planes(200, 3, 1) is None  # 200x200: 313 KiB of planes


def test_the_chunks_waste_the_fewest_vectors():
    planes = _planes(14, 3, 1)  # 13 * 16 + 14 = 222 floats: 14 vectors of 16
    assert planes is not None and (planes.unroll, planes.chunks) == (7, 2)
    planes = _planes(7, 3, 1)  # 6 * 9 + 7 = 61 floats: 4 vectors, one chunk
    assert planes is not None and (planes.unroll, planes.chunks) == (4, 1)
    planes = _planes(1, 1, 1)  # one float: one vector
    assert planes is not None and (planes.unroll, planes.chunks) == (1, 1)


@pytest.mark.parametrize("plane, kernel, stride, channels, lanes", [
    (2, 3, 1, 960, 16), (4, 3, 1, 576, 16), (7, 3, 2, 576, 16), (8, 3, 2, 64, 16), (4, 7, 1, 32, 16),
    (5, 3, 1, 64, 0),  # 25 outputs: the plane method's chunks are full enough
    (4, 3, 1, 15, 0),  # fewer channels than lanes
    (4, 9, 1, 64, 0),  # a 12x12 window: too many inputs to gather
])
def test_tiny_planes_run_a_vector_of_channels_at_a_time(plane, kernel, stride, channels, lanes):
    problem, _ = _conv(1, channels, plane, plane, (kernel, kernel), (stride, stride), (1, 1), (kernel // 2,) * 2,
                       (kernel // 2,) * 2)
    assert lanes_for(problem, planes_for(problem.b, 16)) == lanes


def test_an_epilogue_reads_the_position_where_it_names_the_column_j():
    assert reads_position(_residual(4, 49))
    assert not reads_position(EPILOGUES["bn_clip"])
    assert not reads_position(Epilogue((Text("v = v + obj[o1] * jj;"),), ()))  # names containing j


@pytest.mark.parametrize("plane, stride, vl, full_rows", [
    (112, 1, 16, True), (56, 1, 16, True), (112, 2, 16, True), (28, 1, 16, True),  # 7, 3.5, 3.5, 1.75 vectors
    (14, 1, 16, False), (4, 1, 4, True), (3, 1, 8, False),
    (200, 1, 16, False),  # 200x200: 157 KiB of plane, over the stack budget
])
def test_rows_of_a_vector_or_more_run_the_full_rows_method(plane, stride, vl, full_rows):
    problem, _ = _conv(1, 8, plane, plane, (3, 3), (stride, stride), (1, 1), (1, 1), (1, 1))
    assert (full_rows_for(problem.b, vl) is not None) == full_rows


@pytest.mark.parametrize("plane, kernel, rows", [(56, 7, 4), (112, 3, 2), (240, 3, 2)])
def test_a_full_rows_pass_sums_as_many_rows_as_sixteen_accumulators_allow(plane, kernel, rows):
    # 56 wide: 4 vectors of 16 a row; 112: 7; 240: 15, in two segments of 8 and 7
    problem, _ = _conv(1, 1, 4, plane, (kernel, kernel), (1, 1), (1, 1), (kernel // 2,) * 2, (kernel // 2,) * 2)
    layout = full_rows_for(problem.b, 16)
    assert layout is not None and rows_per_pass(layout) == rows


@pytest.mark.parametrize("plane, kernel, stride, full_rows", [
    (14, 7, 1, True), (14, 5, 1, True),  # wide rows of 20 or 18 floats, full rows of 16
    (14, 3, 1, False),  # 16 and 16: planes
    (14, 5, 2, False),  # 7 wide: under half a vector
])
def test_rows_of_half_a_vector_run_full_rows_where_fewer_lanes_idle(plane, kernel, stride, full_rows):
    pad = (kernel // 2,) * 2
    problem, _ = _conv(1, 8, plane, plane, (kernel, kernel), (stride, stride), (1, 1), pad, pad)
    assert (full_rows_for(problem.b, 16) is not None) == full_rows
