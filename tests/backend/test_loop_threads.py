"""Loop nests with OpenMP: only kernels large enough share their outermost parallel loop,
and sharing it changes no number: each of its iterations, reductions inside included, is
one thread's, so one library gives the same bits on one thread and on two. Against the
build without OpenMP only within rounding: gcc may vectorize a ``simd reduction`` loop of
the two builds differently (a softmax's row sums differed by an ulp in the rows a prefetch
branch skips, at one thread too)."""
from __future__ import annotations

import contextlib
import ctypes

import numpy as np
from helpers import random_feeds, softmax
from hypothesis import given, settings
from strategies import graphs

import fusionlang
from fusionlang.backend import codegen_passes
from fusionlang.engine.plan import single_group_plan
from fusionlang.ops import GraphBuilder


@contextlib.contextmanager
def every_size_in_parallel():
    saved = codegen_passes.PARALLEL_MIN_ELEMENTS
    codegen_passes.PARALLEL_MIN_ELEMENTS = 0
    try:
        yield
    finally:
        codegen_passes.PARALLEL_MIN_ELEMENTS = saved


def _one_and_two_threads(compiled, feeds) -> tuple[dict, dict]:
    """Outputs of an OpenMP build (every core: it sets no team size itself) run by a team
    of one, then of two (the team size of the calling thread, in the library's libgomp)."""
    set_threads = ctypes.CDLL("libgomp.so.1").omp_set_num_threads
    results = []
    for threads in (1, 2):
        set_threads(threads)
        results.append(compiled.run(feeds))
    return results[0], results[1]


def _softmax_of(rows: int, cols: int):
    b = GraphBuilder("rows")
    b.output(softmax(b, b.tanh(b.input("x", (rows, cols)))))
    return b.build()


def test_a_small_kernel_runs_on_the_calling_thread_and_a_large_one_shares_its_rows():
    small, large = _softmax_of(3, 17), _softmax_of(257, 129)
    assert 257 * 129 >= codegen_passes.PARALLEL_MIN_ELEMENTS > 3 * 17
    assert "omp parallel" not in fusionlang.compile(single_group_plan(small), "c", threads=2).sources
    threaded = fusionlang.compile(single_group_plan(large), "c", openmp=True)
    assert "#pragma omp parallel for" in threaded.sources
    feeds = random_feeds(large)
    out = large.outputs[0]
    one, two = _one_and_two_threads(threaded, feeds)
    np.testing.assert_array_equal(two[out], one[out])
    serial = fusionlang.compile(single_group_plan(large), "c").run(feeds)[out]
    np.testing.assert_allclose(two[out], serial, rtol=1e-5, atol=1e-7)


@settings(max_examples=10, deadline=None)
@given(case=graphs(max_ops=5))
def test_fused_loop_nests_on_two_threads_are_bit_equal_to_one_thread(case):
    graph, feeds = case
    plan = fusionlang.fuse(graph, "apollo")
    serial = fusionlang.compile(plan, "c").run(feeds)
    with every_size_in_parallel():
        one, two = _one_and_two_threads(fusionlang.compile(plan, "c", openmp=True), feeds)
    for name in graph.outputs:
        np.testing.assert_array_equal(two[name], one[name])
        np.testing.assert_allclose(two[name], serial[name], rtol=1e-5, atol=1e-6, equal_nan=True)
