"""The grouped conv template (few channels a group: phase planes per input channel, a register
tile of output channels times vectors of the flattened output) against a NumPy window
reference, through a whole graph against the reference interpreter on one and two threads,
and where it is chosen.

The kernel-level cases run on vectors of 4, 8 and 16 floats (which changes the tile: up to 8
rows, 1 to 4 vectors, and the chunking), 1 to 16 channels a group in and out (more than 8
output channels run as two row blocks), every stride, dilation and asymmetric padding, with
a per-channel epilogue and one that reads the element's position (a residual)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from helpers import check_one_and_two_threads
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_depthwise_planes import _out_size
from test_template import _epilogue
from test_template_threads import _one_and_two, _threaded, every_size_in_parallel

import fusionlang
from fusionlang import reference
from fusionlang.api import compile_model
from fusionlang.backend import template
from fusionlang.backend.ccompile import LOOP_OPT, build_library, load_library
from fusionlang.backend.epilogue import Text
from fusionlang.backend.gemm_template import Epilogue, GemmProblem, Im2Col, Operand
from fusionlang.backend.grouped_template import MAX_GROUP_CHANNELS, grouped_kernel, grouped_layout, is_grouped
from fusionlang.errors import ResourceError
from fusionlang.ops import GraphBuilder
from fusionlang.testing.values import compare, magnitude

BIAS_RELU = Epilogue((Text("v = v + p[o1 * ROWS + i];"), Text("v = v < 0.0f ? 0.0f : v;")),
                     ("const float *restrict p", "const float *restrict q"))


def _residual(channels: int, plane: int) -> Epilogue:
    """Scales by the channel's p and adds q at the element's own position (``j``): the
    epilogue must see the compacted plane."""
    return Epilogue((Text(f"v = v * p[o1 * ROWS + i] + q[(o0 * {channels} + o1 * ROWS + i) * {plane} + j];"),),
                    ("const float *restrict p", "const float *restrict q"))


@st.composite
def grouped_convs(draw):
    """A grouped conv's attributes: 2 to 16 groups of 1 to 16 input and output channels."""
    kernel = (draw(st.sampled_from([1, 2, 3, 5])), draw(st.sampled_from([1, 3])))
    pad = st.integers(0, 2)
    side = st.integers(1, 12)
    conv = dict(batch=draw(st.integers(1, 2)), groups=draw(st.integers(2, 16)),
                cin=draw(st.integers(1, MAX_GROUP_CHANNELS)), cout=draw(st.integers(1, MAX_GROUP_CHANNELS)),
                h=draw(side), w=draw(side), kernel=kernel, stride=(draw(st.integers(1, 2)), draw(st.integers(1, 2))),
                dilation=(draw(st.integers(1, 2)), draw(st.integers(1, 2))), before=(draw(pad), draw(pad)),
                after=(draw(pad), draw(pad)))
    assume(min(_out_size(**conv)) >= 1)
    assume(conv["cin"] > 1 or conv["cout"] > 1)  # one in and one out is depthwise
    return conv


def _problem(conv: dict) -> tuple[GemmProblem, tuple[int, int]]:
    """The problem as template._windowed_problem builds it for an NCHW conv."""
    oh, ow = _out_size(**conv)
    groups, cin, cout, (kh, kw) = conv["groups"], conv["cin"], conv["cout"], conv["kernel"]
    h, w, kg = conv["h"], conv["w"], cin * kh * kw
    image = Im2Col(cin, h, w, conv["kernel"], conv["stride"], conv["dilation"], conv["before"], oh, ow, 0,
                   (groups * cin * h * w, cin * h * w))
    return GemmProblem(cout, oh * ow, kg, Operand(kg, 1, 0, (0, cout * kg)), image,
                       Operand(oh * ow, 1, 0, (groups * cout * oh * ow, cout * oh * ow)),
                       (conv["batch"], groups)), (oh, ow)


def _arrays(conv: dict, seed: int):
    rng = np.random.default_rng(seed)
    channels, oc = conv["groups"] * conv["cin"], conv["groups"] * conv["cout"]
    x = rng.standard_normal((conv["batch"], channels, conv["h"], conv["w"])).astype(np.float32)
    weight = rng.standard_normal((oc, conv["cin"]) + conv["kernel"]).astype(np.float32)
    return x, weight, rng.uniform(-1.0, 1.0, oc).astype(np.float32)


def _reference(conv: dict, x, weight, out_size) -> np.ndarray:
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = conv["kernel"], conv["stride"], conv["dilation"], out_size
    before, groups, cin, cout = conv["before"], conv["groups"], conv["cin"], conv["cout"]
    bottom = max(0, (oh - 1) * sh + (kh - 1) * dh + 1 - before[0] - x.shape[2])
    right = max(0, (ow - 1) * sw + (kw - 1) * dw + 1 - before[1] - x.shape[3])
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (before[0], bottom), (before[1], right)))
    y = np.zeros((x.shape[0], groups * cout, oh, ow))
    for g in range(groups):
        for ky in range(kh):
            for kx in range(kw):
                window = xp[:, g * cin:(g + 1) * cin, ky * dh:ky * dh + sh * (oh - 1) + 1:sh,
                            kx * dw:kx * dw + sw * (ow - 1) + 1:sw]
                y[:, g * cout:(g + 1) * cout] += np.einsum("bchw,oc->bohw", window,
                                                           weight[g * cout:(g + 1) * cout, :, ky, kx])
    return y


def _source(name: str, conv: dict, residual: bool, vl: int | None, threads: bool = False) -> str:
    problem, (oh, ow) = _problem(conv)
    channels = conv["groups"] * conv["cout"]
    epilogue = _residual(channels, oh * ow) if residual else BIAS_RELU
    text = grouped_kernel(name, problem, epilogue, vl=vl, threads=threads)
    return f"#include <stdlib.h>\n#define ROWS {conv['cout']}\n{text}"


def _expected(conv: dict, x, weight, p, q, residual: bool) -> np.ndarray:
    want = _reference(conv, x, weight, _out_size(**conv))
    if residual:
        return want * p[None, :, None, None] + q.reshape(want.shape)
    return np.maximum(want + p[None, :, None, None], 0.0)


@settings(max_examples=30, deadline=None)
@given(conv=grouped_convs(), residual=st.booleans(), vl=st.sampled_from([4, 8, 16]), seed=st.integers(0, 2**16))
def test_grouped_kernel_matches_the_window_reference(conv, residual, vl, seed):
    problem, (oh, ow) = _problem(conv)
    assert is_grouped(problem)
    fn = getattr(load_library(build_library([_source("fl_grouped", conv, residual, vl)], opts=[LOOP_OPT])),
                 "fl_grouped")
    x, weight, p = _arrays(conv, seed)
    q = np.random.default_rng(seed + 1).standard_normal(conv["batch"] * conv["groups"] * conv["cout"] * oh * ow)
    q = q.astype(np.float32)
    y = np.full((conv["batch"], conv["groups"] * conv["cout"], oh, ow), np.nan, np.float32)
    assert fn(*[a.ctypes.data_as(ctypes.c_void_p) for a in (weight, x, y, p, q)]) == 0
    np.testing.assert_allclose(y, _expected(conv, x, weight, p, q, residual), rtol=1e-4, atol=1e-4)


@settings(max_examples=8, deadline=None)
@given(conv=grouped_convs(), seed=st.integers(0, 2**16))
def test_grouped_kernel_on_two_threads_gives_the_one_thread_result(conv, seed):
    problem, (oh, ow) = _problem(conv)
    with every_size_in_parallel():
        source = _source("fl_grouped_omp", conv, False, None, threads=True)
    assert "#pragma omp for" in source
    fn, set_threads = _threaded(source, name="fl_grouped_omp")
    x, weight, p = _arrays(conv, seed)
    y = np.empty((conv["batch"], conv["groups"] * conv["cout"], oh, ow), np.float32)
    args = [a.ctypes.data_as(ctypes.c_void_p) for a in (weight, x, y, p, p)]
    one, two = _one_and_two(fn, set_threads, y, *args)
    np.testing.assert_array_equal(one, two)
    np.testing.assert_allclose(one, _expected(conv, x, weight, p, p, False), rtol=1e-4, atol=1e-4)


def test_the_tile_holds_at_most_eight_rows_and_wastes_the_fewest_vectors():
    conv = dict(batch=1, groups=4, cin=8, cout=8, h=14, w=14, kernel=(3, 3), stride=(1, 1), dilation=(1, 1),
                before=(1, 1), after=(1, 1))
    # 14x14: 13 * 16 + 14 floats, 14 vectors: 7 chunks of 2 (3 a chunk would compute 15)
    layout = grouped_layout(_problem(conv)[0], 16)
    assert layout.blocks == ((0, 8),) and (layout.planes.unroll, layout.planes.chunks) == (2, 7)
    layout = grouped_layout(_problem(dict(conv, cout=13))[0], 16)  # two blocks, split evenly
    assert layout.blocks == ((0, 7), (7, 6)) and layout.planes.unroll == 2
    # 7x7: 6 * 9 + 7 floats, 4 vectors: 2 chunks of 2 (of 3, RegNet's 440-channel stage computed 6)
    layout = grouped_layout(_problem(dict(conv, h=7, w=7))[0], 16)
    assert layout.blocks == ((0, 8),) and (layout.planes.unroll, layout.planes.chunks) == (2, 2)
    # 28x28: 27 * 30 + 28 floats, 53 vectors: 18 chunks of 3, 24 accumulators
    layout = grouped_layout(_problem(dict(conv, h=28, w=28))[0], 16)
    assert layout.blocks == ((0, 8),) and (layout.planes.unroll, layout.planes.chunks) == (3, 18)
    layout = grouped_layout(_problem(conv)[0], 8)  # AVX2: 12 accumulators
    assert layout.blocks == ((0, 4), (4, 4)) and layout.planes.unroll == 2


def test_depthwise_wide_groups_and_folded_batches_are_not_grouped():
    conv = dict(batch=1, groups=4, cin=8, cout=8, h=14, w=14, kernel=(3, 3), stride=(1, 1), dilation=(1, 1),
                before=(1, 1), after=(1, 1))
    assert is_grouped(_problem(conv)[0])
    assert not is_grouped(_problem(dict(conv, cin=1, cout=1))[0])  # the depthwise template's
    assert not is_grouped(_problem(dict(conv, cin=MAX_GROUP_CHANNELS + 1))[0])
    assert not is_grouped(_problem(dict(conv, cout=MAX_GROUP_CHANNELS + 1))[0])
    assert not is_grouped(_problem(dict(conv, groups=1))[0])


def _grouped_graph(cin: int, cout: int, groups: int, side: int, stride: int, seed: int = 0, draw=None):
    """relu(a 3x3 grouped conv + bias), or with ``draw`` the conv and a random epilogue."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder("grouped")
    x = b.input("x", (1, groups * cin, side, side))
    feeds = {"x": rng.standard_normal((1, groups * cin, side, side)).astype(np.float32)}
    w = b.constant(rng.standard_normal((groups * cout, cin, 3, 3)).astype(np.float32))
    bias = b.constant(rng.standard_normal(groups * cout).astype(np.float32))
    y = b.conv(x, w, bias, strides=(stride, stride), pads=(1, 1, 1, 1), group=groups)
    out = (side - 1) // stride + 1
    b.output(b.relu(y) if draw is None else _epilogue(draw, b, y, (1, groups * cout, out, out), feeds, rng, 1))
    return b.build(), feeds


@pytest.mark.parametrize("cin, cout, expected", [(8, 8, "grouped"), (16, 16, "grouped"), (1, 1, "depthwise"),
                                                 (MAX_GROUP_CHANNELS + 1, 8, "GEMM")])
def test_regnets_grouped_convs_plan_onto_the_grouped_template(cin, cout, expected):
    graph, _ = _grouped_graph(cin, cout, 6, 14, 1)
    plan = fusionlang.fuse(graph, "apollo")
    planned = [template.plan_template(plan, g, dict(graph.constants)) for g in plan.groups]
    planned = [p for p in planned if p is not None]
    assert len(planned) == 1
    _, source, fallible, kind = template.emit_template(planned[0], "group")
    assert kind == expected
    assert fallible or expected == "depthwise"


@settings(max_examples=6, deadline=None)
@given(groups=st.integers(2, 16), cin=st.integers(1, 17), cout=st.integers(1, 17), side=st.integers(1, 9),
       stride=st.integers(1, 2), data=st.data())
def test_grouped_convs_with_random_epilogues_match_the_reference_on_one_and_two_threads(groups, cin, cout, side,
                                                                                       stride, data):
    graph, feeds = _grouped_graph(cin, cout, groups, side, stride, data.draw(st.integers(0, 2**16)), data.draw)
    check_one_and_two_threads(graph, feeds)


def test_a_failed_scratch_allocation_is_a_resource_error(monkeypatch):
    monkeypatch.setenv("FUSIONLANG_COPT", "-O2 -DFL_ALLOC_LIMIT=4096")
    graph, feeds = _grouped_graph(8, 8, 4, 14, 1)
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c")
    assert "grouped conv template" in compiled.sources
    with pytest.raises(ResourceError, match="out of memory allocating"):
        compiled.run(feeds)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_16_bit_grouped_conv_runs_the_float_kernel_on_widened_operands(dtype):
    rng = np.random.default_rng(3)
    b = GraphBuilder("grouped16")
    x = b.input("x", (1, 24, 9, 9), dtype)
    w = b.input("w", (24, 8, 3, 3), dtype)
    b.output(b.relu(b.conv(x, w, pads=(1, 1, 1, 1), group=3)))
    graph = b.build()
    feeds = {"x": rng.uniform(-2.0, 2.0, (1, 24, 9, 9)).astype(dtype),
             "w": rng.uniform(-2.0, 2.0, (24, 8, 3, 3)).astype(dtype)}
    compiled = compile_model(graph)
    assert "grouped conv template" in compiled.sources
    got, want = compiled.run(feeds), reference.run(graph, feeds)
    scale = magnitude(list(feeds.values()) + list(want.values()))
    for name in want:
        assert got[name].dtype == want[name].dtype
        assert compare(want[name], got[name], scale=scale) is None, compare(want[name], got[name], scale=scale)
