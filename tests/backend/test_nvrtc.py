"""Generated CUDA compiles with NVRTC (no GPU needed): the test graphs and the light models.

If NVRTC cannot be loaded at all these tests are skipped with a loud reason; with the
``nvidia-cuda-nvrtc-cu12`` wheel installed (a test dependency) they always run.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import gelu, layer_norm, softmax
from hypothesis import given, settings
from hypothesis import strategies as st
from light import LIGHT_MODELS, fused_plan
from strategies import graphs

import fusionlang.backend as backend
from fusionlang.engine.plan import per_node_plan, single_group_plan
from fusionlang.ops import GraphBuilder

UNAVAILABLE = backend.nvrtc_available()
pytestmark = pytest.mark.skipif(UNAVAILABLE is not None,
                                reason=f"NVRTC CANNOT BE LOADED, generated CUDA is NOT compiled: {UNAVAILABLE}")


def compile_all(plan) -> int:
    sources = backend.cuda_sources(plan)
    for name, source in sources.items():
        ptx = backend.nvrtc_compile(source)
        assert ".entry" in ptx, name
    return len(sources)


def block(build, shape=(64, 96)):
    b = GraphBuilder("block")
    x = b.input("x", shape)
    b.output(build(b, x))
    return b.build()


BLOCKS = {
    "softmax": lambda b, x: softmax(b, x),
    "log_softmax": lambda b, x: softmax(b, x, log=True),
    "layer_norm": lambda b, x: layer_norm(b, x, b.constant(np.ones(96, np.float32)),
                                          b.constant(np.zeros(96, np.float32))),
    "gelu": gelu,
}


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_normalizer_blocks_are_one_kernel_and_compile(name):
    graph = block(BLOCKS[name])
    sources = backend.cuda_sources(single_group_plan(graph))
    (source,) = sources.values()
    assert source.count('extern "C" __global__') == 1
    assert compile_all(single_group_plan(graph)) == 1
    compile_all(per_node_plan(graph))


def _kernel_text(graph) -> str:
    """The group's own code (after the shared helpers every unit starts with)."""
    source = next(iter(backend.cuda_sources(single_group_plan(graph)).values()))
    return source[source.index("static __device__ void fl_c_"):]


def test_short_rows_run_a_warp_per_row_reduced_by_shuffles():
    text = _kernel_text(block(BLOCKS["softmax"], (12288, 128)))  # attention's rows: never a thread per row
    assert "fl_warp_max_f(" in text and "fl_warp_sum_f(" in text and "fl_block_" not in text
    assert "__shared__ float fl_w_b" in text and "__syncthreads" not in text and "fl_lane" in text


def test_long_rows_run_a_block_per_row_reduced_through_shared_memory():
    text = _kernel_text(block(BLOCKS["softmax"], (64, 3000)))
    assert "fl_block_max_f(" in text and "fl_block_sum_f(" in text and "fl_warp_" not in text


def test_conv_pool_and_data_dependent_reads_compile():
    b = GraphBuilder("mix")
    x = b.input("x", (1, 4, 12, 12))
    w = b.constant(np.ones((8, 4, 3, 3), np.float32))
    c = b.relu(b.conv(x, w, pads=[1, 1, 1, 1]))
    p = b.max_pool(c, kernel_shape=[2, 2], strides=[2, 2])
    g = b.gather(b.flatten(p, axis=1), b.constant(np.array([3, 1, 0], np.int64)), axis=1)
    b.output(g, b.global_average_pool(p))
    graph = b.build()
    compile_all(single_group_plan(graph))
    compile_all(per_node_plan(graph))


def test_horizontal_packs_compile_as_one_kernel():
    b = GraphBuilder("horizontal")
    x = b.input("x", (32, 16))
    y = b.input("y", (8, 8))
    b.output(b.relu(x), b.exp(y))
    graph = b.build()
    plan = per_node_plan(graph)
    plan.horizontal = [[0, 1]]
    sources = backend.cuda_sources(plan)
    packs = [s for n, s in sources.items() if n.startswith("fl_h_")]
    assert len(packs) == 1 and backend.nvrtc_compile(packs[0])


@settings(max_examples=10)
@given(graphs())
def test_random_graphs_compile(case):
    graph, _ = case
    compile_all(single_group_plan(graph))


@pytest.mark.slow
@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_model_kernels_compile(name):
    assert compile_all(fused_plan(name)) > 0


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["log_softmax", "softmax"])  # (the other blocks' constants are float32)
def test_16_bit_blocks_compile(name, dtype):
    """16-bit tensors are unsigned short patterns converted by the half helpers, which
    NVRTC compiles without cuda_fp16.h (no include path needed)."""
    b = GraphBuilder("block16")
    x = b.input("x", (64, 96), dtype)
    b.output(BLOCKS[name](b, x))
    graph = b.build()
    source = next(iter(backend.cuda_sources(single_group_plan(graph)).values()))
    assert "const unsigned short*" in source and "fl_f2" in source
    assert compile_all(single_group_plan(graph)) == 1
    compile_all(per_node_plan(graph))


@settings(max_examples=6)
@given(st.sampled_from(["float16", "bfloat16"]).flatmap(lambda dtype: graphs(dtype=dtype)))
def test_random_16_bit_graphs_compile(case):
    graph, _ = case
    compile_all(single_group_plan(graph))


def test_wide_elementwise_kernels_load_and_store_16_bytes_at_a_time():
    """The float4 rows of a thread-mapped unit are 16-byte instructions in the PTX."""
    b = GraphBuilder("wide")
    x = b.input("x", (4096, 1024))
    b.output(gelu(b, b.add(x, b.constant(np.linspace(-1, 1, 1024, dtype=np.float32)))))
    (source,) = backend.cuda_sources(single_group_plan(b.build())).values()
    ptx = backend.nvrtc_compile(source)
    assert re.search(r"ld\.global(\.nc)?\.v4\.f32", ptx) and re.search(r"st\.global\.v4\.f32", ptx)
