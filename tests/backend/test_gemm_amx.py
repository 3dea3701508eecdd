"""bfloat16 matmul, gemm and conv on AMX tiles (backend.gemm_amx): planned onto the AMX
kernel where the machine has it, within the K-based tolerance of test_gemm_bf16 (odd M, N
and K, K not a multiple of 32, epilogues, batches, transposes, im2col convs), the same
bits on one and two threads, the scalar fallback of a build without AMX, and the packed
constant layout checked element by element against the view it came from."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_gemm_bf16 import Case, _as, _check, _epilogue, _epilogue_ops, out_of_memory_matmul

import fusionlang
from fusionlang import reference
from fusionlang.backend import gemm_amx, template
from fusionlang.backend.gemm_template import GemmProblem, Operand
from fusionlang.ops import GraphBuilder

needs_amx = pytest.mark.skipif(not gemm_amx.amx_available(), reason="no AMX-BF16 on this CPU or compiler")
AMX_CALL = "fl_amx_block(a, b,"


@pytest.fixture(autouse=True)
def _small_problems_use_the_template(monkeypatch):
    monkeypatch.setattr(template, "MIN_MACS", 0)
    monkeypatch.delenv("FUSIONLANG_AMX", raising=False)


def _sizes(draw):
    # past one 32 x 32 block and one 32-long K step, ragged everywhere
    return tuple(draw(st.integers(1, 70)) for _ in range(3))


def _matmul(draw):
    m, k, n = _sizes(draw)
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    b_batch = batch[draw(st.integers(0, len(batch))):]
    constant = draw(st.booleans())
    ops = _epilogue_ops(draw)

    def body(b, value, absolute):
        y = b.matmul(value("x", batch + (m, k)), value("w", b_batch + (k, n), constant))
        return _epilogue(ops, b, y, batch + (m, n), value, absolute, -1)

    return body


def _gemm(draw):
    m, k, n = _sizes(draw)
    trans_a, trans_b = draw(st.booleans()), draw(st.booleans())
    ops = _epilogue_ops(draw)

    def body(b, value, absolute):
        a = value("a", (k, m) if trans_a else (m, k))
        y = b.gemm(a, value("w", (n, k) if trans_b else (k, n), constant=True), trans_a=int(trans_a),
                   trans_b=int(trans_b))
        return _epilogue(ops, b, y, (m, n), value, absolute, 1)

    return body


def _conv(draw):
    """One image (a batch on small planes folds, and keeps the widened path), 1x1 or im2col;
    with groups of few channels it is the grouped template's (widened)."""
    group = draw(st.integers(1, 2))
    cin, oc = group * draw(st.integers(2, 12)), group * draw(st.integers(1, 20))  # not depthwise
    spatial = tuple(draw(st.integers(3, 9)) for _ in range(2))
    kernel = tuple(draw(st.sampled_from([1, 3])) for _ in range(2))
    strides = tuple(draw(st.integers(1, 2)) for _ in range(2))
    pads = tuple(draw(st.integers(0, 1)) for _ in range(4))
    out = tuple((n + pads[a] + pads[2 + a] - k) // s + 1 for a, (n, k, s) in enumerate(zip(spatial, kernel, strides)))
    ops = _epilogue_ops(draw)

    def body(b, value, absolute):
        y = b.conv(value("x", (1, cin) + spatial), value("w", (oc, cin // group) + kernel, constant=True),
                   strides=strides, pads=pads, group=group)
        return _epilogue(ops, b, y, (1, oc) + out, value, absolute, 1)

    return body


@needs_amx
@settings(max_examples=40, deadline=None)
@given(data=st.data(), kind=st.sampled_from([_matmul, _gemm, _conv]), seed=st.integers(0, 2**16))
def test_bf16_matmuls_gemms_and_convs_run_on_amx_within_the_tolerance(data, kind, seed):
    compiled, _ = _check(Case(seed), "bfloat16", kind(data.draw))
    kinds = [k.detail.split()[0] for k in compiled.kernels if k.strategy == "gemm template"]
    assert (AMX_CALL in compiled.sources) == (kinds == ["GEMM"]), kinds


@needs_amx
def test_a_long_k_of_runtime_operands_batched_like_attention():
    # scores of 2 heads: both operands read at run time, K = 200 (6 steps and a ragged one)
    def body(b, value, absolute):
        return b.matmul(value("q", (2, 45, 200)), value("k", (2, 200, 37))), 0

    compiled, _ = _check(Case(1), "bfloat16", body)
    assert AMX_CALL in compiled.sources


@needs_amx
@pytest.mark.parametrize("op", ["matmul", "conv"])
def test_an_operand_the_epilogue_reads_too(op):
    # x @ x + x (one array as A, B and the residual), and a 1x1 conv plus its own input
    def body(b, value, absolute):
        if op == "matmul":
            x = value("x", (40, 40))
            return b.add(b.matmul(x, x), x), 1
        x = value("x", (1, 48, 9, 9))
        return b.add(b.conv(x, value("w", (48, 48, 1, 1), constant=True)), x), 1

    compiled, _ = _check(Case(11), "bfloat16", body)
    assert AMX_CALL in compiled.sources


@needs_amx
@pytest.mark.parametrize("b_in_l2", [0, 1 << 20])
def test_both_block_orders_with_a_residual_the_epilogue_prefetches(monkeypatch, b_in_l2):
    # B (100 columns) larger than A (40 rows): columns outside unless B fits B_IN_L2
    monkeypatch.setattr(gemm_amx, "B_IN_L2", b_in_l2)

    def body(b, value, absolute):
        y = b.matmul(value("x", (40, 70)), value("w", (70, 100), constant=True))
        return b.add(y, value("r", (40, 100))), 1

    compiled, _ = _check(Case(9), "bfloat16", body)
    rows_first = compiled.sources.index("for (long i0 = 0;") < compiled.sources.index("for (long j0 = n0;")
    assert rows_first == bool(b_in_l2)
    assert ("__builtin_prefetch" in compiled.sources) != rows_first


@needs_amx
def test_two_threads_give_the_same_bits_as_one(monkeypatch):
    monkeypatch.setattr(gemm_amx, "PARALLEL_MIN_MACS", 0)

    def body(b, value, absolute):
        y = b.conv(value("x", (1, 16, 20, 20)), value("w", (40, 16, 3, 3), constant=True), pads=(1, 1, 1, 1))
        return (y if absolute else b.relu(y)), 0

    graph, feeds, _ = Case(5).build("bfloat16", body)
    plan = fusionlang.fuse(graph, "apollo")
    one = fusionlang.compile(plan, "c")
    two = fusionlang.compile(plan, "c", threads=2)
    assert AMX_CALL in two.sources and "#pragma omp parallel if" in two.sources
    got_one, got_two = one.run(feeds), two.run(feeds)
    for name in got_one:
        np.testing.assert_array_equal(got_two[name].view(np.uint16), got_one[name].view(np.uint16))
    _check(Case(5), "bfloat16", body, openmp=True)


def test_a_build_without_amx_runs_the_same_packed_operands_on_the_scalar_fallback(monkeypatch):
    # the planner's choice kept, the compiler told the CPU has no AMX: FL_AMX is 0 and the
    # kernel multiplies the packed operands itself
    monkeypatch.setattr(gemm_amx, "amx_available", lambda: True)
    monkeypatch.setattr(template, "amx_available", lambda: True)
    monkeypatch.setenv("FUSIONLANG_COPT", "-O2 -mno-amx-tile -mno-amx-bf16 -mno-amx-int8")

    def body(b, value, absolute):
        y = b.matmul(value("x", (33, 70)), value("w", (70, 49), constant=True))
        return b.add(y, value("r", (33, 49))), 1

    compiled, _ = _check(Case(2), "bfloat16", body)
    assert AMX_CALL in compiled.sources


def test_without_amx_on_the_cpu_bf16_keeps_the_widened_path(monkeypatch):
    monkeypatch.setattr(gemm_amx, "cpu_features", lambda: frozenset({"avx512f", "avx512vl"}))

    def body(b, value, absolute):
        return b.matmul(value("x", (20, 40)), value("w", (40, 24), constant=True)), 0

    compiled, _ = _check(Case(3), "bfloat16", body)
    assert AMX_CALL not in compiled.sources and "_f = (float *)fl_alloc" in compiled.sources


@needs_amx
def test_infinities_overflow_and_nan_as_the_reference_and_subnormals_flushed():
    info = ml_dtypes.finfo(ml_dtypes.bfloat16)
    specials = [float(info.max), -float(info.max), np.inf, -np.inf, np.nan, 0.0, -0.0, 1.0, 3.0,
                float(info.tiny), float(info.smallest_subnormal), 2.5]
    x = _as("bfloat16", np.array(specials * 2).reshape(-1, 2))
    b = GraphBuilder("specials")
    xi = b.input("x", x.shape, "bfloat16")
    b.output(b.matmul(xi, b.constant(_as("bfloat16", [[1.0, 0.5, 1.0], [0.0, 2.0, 1.0]]))))
    graph = b.build()
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c")
    assert AMX_CALL in compiled.sources
    got = compiled.run({"x": x})[graph.outputs[0]].astype(np.float32)
    want = reference.run(graph, {"x": x})[graph.outputs[0]].astype(np.float32)
    normal = ~(np.abs(want) < info.tiny) | (want == 0)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[normal & ~np.isnan(want)], want[normal & ~np.isnan(want)])
    assert np.isinf(want).any() and (~normal).any()
    assert (got[~normal] == 0).all()  # TDPBF16PS reads and writes subnormals as zero


@needs_amx
def test_a_packing_buffer_that_cannot_be_allocated_is_a_one_line_resource_error(monkeypatch):
    from fusionlang.errors import ResourceError

    compiled, kernel, feeds = out_of_memory_matmul(monkeypatch, 65536, 256, 200)
    assert AMX_CALL in compiled.sources
    # A packed: 256 rows of K = 200 padded to 224, 2 bytes each
    with pytest.raises(ResourceError, match=rf"^out of memory allocating {256 * 224 * 2} bytes in kernel {kernel.name}$"):
        compiled.run(feeds)


@settings(max_examples=30, deadline=None)
@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 70), outer=st.integers(1, 3),
       shared=st.booleans(), transposed=st.booleans(), which=st.sampled_from("ab"))
def test_a_packed_constant_holds_each_element_where_the_kernel_reads_it(m, n, k, outer, shared, transposed, which):
    rows, cols = (1, (m if which == "a" else k)) if transposed else ((k if which == "a" else n), 1)
    size = (m if which == "a" else n) * k
    stride = 0 if shared else size
    view = Operand(rows, cols, 0, (stride,))
    plain = Operand(k if which == "a" else n, 1, 0, (0,))
    a, b = (view, plain) if which == "a" else (plain, view)
    problem = GemmProblem(m, n, k, a, b, Operand(n, 1, 0, (m * n,)), (outer,))
    flat = np.arange(size * outer, dtype=np.float32) % 251
    packed = gemm_amx.pack_constant_amx(flat, problem, which).view(np.uint16)
    mp, np_, kp = gemm_amx.padded_sizes(problem)
    per = gemm_amx.packed_elements(problem, which)
    assert packed.size == per * (1 if shared else outer)
    for o in range(1 if shared else outer):
        block = packed[o * per:(o + 1) * per]
        for s in range(mp if which == "a" else np_):
            for p in range(kp):
                at = s * kp + p if which == "a" else (s // 16) * kp * 16 + (p // 2) * 32 + (s % 16) * 2 + p % 2
                inside = s < (m if which == "a" else n) and p < k
                element = (s * rows + p * cols) if which == "a" else (p * rows + s * cols)
                want = _as("bfloat16", flat[o * stride + element]).view(np.uint16) if inside else 0
                assert block[at] == want, (o, s, p)


def _chunked_conv(draw):
    """An im2col conv whose output rows a 32-column chunk cuts anywhere: wide rows (the
    stride-2 gather's 16-lane path), kernels up to the 7x7 stem's, strides 1 to 3, pads."""
    kernel = draw(st.sampled_from([1, 3, 7]))
    cin, oc = draw(st.integers(2, 5)), draw(st.integers(1, 40))  # one channel: depthwise
    spatial = (draw(st.integers(kernel, kernel + 4)), draw(st.integers(kernel, 48)))
    strides = tuple(draw(st.integers(1, 3)) for _ in range(2))
    pads = tuple(draw(st.integers(0, kernel // 2)) for _ in range(4))
    out = tuple((n + pads[a] + pads[2 + a] - kernel) // s + 1 for a, (n, s) in enumerate(zip(spatial, strides)))
    ops = _epilogue_ops(draw)

    def body(b, value, absolute):
        y = b.conv(value("x", (1, cin) + spatial), value("w", (oc, cin, kernel, kernel), constant=True),
                   strides=strides, pads=pads)
        return _epilogue(ops, b, y, (1, oc) + out, value, absolute, 1)

    return body


def _chunked_matmul(draw):
    """B read at run time, as it lies or transposed (a column stride: its rows gathered)."""
    m, k, n = draw(st.integers(1, 40)), draw(st.integers(1, 70)), draw(st.integers(33, 140))
    transposed = draw(st.booleans())
    ops = _epilogue_ops(draw)

    def body(b, value, absolute):
        w = b.transpose(value("w", (n, k)), perm=[1, 0]) if transposed else value("w", (k, n))
        return _epilogue(ops, b, b.matmul(value("x", (m, k)), w), (m, n), value, absolute, -1)

    return body


@needs_amx
@settings(max_examples=30, deadline=None)
@given(data=st.data(), kind=st.sampled_from([_chunked_conv, _chunked_matmul]), seed=st.integers(0, 2**16),
       chunk_bytes=st.sampled_from([1, 5000, 1 << 18]))
def test_a_runtime_b_packed_a_chunk_of_columns_at_a_time_on_one_and_two_threads(data, kind, seed, chunk_bytes):
    # 1 byte: one 32-column block per chunk, the last one ragged; 5000: a few blocks
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gemm_amx, "B_CHUNK", chunk_bytes)
        patch.setattr(gemm_amx, "PARALLEL_MIN_MACS", 0)
        body = kind(data.draw)
        compiled, _ = _check(Case(seed), "bfloat16", body)
        assert AMX_CALL in compiled.sources
        graph, feeds, _ = Case(seed).build("bfloat16", body)
        two = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c", threads=2)
    assert "#pragma omp for schedule(static)" in two.sources
    got_one, got_two = compiled.run(feeds), two.run(feeds)
    for name in got_one:
        np.testing.assert_array_equal(got_two[name].view(np.uint16), got_one[name].view(np.uint16))
