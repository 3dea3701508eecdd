"""Generated CUDA on a real GPU (CuPy). Marked ``gpu``: skipped unless CuPy sees a device."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import gelu, layer_norm, random_feeds, softmax
from hypothesis import given, settings
from light import feeds_and_expected, fused_plan
from strategies import graphs

import fusionlang
import fusionlang.backend as backend
from fusionlang import reference
from fusionlang.engine.plan import per_node_plan, single_group_plan
from fusionlang.ops import GraphBuilder

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not backend.cuda_available(), reason="no CUDA device visible to CuPy")]


def check(plan, feeds, rtol=1e-4, atol=1e-5):
    compiled = backend.compile(plan, "cuda")
    got, want = compiled.run(feeds), reference.run(plan.graph, feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=atol, err_msg=name)
    return compiled


@pytest.mark.parametrize("rows,cols", [(1, 1000), (64, 96), (4096, 1024)])
def test_normalizers_on_the_gpu(rows, cols):
    b = GraphBuilder("norms")
    x = b.input("x", (rows, cols))
    b.output(softmax(b, x), softmax(b, x, log=True), gelu(b, x),
             layer_norm(b, x, b.constant(np.ones(cols, np.float32)), b.constant(np.zeros(cols, np.float32))))
    graph = b.build()
    feeds = random_feeds(graph)
    check(single_group_plan(graph), feeds)
    check(per_node_plan(graph), feeds)


@settings(max_examples=20)
@given(graphs())
def test_random_graphs_on_the_gpu(case):
    graph, feeds = case
    check(single_group_plan(graph), feeds)
    check(per_node_plan(graph), feeds)


@pytest.mark.parametrize("name", ["resnet50", "squeezenet", "inception_v1"])
def test_light_models_on_the_gpu(name):
    plan = fused_plan(name)
    feeds, expected = feeds_and_expected(name)
    feeds = {k: v for k, v in feeds.items() if k in plan.graph.inputs}
    out = backend.compile(plan, "cuda").run(feeds)[plan.graph.outputs[0]]
    np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_softmax_on_the_gpu(dtype):
    """16-bit tensors go to the device as their bit patterns (CuPy has no bfloat16)."""
    b = GraphBuilder("rows16")
    x = b.input("x", (64, 300), dtype)
    b.output(softmax(b, x), b.reduce_sum(x, axes=[1], keepdims=0))
    graph = b.build()
    feeds = {"x": np.random.default_rng(0).standard_normal((64, 300)).astype(dtype)}
    got = backend.compile(single_group_plan(graph), "cuda").run(feeds)
    want = reference.run(graph, feeds)
    for name in want:
        assert got[name].dtype == want[name].dtype
        np.testing.assert_allclose(got[name].astype(np.float32), want[name].astype(np.float32), rtol=2e-2,
                                   atol=2e-2 * float(np.abs(want[name].astype(np.float32)).max()), err_msg=name)


@pytest.mark.parametrize("precision", ["fp32", "tf32"])
def test_templates_and_the_replayed_graph_on_the_gpu(precision):
    """Conv and matmul groups as the tensor-core template; the second run captures the
    launches into a CUDA graph, later runs replay it, and every run gives the same numbers."""
    rng = np.random.default_rng(0)
    b = GraphBuilder("templated")
    x = b.input("x", (2, 8, 33, 31))
    c = b.relu(b.conv(x, b.constant(rng.standard_normal((24, 8, 3, 3)).astype(np.float32)), pads=[1, 1, 1, 1]))
    f = b.flatten(b.global_average_pool(c), axis=1)
    b.output(b.matmul(f, b.constant(rng.standard_normal((24, 70)).astype(np.float32))))
    graph = b.build()
    feeds = random_feeds(graph)
    compiled = backend.compile(fusionlang.fuse(graph, "apollo"), "cuda", precision=precision)
    assert any(k.strategy.startswith("GEMM template") for k in compiled.kernels)
    want = reference.run(graph, feeds)
    tolerance = 1e-4 if precision == "fp32" else 2e-2
    for _ in range(3):
        got = compiled.run(feeds)
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=tolerance, atol=tolerance)
    launcher = compiled._runtime.launcher
    assert launcher.graph is not None or launcher.fallback
