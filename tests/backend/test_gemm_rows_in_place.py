"""A GEMM reading its row-major B in place (:func:`gemm_template.reads_rows`: a pointwise
conv's input as it lies, few rows of A) against NumPy, N and K past the skinny kernels'
(:func:`gemm_template.gemv_kind`): N whole vectors or not (the last
sliver from its padded copy), several K blocks, MC and NC blocks, batches whose B steps
or is shared, A packed at compile time or not, an epilogue reading its row and column,
one and two threads (bit for bit)."""

from __future__ import annotations

import contextlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_gemm_template import _loaded, _ptr, _written, blockings, long_k_blockings
from test_template_threads import _one_and_two, _threaded, every_size_in_parallel

from fusionlang.backend import gemm_template
from fusionlang.backend.gemm_template import (GemmProblem, Operand, blocking_for, gemm_kernel, pack_constant,
                                              packing_floats, reads_rows)
from fusionlang.backend.machine import machine_for


@contextlib.contextmanager
def rows_in_place_at_any_size():
    saved = gemm_template.ROWS_IN_PLACE_MIN_N
    gemm_template.ROWS_IN_PLACE_MIN_N = 1
    try:
        yield
    finally:
        gemm_template.ROWS_IN_PLACE_MIN_N = saved


def _problem(m: int, n: int, k: int, batch: tuple[int, ...], shared_b: bool) -> GemmProblem:
    outer = (m * k,) if batch else ()
    b_outer = ((0 if shared_b else k * n),) if batch else ()
    return GemmProblem(m, n, k, Operand(k, 1, 0, outer), Operand(n, 1, 0, b_outer),
                       Operand(n, 1, 0, (m * n,) if batch else ()), batch)


def _operands(rng, m, n, k, batch, shared_b):
    a = rng.standard_normal(batch + (m, k)).astype(np.float32)
    b = rng.standard_normal(((1,) if shared_b and batch else batch) + (k, n)).astype(np.float32)
    return a, b


EPILOGUE = _written("v = v * 0.5f + (float)i - 0.25f * (float)j;\nv = v > -3.0f ? v : -3.0f;", ())


def _want(a, b, m, n):
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64)) * 0.5 + np.arange(m)[:, None] \
        - 0.25 * np.arange(n)[None, :]
    return np.maximum(ref, -3.0)


@settings(max_examples=30, deadline=None)
@given(m=st.integers(2, 40), n=st.integers(9, 150), k=st.integers(9, 90), batch=st.sampled_from([(), (2,)]),
       shared_b=st.booleans(), packed_a=st.booleans(), epilogue=st.booleans(),
       blocking=st.one_of(blockings(), long_k_blockings()), seed=st.integers(0, 2**16))
def test_a_gemm_reading_b_rows_in_place_matches_numpy(m, n, k, batch, shared_b, packed_a, epilogue, blocking, seed):
    rng = np.random.default_rng(seed)
    problem = _problem(m, n, k, batch, shared_b)
    a, b = _operands(rng, m, n, k, batch, shared_b)
    with rows_in_place_at_any_size():
        assert reads_rows(problem, blocking.vl)
        source = gemm_kernel("fl_gemm_test", problem, blocking, EPILOGUE if epilogue else None, packed_a=packed_a)
    assert "fl_gemm_micro_direct_" in source and "fl_gemm_pack_b" not in source
    c = np.full(batch + (m, n), np.nan, np.float32)
    a_arg = pack_constant(a, problem, blocking, "a") if packed_a else a
    # B alone in its own array, exactly its size: a read past its end is not masked by a neighbour
    b_arg = np.ascontiguousarray(b)
    assert _loaded(source, blocking)(_ptr(a_arg), _ptr(b_arg), _ptr(c)) == 0
    want = _want(a, b, m, n) if epilogue else np.matmul(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4 * max(1, k))


@settings(max_examples=12, deadline=None)
@given(m=st.sampled_from([2, 3, 17, 40]), n=st.sampled_from([9, 17, 64, 97]), k=st.integers(9, 60),
       epilogue=st.booleans(), blocking=long_k_blockings(), seed=st.integers(0, 2**16))
def test_a_gemm_reading_b_rows_in_place_on_two_threads_is_bit_equal_to_one(m, n, k, epilogue, blocking, seed):
    rng = np.random.default_rng(seed)
    problem = _problem(m, n, k, (), False)
    a, b = _operands(rng, m, n, k, (), False)
    with rows_in_place_at_any_size(), every_size_in_parallel():
        source = gemm_kernel("fl_gemm_test", problem, blocking, EPILOGUE if epilogue else None, threads=True)
    assert "fl_gemm_micro_direct_" in source
    fn, set_threads = _threaded(source, blocking)
    c = np.zeros((m, n), np.float32)
    one, two = _one_and_two(fn, set_threads, c, _ptr(a), _ptr(b), _ptr(c))
    np.testing.assert_array_equal(two, one)
    want = _want(a, b, m, n) if epilogue else a.astype(np.float64) @ b
    np.testing.assert_allclose(one, want, rtol=1e-4, atol=1e-4 * k)


def test_only_few_rows_of_a_short_k_and_many_columns_read_b_in_place():
    machine = machine_for("avx512", l1d=48 * 1024, l2=2 << 20, l3=256 << 20)
    pointwise = _problem(16, 112 * 112, 32, (), False)
    assert reads_rows(pointwise, 16)
    assert not reads_rows(_problem(gemm_template.ROWS_IN_PLACE_MAX_M + 1, 112 * 112, 32, (), False), 16)
    assert not reads_rows(_problem(16, 7 * 7, 32, (), False), 16)  # a short row: packed
    assert not reads_rows(_problem(16, 112 * 112, gemm_template.ROWS_IN_PLACE_MAX_K + 1, (), False), 16)
    assert not reads_rows(pointwise, 16, packed_b=True)
    transposed = GemmProblem(16, 12544, 32, Operand(32, 1), Operand(1, 32), Operand(12544, 1))
    assert not reads_rows(transposed, 16)
    bl = blocking_for(machine, pointwise, conv=True)
    # no B panel: the offsets (two K's longs) and the last sliver's copy, besides A's block
    assert packing_floats(pointwise, bl, packed_a=True) == 4 * 32 + 32 * bl.nr
