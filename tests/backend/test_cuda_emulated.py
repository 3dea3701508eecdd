"""The generated CUDA, executed on the CPU with CUDA's execution model emulated
(target "cuda-emu": a thread per CUDA thread, barriers, warp shuffles, shared memory),
computes what the reference computes. This is how the thread and block mappings, block
reductions and horizontal packs are checked where no GPU exists."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import gelu, layer_norm, random_feeds, softmax
from hypothesis import given, settings
from strategies import graphs

import fusionlang.backend as backend
from fusionlang import reference
from fusionlang.backend.cuda_emu import SHIM, _build
from fusionlang.engine.plan import per_node_plan, single_group_plan
from fusionlang.ops import GraphBuilder


def check(plan, feeds, rtol=1e-4, atol=1e-5):
    compiled = backend.compile(plan, "cuda-emu")
    got, want = compiled.run(feeds), reference.run(plan.graph, feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=atol, err_msg=name)
    return compiled


def test_normalizers_as_one_kernel_each():
    b = GraphBuilder("norms")
    x = b.input("x", (5, 200))
    b.output(softmax(b, x), softmax(b, x, log=True), gelu(b, x),
             layer_norm(b, x, b.constant(np.linspace(0.5, 1, 200, dtype=np.float32)),
                        b.constant(np.zeros(200, np.float32))))
    graph = b.build()
    feeds = random_feeds(graph)
    compiled = check(single_group_plan(graph), feeds)
    assert compiled.stats.kernels == 1
    check(per_node_plan(graph), feeds)


@pytest.mark.parametrize("norm", ["softmax", "layer_norm"])
def test_warp_per_row_mapping_with_rows_longer_than_a_warp_and_a_partial_last_block(norm):
    """37 rows of 70: each warp strides over its row, the last block has idle warps."""
    b = GraphBuilder("short_rows")
    x = b.input("x", (37, 70))
    if norm == "softmax":
        b.output(softmax(b, x))
    else:
        b.output(layer_norm(b, x, b.constant(np.linspace(0.5, 1, 70, dtype=np.float32)),
                            b.constant(np.zeros(70, np.float32))))
    graph = b.build()
    compiled = check(single_group_plan(graph), random_feeds(graph))
    assert "fl_warp_sum_f(p" in compiled.sources and "fl_block_sum_f(p" not in compiled.sources


def test_block_mapping_with_rows_longer_than_the_block():
    b = GraphBuilder("long_rows")
    x = b.input("x", (3, 1500))
    b.output(softmax(b, x))
    graph = b.build()
    compiled = check(single_group_plan(graph), random_feeds(graph))
    assert "fl_block_sum_f" in compiled.sources


def test_conv_epilogue_pool_gather_and_global_reductions():
    b = GraphBuilder("mix")
    x = b.input("x", (2, 3, 9, 9))
    w = b.constant(np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32))
    c = b.relu(b.conv(x, w, b.constant(np.ones(4, np.float32)), pads=[1, 1, 1, 1]))
    p = b.max_pool(c, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    g = b.gather(b.flatten(p, axis=1), b.constant(np.array([5, -1, 0], np.int64)), axis=1)
    total = b.reduce_sum(c, axes=[0, 1, 2, 3], keepdims=0)
    b.output(g, b.global_average_pool(p), total)
    graph = b.build()
    feeds = random_feeds(graph)
    check(single_group_plan(graph), feeds, rtol=1e-4, atol=1e-4)
    check(per_node_plan(graph), feeds, rtol=1e-4, atol=1e-4)


def test_horizontal_pack_runs_both_members():
    b = GraphBuilder("horizontal")
    x = b.input("x", (40, 16))
    y = b.input("y", (9, 7))
    b.output(b.relu(x), b.exp(y))
    graph = b.build()
    plan = per_node_plan(graph)
    plan.horizontal = [[0, 1]]
    compiled = check(plan, random_feeds(graph))
    assert compiled.stats.kernels == 1


@settings(max_examples=8)
@given(graphs(max_ops=5))
def test_random_graphs_single_group(case):
    graph, feeds = case
    check(single_group_plan(graph), feeds)


@settings(max_examples=5)
@given(graphs(max_ops=4))
def test_random_graphs_per_node(case):
    graph, feeds = case
    check(per_node_plan(graph), feeds)


def test_a_barrier_not_reached_by_every_thread_fails_instead_of_hanging(monkeypatch):
    import ctypes

    monkeypatch.setenv("FUSIONLANG_EMU_TIMEOUT", "1")
    src = SHIM + """
extern "C" void bad(float* out) { if (threadIdx.x == 0) __syncthreads(); out[threadIdx.x] = 1.0f; }
extern "C" int run_bad(float* out) { return fl_emu::launch(1, 64, [&] { bad(out); }); }
"""
    lib = ctypes.CDLL(str(_build(src)))
    out = np.zeros(64, np.float32)
    lib.run_bad.restype = ctypes.c_int
    assert lib.run_bad(ctypes.c_void_p(out.ctypes.data)) == 1


def test_values_shared_between_kernels_of_one_group_go_through_memory():
    # a global mean is computed by one kernel and read by the next (no loop is shared)
    b = GraphBuilder("center")
    x = b.input("x", (256, 300))
    b.output(b.sub(x, b.reduce_mean(x, axes=[0, 1], keepdims=1)))
    graph = b.build()
    compiled = check(single_group_plan(graph), random_feeds(graph), rtol=1e-5, atol=1e-6)
    assert compiled.stats.kernels > 1


def _wide_elementwise_graph():
    """66,560 points (over the vectorizing threshold), rows of 260: a row bias (a float4 per
    group), a column scale (a scalar per group), and an output the unit reads back."""
    rng = np.random.default_rng(3)
    b = GraphBuilder("wide")
    x = b.input("x", (256, 260))
    bias = b.constant(rng.standard_normal(260).astype(np.float32))
    scale = b.constant(rng.standard_normal((256, 1)).astype(np.float32))
    h = b.tanh(b.mul(b.add(x, bias), scale))
    b.output(h, b.sigmoid(h))
    return b.build()


def test_wide_elementwise_units_move_rows_as_float4_and_compute_the_same():
    graph = _wide_elementwise_graph()
    compiled = check(single_group_plan(graph), random_feeds(graph))
    assert "const float4 fl_l" in compiled.sources and "*(float4*)&p" in compiled.sources
