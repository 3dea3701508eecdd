"""The stride-2 pooling kernel (even and odd lanes of pairs of vectors) against the NumPy
window reference and, to the bit, against the depthwise template's plane method it
replaces (the same taps in the same order); where it is chosen; and whole graphs against
the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_depthwise_planes import EPILOGUES, TAPS, _arrays, _conv, _epilogue_reference, _pointers, _reference, \
    _residual
from test_template_threads import _one_and_two, _threaded, every_size_in_parallel

import fusionlang
from fusionlang import reference
from fusionlang.backend.ccompile import TEMPLATE_OPT, build_library, load_library
from fusionlang.backend.depthwise_template import depthwise_kernel, lanes_for, planes_for
from fusionlang.backend.pool_pairs import pairs_fit, pairs_kernel, vector_floats
from fusionlang.ir.types import register_ml_dtypes
from fusionlang.ops import GraphBuilder

POOLS = ("max", "sum")
SPECIALS = [np.nan, np.inf, -np.inf, -0.0]


@st.composite
def pools(draw):
    """A 2x2, 2x3, 3x2 or 3x3 pool at stride 2 without padding before, on planes of 4 to 40
    floats a side (floor mode: a side's last floats may be in no window; or up to a float
    of padding after: ceil mode, the last windows ending past the input), more than 4x4
    outputs inside the input."""
    h, w = draw(st.integers(4, 40)), draw(st.integers(9, 40))
    kernel = (draw(st.sampled_from([2, 3])), draw(st.sampled_from([2, 3])))
    after = (draw(st.integers(0, 1)), draw(st.integers(0, 1)))
    conv = dict(batch=draw(st.integers(1, 2)), channels=draw(st.integers(1, 6)), h=h, w=w, kernel=kernel,
                stride=(2, 2), dilation=(1, 1), before=(0, 0), after=after)
    assume(((h - kernel[0]) // 2 + 1) * ((w - kernel[1]) // 2 + 1) > 16)
    return conv


def _build(source: str, name: str):
    return getattr(load_library(build_library(["#include <math.h>\n" + source], opts=[TEMPLATE_OPT])), name)


@settings(max_examples=30, deadline=None)
@given(conv=pools(), tap=st.sampled_from(POOLS), epilogue=st.sampled_from(sorted(EPILOGUES) + ["residual"]),
       vl=st.sampled_from([4, 8, 16]), specials=st.lists(st.sampled_from(SPECIALS), max_size=3),
       seed=st.integers(0, 2**16))
def test_pairs_match_the_window_reference_and_the_plane_method_to_the_bit(conv, tap, epilogue, vl, specials, seed):
    problem, (oh, ow) = _conv(**conv)
    assume(pairs_fit(problem, vl, TAPS[tap]))
    chosen = _residual(conv["channels"], oh * ow) if epilogue == "residual" else EPILOGUES[epilogue]
    pairs = _build(pairs_kernel("fl_pool_pairs", problem, TAPS[tap], chosen, vl), "fl_pool_pairs")
    planes = _build(depthwise_kernel("fl_pool_planes", problem, chosen, tap=TAPS[tap], vl=vl), "fl_pool_planes")
    x, weight, p, q = _arrays(conv, seed)
    rng = np.random.default_rng(seed + 1)
    for value in specials:
        x.flat[int(rng.integers(x.size))] = value
    if epilogue == "residual":
        q = rng.standard_normal(conv["batch"] * conv["channels"] * oh * ow).astype(np.float32)
    got, old = (np.full((conv["batch"], conv["channels"], oh, ow), 7.0, np.float32) for _ in range(2))
    assert pairs(*_pointers(tap, x, weight, got, p, q)) == 0
    assert planes(*_pointers(tap, x, weight, old, p, q)) == 0
    np.testing.assert_array_equal(got, old)  # the same taps in the same order
    with np.errstate(invalid="ignore"):
        window = _reference(x, weight, tap, conv["kernel"], (2, 2), (1, 1), (0, 0), (oh, ow))
        want = _epilogue_reference(window, epilogue, p, q)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@settings(max_examples=6, deadline=None)
@given(conv=pools(), tap=st.sampled_from(POOLS), seed=st.integers(0, 2**16))
def test_pairs_on_two_threads_give_the_one_thread_result(conv, tap, seed):
    problem, (oh, ow) = _conv(**conv)
    assume(pairs_fit(problem, 16, TAPS[tap]))
    with every_size_in_parallel():
        source = pairs_kernel("fl_pool_pairs_omp", problem, TAPS[tap], EPILOGUES["bn_clip"], 16, threads=True)
    assert "omp parallel" in source
    fn, set_threads = _threaded("#include <math.h>\n" + source, name="fl_pool_pairs_omp")
    x, weight, p, q = _arrays(conv, seed)
    y = np.empty((conv["batch"], conv["channels"], oh, ow), np.float32)
    one, two = _one_and_two(fn, set_threads, y, *_pointers(tap, x, weight, y, p, q))
    np.testing.assert_array_equal(one, two)
    want = _reference(x, weight, tap, conv["kernel"], (2, 2), (1, 1), (0, 0), (oh, ow))
    np.testing.assert_allclose(one, _epilogue_reference(want, "bn_clip", p, q), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("change, fits", [
    ({}, True),
    ({"before": (1, 0)}, False),  # padding: the plane method's -inf borders
    ({"w": 25, "after": (0, 1)}, False),  # ceil mode: a window past the input
    ({"kernel": (3, 3), "h": 40, "w": 40}, True),
    ({"kernel": (3, 3), "h": 27, "w": 27}, False),  # 13 x 13: 26 vectors, the plane method's flattened rows 12
    ({"kernel": (3, 3), "after": (0, 1)}, False),  # 32 wide: a 16th window would pass its end
    ({"kernel": (4, 4)}, False),
    ({"kernel": (1, 1)}, False),
    ({"stride": (1, 1)}, False),
    ({"dilation": (2, 2)}, False),
    ({"h": 8, "w": 8}, False),  # 4x4 outputs: the lanes method's
    ({"h": 40, "w": 7}, False),  # rows of 3 outputs: under a vector of 4
])
def test_pairs_take_only_stride_2_windows_inside_the_input_on_planes_the_lanes_do_not(change, fits):
    conv = dict(batch=1, channels=16, h=20, w=32, kernel=(2, 2), stride=(2, 2), dilation=(1, 1), before=(0, 0),
                after=(0, 0)) | change
    problem, _ = _conv(**conv)
    assert pairs_fit(problem, 16) is fits
    if change == {"h": 8, "w": 8}:
        assert lanes_for(problem, planes_for(problem.b, 16)) == 16


@pytest.mark.parametrize("change, fits", [
    ({"w": 41, "after": (0, 1)}, True),  # ceil mode: 20 windows inside a row, a 21st past it
    ({"h": 21, "after": (1, 0)}, True),  # and a row of windows past the last
    ({"kernel": (3, 3), "h": 40, "w": 40, "after": (1, 1)}, True),  # as inception_v2's 112 -> 56: both
    ({"kernel": (3, 3), "w": 8, "after": (0, 1)}, False),  # 3 windows inside, a 4th past: under a vector
    ({"before": (0, 1), "after": (0, 1)}, False),
])
def test_a_max_pools_last_windows_may_end_past_the_input_an_average_pools_not(change, fits):
    # a max pool's taps past the input are -inf, which never wins: they are left out; an
    # average's divisor would count them (count_include_pad) or not
    conv = dict(batch=1, channels=16, h=20, w=32, kernel=(2, 2), stride=(2, 2), dilation=(1, 1), before=(0, 0),
                after=(0, 0)) | change
    problem, _ = _conv(**conv)
    assert pairs_fit(problem, 16, TAPS["max"]) is fits
    assert not pairs_fit(problem, 16, TAPS["sum"]) and not pairs_fit(problem, 16)


def test_rows_narrower_than_the_machine_vector_run_in_halves():
    assert [vector_floats(w, 16) for w in (4, 7, 8, 12, 16, 40)] == [4, 4, 8, 8, 16, 16]


@pytest.mark.parametrize("op", ["max_pool", "average_pool"])
@pytest.mark.parametrize("side", [2, 3])
def test_pool_graphs_run_pairs_and_match_the_reference(op, side):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 22, 37)).astype(np.float32)  # 18 (or 17) outputs a row: a vector and a rest
    x[0, 1, 4, 6], x[1, 4, 21, 36], x[0, 0, 0, 0] = np.nan, np.inf, -np.inf
    b = GraphBuilder("pairs")
    y = getattr(b, op)(b.input("x", x.shape), kernel_shape=(side, side), strides=(2, 2))
    b.output(b.relu(y))
    graph = b.build()
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c")
    assert [k.strategy for k in compiled.kernels] == ["gemm template"]
    assert "pairs of" in compiled.kernels[0].source
    got = compiled.run({"x": x})[graph.outputs[0]]
    want = reference.run(graph, {"x": x})[graph.outputs[0]]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("ceil_mode", [0, 1])
@pytest.mark.parametrize("shape", [(1, 4, 112, 112), (2, 3, 23, 38)])
def test_ceil_mode_and_end_padded_max_pools_run_pairs_and_match_the_reference(shape, ceil_mode):
    # inception_v2's 3x3 / 2 pools pad the end by one (112 -> 56); ceil mode does the same
    # on odd and even sides; on one thread and two
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape).astype(np.float32)
    x[0, 0, -1, -1], x[0, 1, -1, 0], x[0, 2, 0, -1] = np.nan, np.inf, 9.0  # in the last windows only
    b = GraphBuilder("pairs_ceil")
    pads = {"ceil_mode": 1} if ceil_mode else {"pads": (0, 0, 1, 1)}
    y = b.max_pool(b.input("x", x.shape), kernel_shape=(3, 3), strides=(2, 2), **pads)
    b.output(b.relu(y))
    graph = b.build()
    plan = fusionlang.fuse(graph, "apollo")
    want = reference.run(graph, {"x": x})[graph.outputs[0]]
    for threads in (1, 2):
        compiled = fusionlang.compile(plan, "c", threads=threads)
        assert "pairs of" in compiled.kernels[0].source
        got = compiled.run({"x": x})[graph.outputs[0]]
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_float_pools_run_pairs_on_widened_operands_and_two_threads(dtype):
    # a max and a ReLU of 16-bit floats are exact: the widened run, on one thread or two,
    # gives the reference's values to the bit
    register_ml_dtypes(dtype)
    x = np.random.default_rng(4).standard_normal((2, 3, 21, 40)).astype(dtype)
    b = GraphBuilder("pairs_half")
    b.output(b.relu(b.max_pool(b.input("x", x.shape, dtype), kernel_shape=(3, 3), strides=(2, 2))))
    graph = b.build()
    plan = fusionlang.fuse(graph, "apollo")
    want = reference.run(graph, {"x": x})[graph.outputs[0]]
    for threads in (1, 2):
        compiled = fusionlang.compile(plan, "c", threads=threads)
        assert any("pairs of" in k.source for k in compiled.kernels)
        got = compiled.run({"x": x})[graph.outputs[0]]
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
