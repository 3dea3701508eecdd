"""compile(..., profile=True): each kernel's time per run, its template's parts included,
and the same results as without the clock."""

from __future__ import annotations

import numpy as np
import pytest

import fusionlang
from fusionlang import reference
from fusionlang.errors import CodegenError
from fusionlang.ops import GraphBuilder

RNG = np.random.default_rng(3)


def _graph():
    """A conv with relu (a template), a softmax (a loop nest) and a concat between convs."""
    b = GraphBuilder("profiled")
    x = b.input("x", (1, 3, 10, 10))
    w = b.constant(RNG.standard_normal((6, 3, 3, 3)).astype(np.float32))
    a = b.relu(b.conv(x, w, pads=[1, 1, 1, 1]), name="a")
    c = b.conv(x, b.constant(RNG.standard_normal((2, 3, 1, 1)).astype(np.float32)), name="c")
    cat = b.concat(a, c, axis=1, name="cat")
    b.output(b.softmax(b.tanh(cat), axis=1, name="y"))
    return b.build(), {"x": RNG.standard_normal((1, 3, 10, 10)).astype(np.float32)}


def test_each_kernel_gets_its_time_and_the_results_do_not_change():
    graph, feeds = _graph()
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c", profile=True)
    times = compiled.profile(feeds, runs=3)
    assert [t.kernel for t in times] == compiled.kernels
    assert all(t.seconds > 0 for t in times)
    assert sum(t.share for t in times) == pytest.approx(1.0)
    assert {"seconds", "share", "cpu_seconds", "nodes", "strategy"} <= set(times[0].to_dict())
    np.testing.assert_allclose(compiled.run(feeds)["y"], reference.run(graph, feeds)["y"], rtol=1e-4, atol=1e-6)


def test_a_templates_parts_count_as_its_kernel():
    """A conv with a reduction after it, one group: the reduction runs as the template's
    part after it, so the group makes two calls and reports one kernel."""
    from fusionlang.engine.plan import single_group_plan

    b = GraphBuilder("parts")
    x = b.input("x", (2, 3, 6, 6))
    c = b.relu(b.conv(x, b.constant(RNG.standard_normal((5, 3, 3, 3)).astype(np.float32)), pads=(1, 1, 1, 1)))
    b.output(b.reduce_sum(c, axes=[2, 3], keepdims=1))
    graph = b.build()
    compiled = fusionlang.compile(single_group_plan(graph), "c", profile=True)
    runtime = compiled._runtime
    assert len(compiled.kernels) == 1 and len(runtime.calls) == 2  # the part is a call of its own
    assert runtime.call_kernel == [0, 0]
    (time,) = compiled.profile({"x": RNG.standard_normal((2, 3, 6, 6)).astype(np.float32)}, runs=2)
    assert time.share == 1.0 and time.kernel.strategy == "gemm template"
    # 5 output channels, 6x6 pixels, 3x3x3 taps, 2 images (folded into the columns: small
    # planes): 2 flops per multiply-add
    assert time.kernel.detail == "GEMM m=5 n=72 k=27" and time.kernel.flops == 2 * 5 * 36 * 27 * 2


def test_profile_needs_the_clock_compiled_in():
    graph, feeds = _graph()
    plan = fusionlang.fuse(graph, "apollo")
    with pytest.raises(CodegenError, match="profile=True"):
        fusionlang.compile(plan, "c").profile(feeds)
    with pytest.raises(CodegenError, match="C target only"):
        fusionlang.compile(plan, "cuda-emu", profile=True)
    compiled = fusionlang.compile(plan, "c", profile=True)
    for runs in (0, -1, 1.5, True):
        with pytest.raises(CodegenError, match="runs="):
            compiled.profile(feeds, runs=runs)


def test_each_kernel_gets_the_process_cpu_time_over_its_calls():
    """CPU time beside wall time (what a kernel costs on a busy machine): every kernel
    that computes takes some, and all of them together no more than the process spent
    in profile() (the clock is the process's, read around each call)."""
    import time

    graph, feeds = _graph()
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c", profile=True, threads=1)
    started = time.process_time()
    times = compiled.profile(feeds, runs=20)
    spent = time.process_time() - started
    assert all(t.cpu_seconds > 0 for t in times)
    # profile() runs 21 times and reports the mean of the last 20
    assert sum(t.cpu_seconds for t in times) * 20 <= spent
