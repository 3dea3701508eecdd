"""The GEMM template alone: every operand form, blocking edge and micro-tile against NumPy.

Blockings are drawn small (a KC of 1 to 9, one or two MR/NR slivers per block) so that every
edge of the loop structure is crossed by small problems: K not a multiple of KC, M and N not
multiples of the micro-tile, several NC and MC blocks, a single row or column.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import operator
import re

import numpy as np
import pytest
import sympy as sp
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fusionlang.backend.ccompile import build_library, load_library
from fusionlang.backend.cexpr import C
from fusionlang.backend.epilogue import Assign, Define, Load, Text, next_rows_prefetches, statements_text
from fusionlang.backend.gemm_template import (MICRO_TILES, Blocking, Epilogue, GemmProblem, Im2Col, NumberedIndex,
                                              Numbers, Operand, blocking_for, gemm_function, gemm_kernel,
                                              pack_constant, packing_floats, vector_types)
from fusionlang.backend import gemm_template
from fusionlang.backend.machine import _parse_size, host, machine_for

ISAS = ["avx512", "avx2", "generic"] if host().isa == "avx512" else [host().isa, "generic"]


I, J, O0, O1 = (sp.Symbol(n, integer=True, nonnegative=True) for n in ("i", "j", "o0", "o1"))


def _written(body: str, params=("const float *restrict bias",)) -> Epilogue:
    """An epilogue of statements as written (no index the template prints)."""
    return Epilogue(tuple(Text(line) for line in body.splitlines()), params)


def _kernel(problem, blocking, epilogue=None, **packed):
    return _loaded(gemm_kernel("fl_gemm_test", problem, blocking, epilogue, **packed), blocking)


def _loaded(source: str, blocking):
    """``fl_gemm_test`` of ``source``, compiled."""
    fn = load_library(build_library(["#include <stdlib.h>\n" + vector_types(blocking.vl) + source])).fl_gemm_test
    fn.restype = ctypes.c_int
    return fn


def _shared_library(blocking, helpers: dict, sources: list[str]):
    """One library of ``sources`` and the shared routines they collected in ``helpers``."""
    unit = "#include <stdlib.h>\n" + vector_types(blocking.vl) + "".join(helpers.values()) + "\n".join(sources)
    return load_library(build_library([unit]))


def _ptr(a: np.ndarray):
    return a.ctypes.data_as(ctypes.c_void_p)


@st.composite
def blockings(draw):
    isa = draw(st.sampled_from(ISAS))
    vl = machine_for(isa).vector_floats
    mr, nv = draw(st.sampled_from(MICRO_TILES[isa]))
    kc = draw(st.integers(1, 9))
    return Blocking(vl, mr, nv, kc, mr * draw(st.integers(1, 2)), vl * nv * draw(st.integers(1, 2)))


@settings(max_examples=25)
@given(m=st.one_of(st.just(1), st.integers(1, 31)), n=st.integers(1, 37), k=st.integers(0, 23), trans_a=st.booleans(),
       trans_b=st.booleans(), batch=st.sampled_from([(), (2,), (2, 3)]), bcast=st.booleans(),
       packed=st.sampled_from(["none", "a", "b"]), blocking=blockings(), seed=st.integers(0, 2**16))
def test_gemm_matches_numpy_for_every_operand_form_and_blocking_edge(m, n, k, trans_a, trans_b, batch, bcast,
                                                                       packed, blocking, seed):
    rng = np.random.default_rng(seed)
    a_batch = batch[:-1] + (1,) if (bcast and batch) else batch  # the last batch dim broadcast for A
    a = rng.standard_normal(a_batch + ((k, m) if trans_a else (m, k))).astype(np.float32)
    b = rng.standard_normal(batch + ((n, k) if trans_b else (k, n))).astype(np.float32)

    def view(arr, own_batch, rows, cols, transposed):
        strides = [s // 4 for s in arr.strides]
        outer = tuple(0 if own_batch[d] == 1 and batch[d] != 1 else strides[d] for d in range(len(batch)))
        r, c = (strides[-1], strides[-2]) if transposed else (strides[-2], strides[-1])
        return Operand(r, c, 0, outer)

    problem = GemmProblem(m, n, k, view(a, a_batch, m, k, trans_a), view(b, batch, k, n, trans_b),
                          Operand(n, 1, 0, tuple(int(np.prod(batch[d + 1:], dtype=int)) * m * n
                                                 for d in range(len(batch)))), batch)
    am = np.swapaxes(a, -1, -2) if trans_a else a
    bm = np.swapaxes(b, -1, -2) if trans_b else b
    want = np.matmul(am.astype(np.float64), bm.astype(np.float64))
    c = np.full(batch + (m, n), np.nan, np.float32)
    args = [a, b]
    if packed == "a" and k:
        args[0] = pack_constant(a, problem, blocking, "a")
    if packed == "b" and k:
        args[1] = pack_constant(b, problem, blocking, "b")
    fn = _kernel(problem, blocking, packed_a=packed == "a" and k > 0, packed_b=packed == "b" and k > 0)
    assert fn(_ptr(args[0]), _ptr(args[1]), _ptr(c)) == 0
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4 * max(1, k))


@settings(max_examples=10)
@given(m=st.one_of(st.just(1), st.integers(1, 20)), n=st.integers(1, 40), k=st.integers(1, 30), blocking=blockings())
def test_epilogue_sees_each_element_once_with_its_row_and_column(m, n, k, blocking):
    rng = np.random.default_rng(m * 1000 + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    problem = GemmProblem(m, n, k, Operand(k, 1), Operand(n, 1), Operand(n, 1))
    # bias by column, a row-dependent shift, then relu: any tile applied twice or with the
    # wrong coordinates changes the result
    epi = _written("v = v + bias[j] + 0.5f * (float)i;\nv = v > 0.0f ? v : 0.0f;")
    c = np.zeros((m, n), np.float32)
    assert _kernel(problem, blocking, epi)(_ptr(a), _ptr(b), _ptr(c), _ptr(bias)) == 0
    want = np.maximum(a.astype(np.float64) @ b + bias + 0.5 * np.arange(m)[:, None], 0)
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4 * k)


def _conv_reference(x, w, stride, dilation, pads, group):
    n, cin, h, wd = x.shape
    oc, cg, kh, kw = w.shape
    oh = (h + 2 * pads[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pads[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[0]), (pads[1], pads[1])))
    y = np.zeros((n, oc, oh, ow))
    mg = oc // group
    for g in range(group):
        for a in range(kh):
            for b in range(kw):
                patch = xp[:, g * cg:(g + 1) * cg, a * dilation[0]:a * dilation[0] + stride[0] * (oh - 1) + 1:stride[0],
                           b * dilation[1]:b * dilation[1] + stride[1] * (ow - 1) + 1:stride[1]]
                y[:, g * mg:(g + 1) * mg] += np.einsum("nchw,oc->nohw", patch, w[g * mg:(g + 1) * mg, :, a, b])
    return y


@contextlib.contextmanager
def im2col_packing(how: str):
    """Pack every im2col operand by ``how``: "gather" (from padded planes, a gather per
    vector), "copies" (from padded planes, copies of runs where the stride along rows is 1 or 2)
    or "runs" (of input rows), whatever its width; or "direct": read in place from padded
    planes where the stride is 1 (:func:`reads_planes`), else as "copies"."""
    saved = gemm_template.GATHER_MAX_FLOATS, gemm_template.COPY_RUNS, gemm_template.READ_PLANES, \
        gemm_template.DIRECT_MAX_COLUMNS, gemm_template.DIRECT_MAX_ROWS
    gemm_template.GATHER_MAX_FLOATS = -1 if how == "runs" else 1 << 40
    gemm_template.COPY_RUNS = how in ("copies", "direct")
    gemm_template.READ_PLANES = how == "direct"
    gemm_template.DIRECT_MAX_COLUMNS = 1e9
    gemm_template.DIRECT_MAX_ROWS = 1 << 30
    try:
        yield
    finally:
        (gemm_template.GATHER_MAX_FLOATS, gemm_template.COPY_RUNS, gemm_template.READ_PLANES,
         gemm_template.DIRECT_MAX_COLUMNS, gemm_template.DIRECT_MAX_ROWS) = saved


def _packer(how: str, problem: GemmProblem, vl: int) -> str:
    """The routine ``im2col_packing(how)`` has read B for ``problem``: a packing routine, or
    the micro-kernel reading B in place."""
    if how == "runs":
        return "pack_im2col"
    b = problem.b
    if how == "direct" and b.stride == (1, 1):
        return "micro_direct"
    step = b.stride[1]
    in_place = step > 1 and gemm_template.gathers_in_place(b)
    copies = step in (1, 2) and not in_place and 2 * b.out_w >= vl and b.out_h * b.out_w >= step * vl
    if how not in ("copies", "direct") or not copies:
        return "pack_gather"
    return "pack_copies" if step == 1 else "pack_copies_s2"


@pytest.mark.parametrize("packing", ["gather", "copies", "runs", "direct"])
@settings(max_examples=20)
# stride 2, which packs through its own vectorized loop, with padding on both sides
@example(batch=1, group=1, cg=3, mg=4, h=9, wd=11, kh=3, kw=3, stride=(2, 2), dilation=(1, 1), pads=(1, 1),
         blocking=Blocking(machine_for("generic").vector_floats, *MICRO_TILES["generic"][0], 5,
                           MICRO_TILES["generic"][0][0], machine_for("generic").vector_floats * MICRO_TILES["generic"][0][1]),
         seed=1)
# stride 4 (alexnet's 11x11 stem), its own loop too, with a padded left edge and a ragged right one
@example(batch=1, group=1, cg=2, mg=3, h=11, wd=14, kh=3, kw=3, stride=(4, 4), dilation=(1, 1), pads=(2, 1),
         blocking=Blocking(machine_for("generic").vector_floats, *MICRO_TILES["generic"][0], 5,
                           MICRO_TILES["generic"][0][0], machine_for("generic").vector_floats * MICRO_TILES["generic"][0][1]),
         seed=2)
@given(batch=st.integers(1, 2), group=st.integers(1, 3), cg=st.integers(1, 3), mg=st.integers(1, 4),
       h=st.integers(1, 9), wd=st.integers(1, 11), kh=st.integers(1, 3), kw=st.integers(1, 3),
       stride=st.tuples(st.integers(1, 4), st.integers(1, 4)), dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       pads=st.tuples(st.integers(0, 2), st.integers(0, 2)), blocking=blockings(), seed=st.integers(0, 2**16))
def test_implicit_gemm_conv_matches_a_direct_convolution(packing, batch, group, cg, mg, h, wd, kh, kw, stride,
                                                         dilation, pads, blocking, seed):
    oh = (h + 2 * pads[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pads[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    if oh < 1 or ow < 1:
        return
    rng = np.random.default_rng(seed)
    cin, oc = cg * group, mg * group
    x = rng.standard_normal((batch, cin, h, wd)).astype(np.float32)
    w = rng.standard_normal((oc, cg, kh, kw)).astype(np.float32)
    kg = cg * kh * kw
    problem = GemmProblem(mg, oh * ow, kg, Operand(kg, 1, 0, (0, mg * kg)),
                          Im2Col(cg, h, wd, (kh, kw), stride, dilation, pads, oh, ow, 0, (cin * h * wd, cg * h * wd)),
                          Operand(oh * ow, 1, 0, (oc * oh * ow, mg * oh * ow)), (batch, group))
    y = np.zeros((batch, oc, oh, ow), np.float32)
    packed = pack_constant(w, problem, blocking, "a")
    with im2col_packing(packing):
        source = gemm_kernel("fl_gemm_test", problem, blocking, packed_a=True)
    assert f"fl_gemm_{_packer(packing, problem, blocking.vl)}_" in source
    assert _loaded(source, blocking)(_ptr(packed), _ptr(x), _ptr(y)) == 0
    np.testing.assert_allclose(y, _conv_reference(x, w, stride, dilation, pads, group), rtol=1e-4, atol=1e-4 * kg)


def test_kernels_of_one_unit_share_one_copy_of_their_shape_free_helpers(monkeypatch):
    # two convs of different shapes, same blocking: the micro-kernel and the im2col packing
    # are printed in both sources, compiled once in a unit holding both, and serve both
    # (both packed: the stride-1 one does not read its planes in place)
    monkeypatch.setattr(gemm_template, "READ_PLANES", False)
    blocking = Blocking(host().vector_floats, *MICRO_TILES[host().isa][0], 8, MICRO_TILES[host().isa][0][0],
                        host().vector_floats * MICRO_TILES[host().isa][0][1])
    rng = np.random.default_rng(0)
    cases, sources = [], [vector_types(blocking.vl)]
    for index, (h, stride) in enumerate([(7, 1), (9, 2)]):
        oh = (h + 2 - 3) // stride + 1
        x = rng.standard_normal((1, 2, h, h)).astype(np.float32)
        w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
        problem = GemmProblem(3, oh * oh, 18, Operand(18, 1, 0, ()), Im2Col(2, h, h, (3, 3), (stride, stride), (1, 1),
                                                                           (1, 1), oh, oh, 0, ()),
                              Operand(oh * oh, 1, 0, ()))
        sources.append(gemm_kernel(f"fl_conv_{index}", problem, blocking))
        cases.append((x, w, stride, np.zeros((1, 3, oh, oh), np.float32)))
    unit = "#include <stdlib.h>\n" + "\n".join(sources)
    micro = f"void fl_gemm_micro_{blocking.mr}x{blocking.nv}v{blocking.vl}("
    # the tile's micro-kernel, its narrower ones for N's last sliver and the column kernel
    # for its last columns, guarded in each source
    kernels = blocking.nv + (1 if gemm_template.TAIL_COLUMNS else 0)
    assert all(micro in s for s in sources[1:]) and unit.count("#ifndef FL_SHARED_fl_gemm_micro_") == 2 * kernels
    lib = load_library(build_library([unit]))
    for index, (x, w, stride, y) in enumerate(cases):
        fn = getattr(lib, f"fl_conv_{index}")
        assert fn(_ptr(w), _ptr(x), _ptr(y)) == 0
        np.testing.assert_allclose(y, _conv_reference(x, w, (stride, stride), (1, 1), (1, 1), 1), rtol=1e-4,
                                   atol=1e-4)


def test_gemms_that_differ_only_in_their_numbers_share_one_driver(monkeypatch):
    # two convs of different sizes, strides and output channels, each with a bias by row and
    # a residual read at a shape-dependent offset: one driver is printed for both (once in
    # the library's helpers), each kernel passes its own numbers, and both compute right
    # (both packed: a conv reading its planes in place has a driver of its own)
    monkeypatch.setattr(gemm_template, "READ_PLANES", False)
    blocking = Blocking(host().vector_floats, *MICRO_TILES[host().isa][0], 8, MICRO_TILES[host().isa][0][0],
                        host().vector_floats * MICRO_TILES[host().isa][0][1])
    rng = np.random.default_rng(1)
    params = ("const float *restrict bias", "const float *restrict resid")
    acc, bias_read, resid_read = sp.symbols("acc bias resid")
    helpers: dict[str, str] = {}
    cases, sources, kernels = [], [], []
    for index, (h, stride, oc) in enumerate([(7, 1, 3), (9, 2, 5)]):
        oh = (h + 2 - 3) // stride + 1
        problem = GemmProblem(oc, oh * oh, 18, Operand(18, 1, 0, ()), Im2Col(2, h, h, (3, 3), (stride, stride), (1, 1),
                                                                            (1, 1), oh, oh, 0, ()),
                              Operand(oh * oh, 1, 0, ()))
        reads = ((acc, "v"), (bias_read, Load("bias", I)), (resid_read, Load("resid", J + oh * oh * I)))
        epi = Epilogue((Define("e0", acc + bias_read + resid_read, reads), Assign("v", "e0")), params)
        sources.append(gemm_kernel(f"fl_conv_{index}", problem, blocking, epi, helpers=helpers))
        kernels.append(gemm_function(f"fl_conv_{index}", problem, blocking, epi))
        x = rng.standard_normal((1, 2, h, h)).astype(np.float32)
        w = rng.standard_normal((oc, 2, 3, 3)).astype(np.float32)
        bias = rng.standard_normal(oc).astype(np.float32)
        resid = rng.standard_normal((oc, oh, oh)).astype(np.float32)
        cases.append((x, w, bias, resid, stride, np.zeros((1, oc, oh, oh), np.float32)))
    drivers = [name for name in helpers if name.startswith("fl_gemm_drive_")]
    assert len(drivers) == 1 and all(drivers[0] in s for s in sources)
    # one driver, two tables of numbers: the residual's row stride is each kernel's own
    assert kernels[0].driver_name == kernels[1].driver_name == drivers[0]
    assert kernels[0].numbers != kernels[1].numbers and {49, 25} <= set(kernels[0].numbers) | set(kernels[1].numbers)
    lib = _shared_library(blocking, helpers, sources)
    for index, (x, w, bias, resid, stride, y) in enumerate(cases):
        fn = getattr(lib, f"fl_conv_{index}")
        assert fn(_ptr(w), _ptr(x), _ptr(y), _ptr(bias), _ptr(resid)) == 0
        want = _conv_reference(x, w, (stride, stride), (1, 1), (1, 1), 1) + bias[:, None, None] + resid
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("index,printed,values", [
    (I + 32 * O1, "(i + (S[0] * o1))", [32]),
    (J + 729 * I + 5, "((S[0] * i) + j + S[1])", [729, 5]),
    # the column's coefficient stays (unit stride for the vectorizer), and so do divisors
    (2 * J + 7, "((2 * j) + S[0])", [7]),
    (3 * J * O0 - 4 * I, "(((-S[0]) * i) + (3 * j * o0))", [4]),
    (-I, "((-S[0]) * i)", [1]),
    (-3 * J, "((-S[0]) * j)", [3]),
    (sp.floor(I / 13) + 4, "((i / 13) + 4)", []),
    (10 * sp.Mod(I, 6), "(10 * (i % 6))", []),
    (sp.Integer(0), "S[0]", [0]),
])
def test_an_epilogues_index_literals_are_read_from_the_drivers_numbers(index, printed, values):
    numbers = Numbers()
    assert NumberedIndex(numbers)(index) == printed and numbers.values == values


def test_an_epilogue_statements_indices_are_numbered_in_the_order_they_are_printed():
    # the driver's table is filled as the text is printed: the same text, the same slots
    acc, x, y = sp.symbols("acc x y")
    define = Define("e0", acc * x + y, ((acc, "v"), (y, Load("p2", I + 3)), (x, Load("p3", J + 5 * I))))
    numbers = Numbers()
    (line,) = statements_text((define,), C, NumberedIndex(numbers))
    first, second = line.index("p2["), line.index("p3[")
    slots = [numbers.values[int(k)] for k in re.findall(r"S\[(\d+)\]", line)]
    assert slots == ([3, 5] if first < second else [5, 3]) and numbers.values == slots


def test_an_element_the_epilogue_reads_again_takes_its_first_index_and_slots():
    # GELU's backward reads its saved activation four times per element: four slots of the
    # same stride (S[1] * i + j ... S[4] * i + j) hid from the compiler that they are one load
    h, g = sp.symbols("h g")
    saved = Load("p3", 64 * I + J)
    stmts = (Define("e0", h * h, ((h, saved),)), Define("e1", g * h, ((g, "e0"), (h, saved))))
    numbers = Numbers()
    lines = statements_text(stmts, C, NumberedIndex(numbers))
    assert lines == ["const float e0 = (p3[((S[0] * i) + j)]*p3[((S[0] * i) + j)]);",
                     "const float e1 = e0*p3[((S[0] * i) + j)];"] and numbers.values == [64]


def test_an_epilogue_prefetches_the_next_tiles_rows_of_what_it_reads_along_a_row():
    # the driver's next tile lies mm rows below: a residual is prefetched there, once, a
    # 64-byte line at a time (32 halves); a bias (one row for all) and a per-row scale not
    h, r, q, s = sp.symbols("h r q s")
    residual, half = Load("p2", 64 * I + J), Load("p5", 64 * I + J, "float16")
    stmts = (Define("e0", h + r + q, ((h, "v"), (r, residual), (q, half))), Define("e1", h * r * s, ((h, "e0"), (r, residual), (s, Load("p3", J)))),
             Define("e2", h * s, ((h, "e1"), (s, Load("p4", 2 * I)))))
    numbers = Numbers()
    lines = next_rows_prefetches(stmts, NumberedIndex(numbers))
    assert lines == ["for (long j = j0; j < j0 + nn; j += 16) __builtin_prefetch((const void *)((__UINTPTR_TYPE__)p2 + "
                     "sizeof(*p2) * (__UINTPTR_TYPE__)(((S[0] * i) + j + (S[1] * mm)))));",
                     "for (long j = j0; j < j0 + nn; j += 32) __builtin_prefetch((const void *)((__UINTPTR_TYPE__)p5 + "
                     "sizeof(*p5) * (__UINTPTR_TYPE__)(((S[2] * i) + j + (S[3] * mm)))));"]
    assert numbers.values == [64, 64, 64, 64]


@settings(max_examples=6)
@given(m=st.integers(7, 40), n=st.integers(9, 90), k=st.integers(9, 20), blocking=blockings())
def test_a_blocked_gemms_epilogue_reading_a_residual_matches_numpy(m, n, k, blocking):
    # the blocked driver's epilogue prefetches the residual's next rows (past the last tile
    # too: a prefetch never faults) and runs its SIMD loop at the micro-kernel's width
    rng = np.random.default_rng(m * 1000 + n)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    residual = rng.standard_normal((m, n)).astype(np.float32)
    problem = GemmProblem(m, n, k, Operand(k, 1), Operand(n, 1), Operand(n, 1))
    r = sp.Symbol("r")
    epi = Epilogue((Define("e0", sp.Symbol("v") * r + r, ((sp.Symbol("v"), "v"), (r, Load("p3", n * I + J)))),
                    Assign("v", "e0")), ("const float *restrict p3",))
    source = gemm_kernel("fl_t", problem, blocking, epi)
    assert "__builtin_prefetch" in source and f"simdlen({blocking.vl})" in source
    c = np.zeros((m, n), np.float32)
    assert _kernel(problem, blocking, epi)(_ptr(a), _ptr(b), _ptr(c), _ptr(residual)) == 0
    product = a.astype(np.float64) @ b
    np.testing.assert_allclose(c, product * residual + residual, rtol=1e-4, atol=1e-4 * k)


def test_a_one_row_problem_reads_its_matrix_in_place():
    # batch-1 dense layers: no packing buffer, no packed copy of the weight, either layout
    for trans_b in (False, True):
        b_view = Operand(1, 7, 0) if trans_b else Operand(5, 1, 0)
        problem = GemmProblem(1, 5, 7, Operand(7, 1, 0), b_view, Operand(5, 1, 0))
        blocking = blocking_for(host(), problem)
        source = gemm_kernel("fl_gemv", problem, blocking)
        assert "GEMV template" in source and "alloc" not in source
        assert packing_floats(problem, blocking) == 0


@pytest.mark.parametrize("n,k", [(5, 7), (8, 16), (17, 33), (1, 1), (9, 100), (24, 15)])
def test_one_row_problems_compute_their_dot_products(n, k):
    # a transposed weight (K contiguous) runs the shared vector dot routines, 8 rows at a
    # time and then one by one, with K's tail after its whole vectors; the other layout
    # runs an AXPY per K step
    rng = np.random.default_rng(n * 100 + k)
    x = rng.standard_normal(k).astype(np.float32)
    for trans_b in (True, False):
        w = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
        b_view = Operand(1, k, 0) if trans_b else Operand(n, 1, 0)
        problem = GemmProblem(1, n, k, Operand(k, 1, 0), b_view, Operand(n, 1, 0))
        blocking = blocking_for(host(), problem)
        helpers: dict[str, str] = {}
        source = gemm_kernel("fl_gemv", problem, blocking, helpers=helpers)
        assert ("fl_gemv_dot" in source) == (trans_b or n == 1)  # one column: both layouts
        assert ("fl_gemv_dot8" in source) == ((trans_b or n == 1) and n >= 8)
        lib = _shared_library(blocking, helpers, [source])
        y = np.full(n, np.nan, np.float32)
        assert lib.fl_gemv(_ptr(x), _ptr(w), _ptr(y)) == 0
        want = (w @ x) if trans_b else (x @ w)
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def test_problem_refuses_inconsistent_views():
    with pytest.raises(ValueError, match="outer strides"):
        GemmProblem(2, 2, 2, Operand(2, 1), Operand(2, 1), Operand(2, 1), (3,))
    with pytest.raises(ValueError, match="row-contiguous"):
        GemmProblem(2, 2, 2, Operand(2, 1), Operand(2, 1), Operand(1, 2))
    with pytest.raises(ValueError, match="im2col"):
        GemmProblem(2, 4, 5, Operand(5, 1), Im2Col(1, 3, 3, (2, 2), (1, 1), (1, 1), (0, 0), 2, 2), Operand(4, 1))


def test_blocking_follows_the_machine():
    big = blocking_for(machine_for("avx512", l1d=48 * 1024, l2=2 << 20, l3=32 << 20))
    small = blocking_for(machine_for("avx2", l1d=32 * 1024, l2=256 * 1024, l3=8 << 20))
    assert (big.vl, big.mr, big.nr, big.kc) == (16, 6, 64, 384) and (small.vl, small.mr, small.nr) == (8, 6, 16)
    # the B sliver is twice L1, the A block half of L2
    for bl, m in ((big, machine_for("avx512", 48 * 1024, 2 << 20, 32 << 20)), (small, machine_for("avx2", 32 * 1024, 256 * 1024, 8 << 20))):
        assert bl.kc * bl.nr * 4 <= 2 * m.l1d and bl.mc * bl.kc * 4 <= m.l2 // 2
        assert bl.mc % bl.mr == 0 and bl.nc % bl.nr == 0
    clamped = blocking_for(host(), GemmProblem(3, 5, 7, Operand(7, 1), Operand(5, 1), Operand(5, 1)))
    assert clamped.kc == 7 and clamped.mc == clamped.mr and clamped.nc == clamped.nr
    # 32 rows: an 8-row tile pads nothing where the default 14-row one pads 10
    avx512 = machine_for("avx512")
    rows32 = blocking_for(avx512, GemmProblem(32, 784, 64, Operand(64, 1), Operand(784, 1), Operand(784, 1)))
    assert (rows32.mr, rows32.nr) == (8, 48)
    square = blocking_for(avx512, GemmProblem(1024, 1024, 64, Operand(64, 1), Operand(1024, 1), Operand(1024, 1)))
    assert (square.mr, square.nr) == (6, 64)
    # 196 output pixels keep the default tile: its last sliver runs one vector, not four
    pixels196 = blocking_for(avx512, GemmProblem(48, 196, 64, Operand(64, 1), Operand(196, 1), Operand(196, 1)))
    assert (pixels196.mr, pixels196.nr) == (6, 64)
    # 66 rows pad 6-row tiles by nothing, 8-row ones by 6: the default stays
    rows66 = blocking_for(avx512, GemmProblem(66, 100, 64, Operand(64, 1), Operand(100, 1), Operand(100, 1)))
    assert rows66.mr == 6


@pytest.mark.parametrize("k,blocks", [(576, 2), (1024, 3), (384, 1), (385, 2), (1, 1), (4608, 12)])
def test_k_is_cut_into_equal_blocks(k, blocks):
    most = blocking_for(machine_for("avx512", l1d=48 * 1024)).kc  # 384 for a 64-wide tile
    bl = blocking_for(machine_for("avx512", l1d=48 * 1024), GemmProblem(64, 64, k, Operand(k, 1), Operand(64, 1), Operand(64, 1)))
    assert bl.kc <= most and -(-k // bl.kc) == blocks and bl.kc * blocks - k < blocks


def test_cache_sizes_parse_like_sysfs_prints_them():
    assert _parse_size("48K") == 48 * 1024 and _parse_size("2M") == 2 << 20 and _parse_size("512") == 512



@pytest.mark.parametrize("rows,cols", [(7, 1), (1, 5), (0, 1), (3, 0), (50, 1)])
def test_a_constant_operand_is_read_where_its_view_addresses(rows, cols):
    from fusionlang.backend.gemm_template import _strided

    flat = np.random.default_rng(3).standard_normal(200).astype(np.float32)
    if 2 + 4 * rows + 6 * cols >= flat.size:  # past the end: an IndexError, as gathering gave
        with pytest.raises(IndexError):
            _strided(flat, 2, (5, 7), (rows, cols))
        return
    want = np.array([[flat[2 + i * rows + j * cols] for j in range(7)] for i in range(5)], np.float32)
    np.testing.assert_array_equal(_strided(flat, 2, (5, 7), (rows, cols)), want)


def _arithmetic(node, names: dict) -> int:
    """The value of a parsed +, -, * expression over names and integers."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return names[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_arithmetic(node.operand, names)
    ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}
    return ops[type(node.op)](_arithmetic(node.left, names), _arithmetic(node.right, names))


@st.composite
def index_expressions(draw, depth=3):
    """An affine index expression over i, j, o0, o1 and literals (as an epilogue's are)."""
    if depth == 0 or draw(st.booleans()):
        if draw(st.booleans()):
            return draw(st.sampled_from([I, J, O0, O1]))
        return sp.Integer(draw(st.integers(0, 5000)))
    left = draw(index_expressions(depth - 1))
    if draw(st.booleans()):
        return left * draw(st.integers(-5000, 5000))
    op = draw(st.sampled_from([operator.add, operator.sub]))
    return op(left, draw(index_expressions(depth - 1)))


@settings(max_examples=200)
@given(index=index_expressions(), at=st.fixed_dictionaries({k: st.integers(-50, 50) for k in ("i", "j", "o0", "o1")}))
def test_numbered_index_literals_read_back_the_same_values(index, at):
    numbers = Numbers()
    index = sp.expand(index)
    printed = NumberedIndex(numbers)(index)
    inner = re.sub(r"S\[(\d+)\]", lambda m: str(numbers.values[int(m.group(1))]), printed)
    value = _arithmetic(ast.parse(re.sub(r"(\d+)LL\b", r"\1", inner), mode="eval").body, at)
    assert value == index.subs({sp.Symbol(k, integer=True, nonnegative=True): v for k, v in at.items()})
    # a literal multiplying j directly stays in the text
    for term in sp.Add.make_args(index):
        coeff, rest = term.as_coeff_Mul()
        if coeff > 1 and sp.Mul.make_args(rest)[0] == J:
            assert f"({coeff} * j" in printed


#: epilogues for the skinny kernels: each reads its row or column, or both, so a value the
#: GEMV writes to the wrong output or with swapped coordinates changes the result
SKINNY_EPILOGUES = [
    ("", lambda v, i, j, bias: v),
    ("v = v + bias[i + j];", lambda v, i, j, bias: v + bias[i + j]),
    ("v = tanhf(v) + 0.25f * (float)i - 0.5f * (float)j;", lambda v, i, j, bias: np.tanh(v) + 0.25 * i - 0.5 * j),
    ("v = v > 0.0f ? v : 0.1f * v;", lambda v, i, j, bias: np.where(v > 0, v, 0.1 * v)),
]


@settings(max_examples=30)
@given(skinny=st.sampled_from(["row", "column", "both"]), size=st.integers(1, 67), k=st.integers(1, 67),
       trans_a=st.booleans(), trans_b=st.booleans(), batch=st.integers(1, 3), epilogue=st.integers(0, 3),
       seed=st.integers(0, 2**16))
def test_skinny_problems_run_the_gemv_kernel_and_match_numpy(skinny, size, k, trans_a, trans_b, batch, epilogue, seed):
    # one row (a classifier), one column (a 1x1 conv on a pooled vector), or one output;
    # either operand transposed, batched, with an epilogue on its row and column
    m, n = {"row": (1, size), "column": (size, 1), "both": (1, 1)}[skinny]
    _check_skinny("row" if m == 1 else "column", m, n, k, trans_a, trans_b, batch, epilogue, seed)


@settings(max_examples=15)
@given(m=st.integers(2, 67), n=st.integers(2, 8), k=st.integers(16, 67), trans_b=st.booleans(),
       batch=st.integers(1, 3), epilogue=st.integers(0, 3), seed=st.integers(0, 2**16))
def test_narrow_problems_run_the_narrow_kernel_and_match_numpy(m, n, k, trans_b, batch, epilogue, seed):
    # attention's P.V with heads 2 to 8 wide: rows of A dotted with B's columns, B either way
    _check_skinny("narrow", m, n, k, False, trans_b, batch, epilogue, seed)


@settings(max_examples=15)
@given(m=st.integers(2, 67), n=st.integers(2, 67), k=st.integers(1, 8), trans_a=st.booleans(), trans_b=st.booleans(),
       batch=st.integers(1, 3), epilogue=st.integers(0, 3), seed=st.integers(0, 2**16))
def test_short_problems_run_the_short_kernel_and_match_numpy(m, n, k, trans_a, trans_b, batch, epilogue, seed):
    # attention's Q.K^T with heads 1 to 8 wide: K AXPYs per row of C, B in place or copied
    _check_skinny("short", m, n, k, trans_a, trans_b, batch, epilogue, seed)


@settings(max_examples=15)
@given(m=st.integers(2, 8), n=st.integers(9, 67), k=st.integers(9, 67), batch=st.integers(1, 3),
       epilogue=st.integers(0, 3), seed=st.integers(0, 2**16))
def test_few_rows_through_a_transposed_weight_run_the_gemv_kernel(m, n, k, batch, epilogue, seed):
    # a batch of 2 to 8 through a classifier's weight read along K (its input gradient):
    # dot products against B in place, no packing; every row and column of C checked
    _check_skinny("rows", m, n, k, False, True, batch, epilogue, seed)


def _check_skinny(kind, m, n, k, trans_a, trans_b, batch, epilogue, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((batch,) + ((k, m) if trans_a else (m, k))).astype(np.float32)
    b = rng.standard_normal((batch,) + ((n, k) if trans_b else (k, n))).astype(np.float32)
    bias = rng.standard_normal(m + n).astype(np.float32)

    def view(arr, transposed):
        strides = [s // 4 for s in arr.strides]
        r, c = (strides[-1], strides[-2]) if transposed else (strides[-2], strides[-1])
        return Operand(r, c, 0, (strides[0],))

    problem = GemmProblem(m, n, k, view(a, trans_a), view(b, trans_b), Operand(n, 1, 0, (m * n,)), (batch,))
    assert gemm_template.gemv_kind(problem) == kind
    body, reference = SKINNY_EPILOGUES[epilogue]
    epi = _written(body) if body else None
    blocking = blocking_for(host(), problem)
    helpers: dict[str, str] = {}
    source = gemm_kernel("fl_gemm_test", problem, blocking, epi, helpers=helpers)
    assert f"({kind})" in source and packing_floats(problem, blocking) == 0
    fn = _shared_library(blocking, helpers, ["#include <math.h>\n" + source]).fl_gemm_test
    c = np.full((batch, m, n), np.nan, np.float32)
    assert fn(_ptr(a), _ptr(b), _ptr(c), *([_ptr(bias)] if epi else [])) == 0
    am = np.swapaxes(a, -1, -2) if trans_a else a
    bm = np.swapaxes(b, -1, -2) if trans_b else b
    i, j = np.arange(m)[:, None], np.arange(n)[None, :]
    want = reference(np.matmul(am.astype(np.float64), bm.astype(np.float64)), i, j, bias.astype(np.float64))
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4 * k)


def test_a_column_written_with_a_stride_keeps_the_blocked_kernel():
    # C[m, 1] inside a wider row-major matrix: its elements are not contiguous, which the
    # column GEMV's epilogue loop needs; and narrow or short problems their kernels do not take
    problem = GemmProblem(5, 1, 3, Operand(3, 1), Operand(1, 1), Operand(4, 1))
    assert gemm_template.gemv_kind(problem) is None
    for m, n, k, a in ((5, 4, 15, Operand(15, 1)), (5, 9, 32, Operand(32, 1)), (5, 4, 32, Operand(1, 5)),
                       (5, 8, 4096, Operand(4096, 1)), (5, 9, 9, Operand(9, 1))):
        assert gemm_template.gemv_kind(GemmProblem(m, n, k, a, Operand(n, 1), Operand(n, 1))) is None
    # a short K with B's columns too wide for the stack copy: contiguous along K, the
    # few-rows GEMV reads them in place; strided along K, the blocked kernel packs them
    assert gemm_template.gemv_kind(GemmProblem(5, 4096, 8, Operand(8, 1), Operand(1, 8), Operand(4096, 1))) == "rows"
    assert gemm_template.gemv_kind(GemmProblem(5, 4096, 8, Operand(1, 5), Operand(1, 8), Operand(4096, 1))) is None
    assert gemm_template.gemv_kind(GemmProblem(9, 4096, 8, Operand(8, 1), Operand(1, 8), Operand(4096, 1))) is None
    assert "GEMM template" in gemm_kernel("fl_gemm_test", problem, blocking_for(host(), problem))


@st.composite
def long_k_blockings(draw):
    """Blockings of the machine's tiles with KC of 16 to 40: the transposed packs' whole
    VL x VL blocks (and their K remainder) come into play."""
    isa = draw(st.sampled_from(ISAS))
    vl = machine_for(isa).vector_floats
    mr, nv = draw(st.sampled_from(MICRO_TILES[isa]))
    return Blocking(vl, mr, nv, draw(st.integers(16, 40)), mr * draw(st.integers(1, 12)),
                    vl * nv * draw(st.integers(1, 2)))


@settings(max_examples=20, deadline=None)
@given(m=st.integers(1, 80), n=st.integers(1, 150), k=st.integers(1, 90), trans_a=st.booleans(),
       trans_b=st.booleans(), batch=st.sampled_from([(), (2,)]), blocking=long_k_blockings(),
       seed=st.integers(0, 2**16))
def test_transposed_operands_are_packed_from_their_column_runs(m, n, k, trans_a, trans_b, batch, blocking, seed):
    # A^T and B^T (rows 1 apart) run their own packing routines: A^T's slivers copied from
    # runs of its rows, B^T's transposed VL x VL in registers; every edge of both
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch + ((k, m) if trans_a else (m, k))).astype(np.float32)
    b = rng.standard_normal(batch + ((n, k) if trans_b else (k, n))).astype(np.float32)
    outer = (m * k,) if batch else ()
    a_view = Operand(1, m, 0, outer) if trans_a else Operand(k, 1, 0, outer)
    b_view = Operand(1, k, 0, (n * k,) if batch else ()) if trans_b else Operand(n, 1, 0, (n * k,) if batch else ())
    problem = GemmProblem(m, n, k, a_view, b_view, Operand(n, 1, 0, (m * n,) if batch else ()), batch)
    source = gemm_kernel("fl_gemm_test", problem, blocking)
    if not gemm_template.is_gemv(problem):
        assert ("fl_gemm_pack_at_" in source) == (trans_a and m > 1) and ("fl_gemm_pack_bt_" in source) == trans_b
    c = np.full(batch + (m, n), np.nan, np.float32)
    assert _loaded(source, blocking)(_ptr(a), _ptr(b), _ptr(c)) == 0
    am = np.swapaxes(a, -1, -2) if trans_a else a
    bm = np.swapaxes(b, -1, -2) if trans_b else b
    np.testing.assert_allclose(c, np.matmul(am.astype(np.float64), bm.astype(np.float64)), rtol=1e-4,
                               atol=1e-4 * k)


@pytest.mark.parametrize("isa,tile", [(isa, tile) for isa in ISAS for tile in MICRO_TILES[isa]])
def test_a_row_major_a_is_packed_by_shuffles_of_whole_vectors(isa, tile):
    # a full MR-row sliver of row-major A is packed VL steps of K at a time, each row's
    # vector dealt into MR stored vectors by shuffles; two full slivers and a partial one,
    # two whole VL blocks of K and a remainder, against NumPy
    vl = machine_for(isa).vector_floats
    mr, nv = tile
    m, n, k = 2 * mr + 1, vl * nv + 3, 2 * vl + 3
    blocking = Blocking(vl, mr, nv, k, mr * 3, vl * nv * 2)
    problem = GemmProblem(m, n, k, Operand(k, 1), Operand(n, 1), Operand(n, 1))
    source = gemm_kernel("fl_gemm_test", problem, blocking)
    assert "__builtin_shufflevector(r0, r1" in source
    rng = np.random.default_rng(mr * 100 + nv)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    assert _loaded(source, blocking)(_ptr(a), _ptr(b), _ptr(c)) == 0
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4 * k)


def test_one_block_of_a_is_packed_once_for_every_panel_of_b():
    # all of A one MC x KC block: packed for the first B panel only, and B's panels sized
    # to L2 (the LM head's m=256 n=8000 k=256: one panel of 8000 columns was read from L3)
    machine = machine_for("avx512", l1d=48 * 1024, l2=2 << 20, l3=256 << 20)
    head = GemmProblem(256, 8000, 256, Operand(256, 1), Operand(8000, 1), Operand(8000, 1))
    bl = blocking_for(machine, head)
    assert bl.nc == 1024 and bl.kc * bl.nc * 4 <= machine.l2 // 2 and bl.mc >= 256
    square = GemmProblem(1024, 1024, 1024, Operand(1024, 1), Operand(1024, 1), Operand(1024, 1))
    assert blocking_for(machine, square).nc == 1024  # A in several blocks: the L3 panel
    rng = np.random.default_rng(5)
    m, n, k = 10, 200, 20
    (mr, nv), vl = MICRO_TILES[host().isa][0], host().vector_floats
    blocking = Blocking(vl, mr, nv, 24, mr * 2, vl * nv)  # four B panels
    problem = GemmProblem(m, n, k, Operand(k, 1), Operand(n, 1), Operand(n, 1))
    source = gemm_kernel("fl_gemm_test", problem, blocking, _written("v = v + (float)j;", ()))
    assert "if (jc == 0)" in source
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    assert _loaded(source, blocking)(_ptr(a), _ptr(b), _ptr(c)) == 0
    np.testing.assert_allclose(c, a.astype(np.float64) @ b + np.arange(n), rtol=1e-4, atol=1e-4 * k)
