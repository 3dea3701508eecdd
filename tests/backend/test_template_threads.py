"""The CPU GEMM and depthwise templates with OpenMP: two threads give the one-thread
numbers bit for bit.

Each thread packs whole slivers and computes whole tiles; every element of C is still one
thread's sum over K in the same blocked order, so the partition changes no rounding. The
size threshold (``PARALLEL_MIN_MACS``) is 0 here so that even the tiny problems run as a
team; the edges the partition meets are the odd shapes: m or n of 1, 3 and 17 (fewer
slivers or tiles than threads, a last short sliver), batch 1 and every conv attribute. A
depthwise conv shares its (image, channel) planes, each one thread's."""
from __future__ import annotations

import contextlib
import ctypes

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_depthwise_template import _problem as depthwise_problem
from test_gemm_template import _conv_reference, _ptr, blockings, im2col_packing, long_k_blockings

from fusionlang.backend import gemm_template
from fusionlang.backend.ccompile import build_library, load_library
from fusionlang.backend.depthwise_template import depthwise_kernel
from fusionlang.backend.gemm_template import GemmProblem, Im2Col, Operand, gemm_kernel, pack_constant, vector_types
from fusionlang.backend.machine import host

ODD = st.sampled_from([1, 3, 17]) | st.integers(1, 40)


@contextlib.contextmanager
def every_size_in_parallel():
    saved = gemm_template.PARALLEL_MIN_MACS
    gemm_template.PARALLEL_MIN_MACS = 0
    try:
        yield
    finally:
        gemm_template.PARALLEL_MIN_MACS = saved


def _threaded(source: str, blocking=None, name: str = "fl_gemm_test"):
    """``name`` of ``source`` built with OpenMP, and a setter of its team size."""
    unit = "#include <stdlib.h>\n" + (vector_types(blocking.vl) if blocking else "") + source
    lib = load_library(build_library([unit], openmp=True), openmp=True)
    fn = getattr(lib, name)
    fn.restype = ctypes.c_int
    # the library's libgomp (by its soname: the one already in the process, if any)
    return fn, ctypes.CDLL("libgomp.so.1").omp_set_num_threads


def _one_and_two(fn, set_threads, out: np.ndarray, *args) -> tuple[np.ndarray, np.ndarray]:
    results = []
    for threads in (1, 2):
        set_threads(threads)
        out[...] = np.nan
        assert fn(*args) == 0
        results.append(out.copy())
    set_threads(2)
    return results[0], results[1]


@settings(max_examples=20, deadline=None)
@given(m=ODD, n=ODD, k=st.integers(1, 29), packed_a=st.booleans(), packed_b=st.booleans(), blocking=blockings(),
       seed=st.integers(0, 2**16))
def test_a_matmul_on_two_threads_is_bit_equal_to_one(m, n, k, packed_a, packed_b, blocking,
                                                     seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    problem = GemmProblem(m, n, k, Operand(k, 1), Operand(n, 1), Operand(n, 1))
    a_arg = pack_constant(a.ravel(), problem, blocking, "a") if packed_a else a
    b_arg = pack_constant(b.ravel(), problem, blocking, "b") if packed_b else b
    with every_size_in_parallel():
        source = gemm_kernel("fl_gemm_test", problem, blocking, packed_a=packed_a, packed_b=packed_b, threads=True)
    fn, set_threads = _threaded(source, blocking)
    one, two = _one_and_two(fn, set_threads, c, _ptr(a_arg), _ptr(b_arg), _ptr(c))
    np.testing.assert_array_equal(two, one)
    np.testing.assert_allclose(one, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * k)


@settings(max_examples=15, deadline=None)
@given(m=ODD, n=st.integers(1, 150), k=st.integers(16, 60), trans_a=st.booleans(), trans_b=st.booleans(),
       blocking=long_k_blockings(), seed=st.integers(0, 2**16))
def test_a_transposed_operands_matmul_on_two_threads_is_bit_equal_to_one(m, n, k, trans_a, trans_b, blocking, seed):
    # A^T's and B^T's packing routines split by whole slivers too; one A block for several
    # B panels is packed once by the team
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    problem = GemmProblem(m, n, k, Operand(1, m) if trans_a else Operand(k, 1),
                          Operand(1, k) if trans_b else Operand(n, 1), Operand(n, 1))
    with every_size_in_parallel():
        source = gemm_kernel("fl_gemm_test", problem, blocking, threads=True)
    fn, set_threads = _threaded(source, blocking)
    one, two = _one_and_two(fn, set_threads, c, _ptr(a), _ptr(b), _ptr(c))
    np.testing.assert_array_equal(two, one)
    want = (a.T if trans_a else a).astype(np.float64) @ (b.T if trans_b else b)
    np.testing.assert_allclose(one, want, rtol=1e-4, atol=1e-4 * k)


@settings(max_examples=20, deadline=None)
@given(packing=st.sampled_from(["gather", "copies", "runs"]), group=st.integers(1, 3), cg=st.integers(1, 3),
       mg=st.sampled_from([1, 3, 17]), h=st.integers(1, 13), wd=st.integers(1, 13), kh=st.integers(1, 3),
       kw=st.integers(1, 3), stride=st.tuples(st.integers(1, 4), st.integers(1, 4)),
       dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)), pads=st.tuples(st.integers(0, 2), st.integers(0, 2)),
       blocking=blockings(), seed=st.integers(0, 2**16))
def test_a_batch_1_conv_on_two_threads_is_bit_equal_to_one(packing, group, cg, mg, h, wd,
                                                           kh, kw, stride, dilation, pads, blocking, seed):
    oh = (h + 2 * pads[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pads[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    if oh < 1 or ow < 1:
        return
    rng = np.random.default_rng(seed)
    cin, oc, kg = cg * group, mg * group, cg * kh * kw
    x = rng.standard_normal((1, cin, h, wd)).astype(np.float32)
    w = rng.standard_normal((oc, cg, kh, kw)).astype(np.float32)
    problem = GemmProblem(mg, oh * ow, kg, Operand(kg, 1, 0, (0, mg * kg)),
                          Im2Col(cg, h, wd, (kh, kw), stride, dilation, pads, oh, ow, 0, (cin * h * wd, cg * h * wd)),
                          Operand(oh * ow, 1, 0, (oc * oh * ow, mg * oh * ow)), (1, group))
    y = np.zeros((1, oc, oh, ow), np.float32)
    packed = pack_constant(w, problem, blocking, "a")
    with im2col_packing(packing), every_size_in_parallel():
        source = gemm_kernel("fl_gemm_test", problem, blocking, packed_a=True, threads=True)
    fn, set_threads = _threaded(source, blocking)
    one, two = _one_and_two(fn, set_threads, y, _ptr(packed), _ptr(x), _ptr(y))
    np.testing.assert_array_equal(two, one)
    np.testing.assert_allclose(one, _conv_reference(x, w, stride, dilation, pads, group), rtol=1e-4,
                               atol=1e-4 * kg)



@settings(max_examples=15, deadline=None)
@given(channels=st.sampled_from([1, 3, 17]), h=st.integers(1, 12), w=st.integers(1, 12),
       kernel=st.tuples(st.integers(1, 3), st.integers(1, 5)), stride=st.tuples(st.integers(1, 2), st.integers(1, 3)),
       dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)), pads=st.tuples(st.integers(0, 2), st.integers(0, 2)),
       seed=st.integers(0, 2**16))
def test_a_batch_1_depthwise_conv_on_two_threads_is_bit_equal_to_one(channels, h, w, kernel, stride, dilation, pads,
                                                                     seed):
    problem, (oh, ow) = depthwise_problem(1, channels, h, w, kernel, stride, dilation, pads)
    if oh < 1 or ow < 1:
        return
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, channels, h, w)).astype(np.float32)
    weight = rng.standard_normal((channels, 1) + kernel).astype(np.float32)
    y = np.zeros((1, channels, oh, ow), np.float32)
    with every_size_in_parallel():
        source = depthwise_kernel("fl_dw_test", problem, threads=True)
    assert "omp parallel" in source
    fn, set_threads = _threaded(source, name="fl_dw_test")
    one, two = _one_and_two(fn, set_threads, y, _ptr(weight), _ptr(x), _ptr(y))
    np.testing.assert_array_equal(two, one)
    np.testing.assert_allclose(one, _conv_reference(x, weight, stride, dilation, pads, channels), rtol=1e-4,
                               atol=1e-4)


def test_small_templates_run_on_the_calling_thread():
    # 3 channels of 5x5 with 3x3 taps, and a 3x17x5 product: far below the threshold
    depthwise, _ = depthwise_problem(1, 3, 5, 5, (3, 3), (1, 1), (1, 1), (1, 1))
    assert "omp parallel" not in depthwise_kernel("fl_dw_test", depthwise, threads=True)
    gemv = GemmProblem(1, 17, 5, Operand(5, 1), Operand(1, 5), Operand(17, 1))
    blocking = gemm_template.blocking_for(host(), gemv)
    assert "omp parallel" not in gemm_kernel("fl_gemm_test", gemv, blocking, threads=True)
