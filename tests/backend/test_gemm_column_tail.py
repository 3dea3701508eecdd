"""The column kernel (:data:`gemm_template.TAIL_COLUMNS`): N's last one or two columns past
a whole vector computed as MR-lane vectors a column, against NumPy: every micro-tile of
the machine's (MR a power of two or not: the last step's A read alone), K blocks short
and long (its unrolled sums and the steps after them), packed B, B read in place by rows
and a conv's planes read in place (the direct kernel's offsets), an epilogue on the tile."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_gemm_rows_in_place import rows_in_place_at_any_size
from test_gemm_template import _conv_reference, _loaded, _ptr, _written, blockings, im2col_packing

from fusionlang.backend import gemm_template
from fusionlang.backend.gemm_template import TAIL_COLUMNS, GemmProblem, Im2Col, Operand, gemm_kernel, pack_constant


@settings(max_examples=30, deadline=None)
@given(blocking=blockings(), m=st.integers(2, 40), vectors=st.integers(0, 5), rest=st.integers(1, TAIL_COLUMNS),
       k=st.integers(9, 40), how=st.sampled_from(["packed", "rows", "constant_b"]), epilogue=st.booleans(),
       seed=st.integers(0, 2**16))
def test_the_last_columns_past_a_whole_vector_match_numpy(blocking, m, vectors, rest, k, how, epilogue, seed):
    n = vectors * blocking.vl + rest
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    problem = GemmProblem(m, n, k, Operand(k, 1), Operand(n, 1), Operand(n, 1))
    epi = _written("v = v - 0.5f * (float)i + (float)j;", ()) if epilogue else None
    if how == "rows":
        with rows_in_place_at_any_size():
            source = gemm_kernel("fl_gemm_test", problem, blocking, epi, packed_a=True)
    else:
        source = gemm_kernel("fl_gemm_test", problem, blocking, epi, packed_a=True, packed_b=how == "constant_b")
    assert "fl_gemm_micro_cols_" in source
    b_arg = pack_constant(b, problem, blocking, "b") if how == "constant_b" else b
    c = np.full((m, n), np.nan, np.float32)
    assert _loaded(source, blocking)(_ptr(pack_constant(a, problem, blocking, "a")), _ptr(b_arg), _ptr(c)) == 0
    want = a.astype(np.float64) @ b
    if epilogue:
        want = want - 0.5 * np.arange(m)[:, None] + np.arange(n)[None, :]
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4 * k)


@settings(max_examples=15, deadline=None)
@given(blocking=blockings(), mg=st.integers(2, 20), cg=st.integers(1, 6), side=st.integers(2, 9),
       kernel=st.sampled_from([1, 3]), seed=st.integers(0, 2**16))
def test_a_conv_reading_its_planes_in_place_computes_its_last_columns_by_the_column_kernel(blocking, mg, cg, side,
                                                                                          kernel, seed):
    pad = kernel // 2
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, cg, side, side)).astype(np.float32)
    w = rng.standard_normal((mg, cg, kernel, kernel)).astype(np.float32)
    b = Im2Col(cg, side, side, (kernel, kernel), (1, 1), (1, 1), (pad, pad), side, side)
    problem = GemmProblem(mg, side * side, cg * kernel * kernel, Operand(cg * kernel * kernel, 1), b,
                          Operand(side * side, 1))
    with im2col_packing("direct"):
        reads = gemm_template.reads_planes(problem, blocking.vl)
        source = gemm_kernel("fl_gemm_test", problem, blocking)
    c = np.full((mg, side * side), np.nan, np.float32)
    assert _loaded(source, blocking)(_ptr(w), _ptr(x), _ptr(c)) == 0
    want = _conv_reference(x, w, (1, 1), (1, 1), (pad, pad, pad, pad), 1)
    np.testing.assert_allclose(c, want.reshape(mg, -1), rtol=1e-4, atol=1e-4 * cg * kernel * kernel)
    if reads and 0 < gemm_template._direct_columns(b) % blocking.vl <= TAIL_COLUMNS:
        assert "fl_gemm_micro_cols_direct_" in source
