"""bfloat16 matmul, gemm and conv on AMX tiles (Intel's Advanced Matrix Extensions).

Where the CPU and the C compiler both have AMX-TILE and AMX-BF16 (:func:`amx_available`),
a bfloat16 GEMM group skips the float32 widening of :mod:`.gemm_half`: its operands stay
16-bit and ``TDPBF16PS`` multiplies them, 16 x 32 by 32 x 16 per instruction, into float32
accumulator tiles. The layout AMX reads:

* A, ``[MP][KP]`` bf16, row-major: an A tile is 16 rows of 32 consecutive k;
* B, in 16-column blocks ``[NP / 16][KP / 2][16][2]`` (the "VNNI" pairs): a B tile is 16
  rows of (k, k + 1) pairs for 16 columns;

with MP, NP and KP = M, N and K rounded up to 16, 16 and 32, the padding zero (in both
A and B along K, so a padded product is 0 * 0 and an infinity never meets a padded zero).
A constant operand (weights) is packed at compile time (:func:`pack_constant_amx`); an
operand read at run time is packed by the kernel per outer index, a B a chunk of columns
at a time (:data:`B_CHUNK`: a conv's im2col gathered straight into the pair layout, the
stride-2 taps 16 at a time, the pair rows shared by a team's threads), each chunk then
multiplied by all of A while it is in L2. The kernel walks 32 x 32 blocks of C (2 x 2
tiles; 1 x 1, 1 x 2 or 2 x 1 at the edges) in the order :func:`_rows_outside` picks;
each finished block is stored to a float32 scratch tile, the group's epilogue runs on it
in float32 while it is in L1, and it is copied to C. The wrapper
(:func:`.gemm_half.widening_wrapper`) then rounds C to bfloat16 once.

Numerics: products of bf16 are exact in float32 and are summed in float32, as the widened
path does, in another order; the difference is within the same K-based bound. One
difference: ``TDPBF16PS`` treats subnormal inputs and results as zero (as OpenVINO's AMX
kernels do), where the reference keeps them; they are below 2**-126, far under the
tolerance of any sum that is not itself subnormal.

The tile permission (``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``, Linux 5.16+)
is requested on the first call and remembered; where the kernel refuses it the same packed
operands are multiplied by a scalar loop, so the result never depends on it. A library is
built with ``-march=native``: the AMX text is inside ``#if __AMX_TILE__ && __AMX_BF16__``,
so a compiler or CPU without AMX never emits its instructions.
"""

from __future__ import annotations

import os
import ml_dtypes
import numpy as np

from fusionlang.backend.ccompile import native_features
from fusionlang.backend.cexpr import IndexPrinter
from fusionlang.backend.epilogue import next_rows_prefetches
from fusionlang.backend.gemm_template import (Epilogue, GemmProblem, Im2Col, Lines, Operand, epilogue_args,
                                              epilogue_function, epilogue_params)
from fusionlang.backend.machine import cpu_features

#: rows of a tile, bf16 of a tile row (64 bytes), columns of a float32 tile row
TILE_ROWS, TILE_K, TILE_N = 16, 32, 16
#: the (M, N) block of C the kernel computes at a time: 2 x 2 tiles
BLOCK = 32
#: the multiply-adds from which the threaded kernel splits its blocks over a team
PARALLEL_MIN_MACS = 1 << 18


def amx_available() -> bool:
    """Whether this process's bf16 GEMMs run on AMX: the CPU lists amx_tile and amx_bf16,
    ``-march=native`` lets the compiler use them, and ``FUSIONLANG_AMX`` is not ``0``."""
    if os.environ.get("FUSIONLANG_AMX", "1") == "0":
        return False
    native = native_features() or frozenset()
    return {"amx_tile", "amx_bf16"} <= cpu_features() and {"amx-tile", "amx-bf16"} <= native


def amx_fits(problem: GemmProblem, element: str) -> bool:
    """Whether the AMX kernel computes ``problem``: a bfloat16 GEMM whose B is a matrix or a
    conv's im2col of one image (a batch folded into the columns keeps the widened path)."""
    return element == "bfloat16" and problem.fold is None and problem.k > 0


def _round_up(x: int, step: int) -> int:
    return -(-x // step) * step


def padded_sizes(problem: GemmProblem) -> tuple[int, int, int]:
    """(MP, NP, KP): M, N and K as the packed operands hold them."""
    return _round_up(problem.m, TILE_ROWS), _round_up(problem.n, TILE_N), _round_up(problem.k, TILE_K)


def packed_elements(problem: GemmProblem, which: str) -> int:
    """bf16 elements of the packed ``which`` ("a" or "b") for one outer index."""
    mp, np_, kp = padded_sizes(problem)
    return (mp if which == "a" else np_) * kp


#: a B read at run time is packed this many bytes of columns at a time, then multiplied
#: by all of A: a chunk stays in L2 between its packing and its blocks, where the whole
#: packed im2col of a 56 x 56 plane (3.6 MiB for a 3x3 conv of 64 channels) went to memory
#: and back, and its pair stores, a column block (kp * 32 bytes) apart, missed the TLB
B_CHUNK = 1 << 18


def chunk_columns(problem: GemmProblem) -> int:
    """Columns of a run-time B packed at a time: B_CHUNK's worth, but at least MP (A is read
    again for every chunk: a chunk of B at least as large as A costs no more to re-read
    than it cost to pack), in whole 32-column blocks, at most NP. Without the floor a 3x3
    conv 256 -> 256 on 14x14 took 32-column chunks, re-reading its 1.2 MiB of weights 7
    times (0.72-0.94 ms against 0.55-0.75 as one chunk: this busy VM's noise is as wide)."""
    mp, np_, kp = padded_sizes(problem)
    return min(np_, max(BLOCK, B_CHUNK // (2 * kp) // BLOCK * BLOCK, _round_up(mp, BLOCK)))


def _b_buffer(problem: GemmProblem) -> int:
    """bf16 elements of the run-time B buffer: one chunk of packed columns."""
    return chunk_columns(problem) * padded_sizes(problem)[2]


def packing_bytes(problem: GemmProblem, packed_a: bool, packed_b: bool) -> int:
    """Bytes the kernel allocates on each call: the run-time packed operands."""
    return 2 * ((0 if packed_a else packed_elements(problem, "a")) + (0 if packed_b else _b_buffer(problem)))


def pack_constant_amx(flat: np.ndarray, problem: GemmProblem, which: str) -> np.ndarray:
    """The packed bfloat16 form of constant operand ``which`` as the kernel reads it: per
    outer index (the view's nonzero outer strides only), A as ``[MP][KP]``, B as
    ``[NP/16][KP/2][16][2]``, zero-padded."""
    view = problem.a if which == "a" else problem.b
    if isinstance(view, Im2Col):
        raise ValueError("an im2col operand is gathered while packing; it has no constant packed form")
    bits = np.ascontiguousarray(np.asarray(flat).astype(ml_dtypes.bfloat16)).reshape(-1).view(np.uint16)
    mp, np_, kp = padded_sizes(problem)
    outer_shape = [n if s else 1 for n, s in zip(problem.outer, view.outer_strides)]
    out = []
    for outer in np.ndindex(*outer_shape):
        base = view.offset + sum(o * s for o, s in zip(outer, view.outer_strides))
        if which == "a":  # [m, k]
            rows = np.arange(problem.m)[:, None] * view.rows + np.arange(problem.k)[None, :] * view.cols
            block = np.zeros((mp, kp), np.uint16)
            block[:problem.m, :problem.k] = bits[base + rows]
        else:  # [k, n] -> [NP/16][KP/2][16][2]
            rows = np.arange(problem.k)[:, None] * view.rows + np.arange(problem.n)[None, :] * view.cols
            full = np.zeros((kp, np_), np.uint16)
            full[:problem.k, :problem.n] = bits[base + rows]
            block = full.reshape(kp // 2, 2, np_ // TILE_N, TILE_N).transpose(2, 0, 3, 1)
        out.append(np.ascontiguousarray(block).reshape(-1))
    return np.concatenate(out).view(ml_dtypes.bfloat16)


# ----- printing ------------------------------------------------------------------------

_PRELUDE = r"""#ifndef FL_AMX_PRELUDE
#define FL_AMX_PRELUDE
#include <string.h>
#if defined(__AVX512BW__) || (defined(__AMX_TILE__) && defined(__AMX_BF16__))
#include <immintrin.h>
#endif
#if defined(__AVX512BW__)
#define FL_AMX_PAIRS 1
#else
#define FL_AMX_PAIRS 0
#endif
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
#include <sys/syscall.h>
#include <unistd.h>
#define FL_AMX 1
/* 1 once the process may use the tile registers, -1 where the kernel refused (asked once) */
static int fl_amx_state;
static int fl_amx_ready(void) {
    int state = __atomic_load_n(&fl_amx_state, __ATOMIC_ACQUIRE);
    if (!state) {
        state = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0 ? 1 : -1;
        __atomic_store_n(&fl_amx_state, state, __ATOMIC_RELEASE);
    }
    return state == 1;
}
/* palette 1, eight tiles of 16 rows x 64 bytes */
static void fl_amx_configure(void) {
    unsigned char cfg[64] __attribute__((aligned(64))) = {0};
    cfg[0] = 1;
    for (int t = 0; t < 8; t++) { cfg[16 + 2 * t] = 64; cfg[48 + t] = 16; }
    _tile_loadconfig(cfg);
}
#else
#define FL_AMX 0
#endif
static inline float fl_amx_bf(unsigned short h) { union { unsigned int u; float f; } v; v.u = (unsigned int)h << 16; return v.f; }
/* A (element (m, k) at src[m * rs + k * cs]) into [mp][kp], zero-padded */
static void fl_amx_pack_a(const unsigned short *restrict src, long rs, long cs, long m, long k, long mp, long kp,
                          unsigned short *restrict dst) {
    for (long i = 0; i < mp; i++) {
        unsigned short *row = dst + i * kp;
        long kk = 0;
        if (i < m && cs == 1) { memcpy(row, src + i * rs, (size_t)k * 2); kk = k; }
        else if (i < m) {
            #pragma omp simd
            for (long q = 0; q < k; q++) row[q] = src[i * rs + q * cs];
            kk = k;
        }
        for (; kk < kp; kk++) row[kk] = 0;
    }
}
/* rows k and k + 1 of B (r0, r1: n contiguous elements, NULL past K) as the pairs of the
   layout at dst (the row pair's place in column block 0; block jb lies jb * kp * 16
   further), zero from column n up to np */
static void fl_amx_pairs(const unsigned short *restrict r0, const unsigned short *restrict r1, long n, long np,
                         long kp, unsigned short *restrict dst) {
    long j = 0;
#if FL_AMX_PAIRS
    if (r0) {  /* 16 columns of both rows, interleaved by one permute */
        const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                             23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
        for (; j + 16 <= n; j += 16) {
            __m256i x0 = _mm256_loadu_si256((const __m256i *)(r0 + j));
            __m256i x1 = r1 ? _mm256_loadu_si256((const __m256i *)(r1 + j)) : _mm256_setzero_si256();
            __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(x0), x1, 1);
            _mm512_storeu_si512((void *)(dst + (j >> 4) * kp * 16), _mm512_permutexvar_epi16(idx, v));
        }
    }
#endif
    for (; j < np; j++) {
        unsigned short *d = dst + (j >> 4) * kp * 16 + (j & 15) * 2;
        d[0] = r0 && j < n ? r0[j] : 0;
        d[1] = r1 && j < n ? r1[j] : 0;
    }
}
/* rows kk and kk + 1 of B (element (k, n) at src[k * rs + n * cs]), columns n0 .. n0 + nc
   (nc a multiple of 16), as the pairs of a chunk of the layout at dst (zero past K and N);
   rows with a column stride are gathered into rows (2 nc elements) first */
static void fl_amx_pack_b_pair(const unsigned short *restrict src, long rs, long cs, long k, long n, long kk,
                               long n0, long nc, long kp, unsigned short *restrict rows,
                               unsigned short *restrict dst) {
    const long valid = n - n0 < nc ? n - n0 : nc;
    const unsigned short *r[2] = {NULL, NULL};
    for (long t = 0; t < 2 && kk + t < k; t++) {
        const unsigned short *s = src + (kk + t) * rs + n0 * cs;
        if (cs == 1) { r[t] = s; continue; }
        unsigned short *g = rows + t * nc;
        #pragma omp simd
        for (long j = 0; j < valid; j++) g[j] = s[j * cs];
        r[t] = g;
    }
    fl_amx_pairs(r[0], r[1], valid, nc, kp, dst);
}
/* out[i] = in[2 i] for i in [0, count), 16 at a time while the pair read stays inside the
   room elements of the row (2 i + 31 < room); returns how many it stored. The low halves
   of 16 32-bit lanes are the even elements: one truncating move where a gather was scalar */
static long fl_amx_stride2(const unsigned short *restrict in, long room, long count, unsigned short *restrict out) {
    long i = 0;
#if FL_AMX_PAIRS
    for (; i + 16 <= count && 2 * i + 31 < room; i += 16)
        _mm256_storeu_si256((__m256i *)(out + i), _mm512_cvtepi32_epi16(_mm512_loadu_si512((const void *)(in + 2 * i))));
#endif
    return i;
}
/* row q of a conv's im2col of one image (channels x h x w), output positions p0 .. p1 into
   out[0 .. p1 - p0): tap (channel, ky, kx) at (oy, ox), 0 outside the image; the in-image
   run of each output row copied */
static void fl_amx_im2col_row(const unsigned short *restrict x, long q, long h, long w, long kh, long kw, long sh,
                              long sw, long dh, long dw, long ph, long pw, long ow, long p0, long p1,
                              unsigned short *restrict out) {
    const long c = q / (kh * kw), ky = q / kw % kh, kx = q % kw, x0 = kx * dw - pw;
    const unsigned short *plane = x + c * h * w;
    /* the output columns whose tap lies inside a row: ox * sw + x0 in [0, w) */
    long lo = x0 < 0 ? (-x0 + sw - 1) / sw : 0, hi = x0 < w ? (w - 1 - x0) / sw + 1 : 0;
    lo = lo < ow ? lo : ow;
    hi = hi < ow ? (hi > lo ? hi : lo) : ow;
    for (long oy = p0 / ow; oy * ow < p1; oy++) {
        const long iy = oy * sh - ph + ky * dh, base = oy * ow - p0;
        /* this row's output columns in the chunk: [a, b) */
        const long a = base < 0 ? -base : 0, b = p1 - oy * ow < ow ? p1 - oy * ow : ow;
        const unsigned short *in = plane + (iy < 0 || iy >= h ? 0 : iy * w);
        long first = lo > a ? lo : a, last = hi < b ? hi : b;
        if (iy < 0 || iy >= h || last < first) first = last = b;
        /* inline vector loops, not memcpy and memset: the runs are a few dozen elements */
        for (long ox = a; ox < first; ox++) out[base + ox] = 0;
        if (sw == 1) {
            #pragma omp simd
            for (long ox = first; ox < last; ox++) out[base + ox] = in[x0 + ox];
        } else {
            long ox = first;
            if (sw == 2) ox += fl_amx_stride2(in + x0 + 2 * first, w - x0 - 2 * first, last - first, out + base + first);
            #pragma omp simd
            for (long i = ox; i < last; i++) out[base + i] = in[x0 + i * sw];
        }
        for (long ox = last; ox < b; ox++) out[base + ox] = 0;
    }
}
/* rows kk and kk + 1 of a conv's im2col of one image, columns (output positions) n0 .. n0
   + nc, as the pairs of a chunk of the layout at dst; gathered into rows (2 nc) first */
static void fl_amx_im2col_pair(const unsigned short *restrict x, long k, long n, long kk, long n0, long nc, long kp,
                               long h, long w, long kh, long kw, long sh, long sw, long dh, long dw, long ph,
                               long pw, long ow, unsigned short *restrict rows, unsigned short *restrict dst) {
    const long valid = n - n0 < nc ? n - n0 : nc;
    const unsigned short *r[2] = {NULL, NULL};
    for (long t = 0; t < 2 && kk + t < k; t++) {
        fl_amx_im2col_row(x, kk + t, h, w, kh, kw, sh, sw, dh, dw, ph, pw, ow, n0, n0 + valid, rows + t * nc);
        r[t] = rows + t * nc;
    }
    fl_amx_pairs(r[0], r[1], valid, nc, kp, dst);
}
/* the float32 sums of the packed operands' rows i0.. (mt tiles) and columns j0.. (nt
   tiles) into tile[32][32]: on AMX, or (the permission refused) by a scalar loop */
static void fl_amx_block(const unsigned short *restrict ap, const unsigned short *restrict bp, long kp, long i0,
                         long j0, int mt, int nt, int amx, float *restrict tile) {
    const unsigned short *a = ap + i0 * kp, *b = bp + (j0 >> 4) * kp * 16;
#if FL_AMX
    if (amx) {
        _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
        for (long kk = 0; kk < kp; kk += 32) {
            _tile_loadd(4, a + kk, kp * 2);
            _tile_loadd(6, b + kk * 16, 64);
            _tile_dpbf16ps(0, 4, 6);
            if (nt == 2) { _tile_loadd(7, b + kp * 16 + kk * 16, 64); _tile_dpbf16ps(1, 4, 7); }
            if (mt == 2) {
                _tile_loadd(5, a + 16 * kp + kk, kp * 2);
                _tile_dpbf16ps(2, 5, 6);
                if (nt == 2) _tile_dpbf16ps(3, 5, 7);
            }
        }
        _tile_stored(0, tile, 128); _tile_stored(1, tile + 16, 128);
        _tile_stored(2, tile + 512, 128); _tile_stored(3, tile + 528, 128);
        return;
    }
#endif
    (void)amx;
    for (long i = 0; i < 16 * mt; i++)
        for (long j = 0; j < 16 * nt; j++) {
            const unsigned short *bj = b + (j >> 4) * kp * 16 + (j & 15) * 2;
            float s = 0.0f;
            for (long kk = 0; kk < kp; kk++) s += fl_amx_bf(a[i * kp + kk]) * fl_amx_bf(bj[(kk >> 1) * 32 + (kk & 1)]);
            tile[i * 32 + j] = s;
        }
}
#endif
"""


def amx_prelude() -> str:
    """The helpers every AMX kernel calls (guarded: a unit holds them once)."""
    return _PRELUDE


def amx_kernel(name: str, problem: GemmProblem, epilogue: Epilogue | None, c_dtype: str, *, packed_a: bool,
               packed_b: bool, threads: bool = False) -> str:
    """``static int name(const unsigned short *A, const unsigned short *B, C, <epilogue
    params>)``: C (``c_dtype``, bfloat16 or float32, its view's layout) = A B with the
    epilogue applied; A and B bf16, each packed (:func:`pack_constant_amx`) or as its view
    lays it out. Returns 1 when a packing buffer cannot be allocated (nothing computed),
    else 0."""
    if c_dtype not in ("bfloat16", "float32"):
        raise ValueError(f"the AMX kernel stores bfloat16 or float32, not {c_dtype}")
    out = Lines()
    # the epilogue (on the block's float32 scratch tile, rows 32 apart) and the stores in
    # 512-bit vectors: the template unit's -O2 picks 256-bit ones, and a simdlen(16) loop
    # reading bf16 too; inlined, the epilogue is vectorized as its caller is told, so the
    # kernel is compiled so whole. A 1x1 conv 64 -> 256 on 56x56 with bias, residual and
    # relu (three bf16 roundings an element): 1.5-1.85 -> 1.0 ms (process CPU, busy VM)
    out("#pragma GCC push_options")
    out('#pragma GCC target("prefer-vector-width=512")')
    epilogue_function(out, name, problem, epilogue, row_stride=f"{BLOCK}L")
    c_type = "unsigned short" if c_dtype == "bfloat16" else "float"
    out.open(f"static int {name}(const unsigned short *restrict A, const unsigned short *restrict B, "
             f"{c_type} *restrict C{epilogue_params(epilogue)})")
    buffers = [(v, n) for v, n, packed in (("ap", packed_elements(problem, "a"), packed_a),
                                           ("bp", _b_buffer(problem), packed_b)) if not packed]
    for v, n in buffers:
        out(f"unsigned short *{v} = (unsigned short *)fl_alloc({2 * n});")
    if buffers:
        out(f"if ({' || '.join('!' + v for v, _ in buffers)}) {{ {' '.join(f'free({v});' for v, _ in buffers)} "
            "return 1; }")
    out("#if FL_AMX")
    out("const int amx = fl_amx_ready();")
    out("#else")
    out("const int amx = 0;")
    out("#endif")
    for d, extent in enumerate(problem.outer):
        out.open(f"for (long o{d} = 0; o{d} < {extent}L; o{d}++)")
    _operands(out, problem, packed_a, packed_b)
    _blocks(out, name, problem, epilogue, threads, c_type, packed_b)
    for _ in problem.outer:
        out.close()
    for v, _ in buffers:
        out(f"free({v});")
    out("return 0;")
    out.close()
    out("#pragma GCC pop_options")
    return out.text()


def _outer_offset(view: Operand | Im2Col) -> str:
    """The offset of outer index (o0, o1, ...) in an operand laid out as its view says."""
    return " + ".join([f"{view.offset}L"] + [f"o{d} * {s}L" for d, s in enumerate(view.outer_strides) if s])


def _operands(out: Lines, problem: GemmProblem, packed_a: bool, packed_b: bool) -> None:
    """``a``, ``b``: this outer index's packed operands (packed here when read at run time)."""
    mp, _, kp = padded_sizes(problem)
    if packed_a:
        out(f"const unsigned short *a = A + {_packed_offset(problem, problem.a, packed_elements(problem, 'a'))};")
    else:
        view = problem.a
        out(f"fl_amx_pack_a(A + {_outer_offset(view)}, {view.rows}L, {view.cols}L, {problem.m}L, {problem.k}L, "
            f"{mp}L, {kp}L, ap);")
        out("const unsigned short *a = ap;")
    if packed_b:
        out(f"const unsigned short *b_all = B + {_packed_offset(problem, problem.b, packed_elements(problem, 'b'))};")
    else:
        out(f"const unsigned short *b_src = B + {_outer_offset(problem.b)};")


def _pack_chunk(out: Lines, problem: GemmProblem, threads: bool) -> None:
    """Pack the run-time B's columns n0 .. n0 + nc into bp, pair rows shared by the team."""
    _, _, kp = padded_sizes(problem)
    view = problem.b
    if threads:
        out("#pragma omp for schedule(static)")
    out.open(f"for (long kk = 0; kk < {kp}L; kk += 2)")
    if isinstance(view, Im2Col):
        (kh, kw), (sh, sw), (dh, dw), (ph, pw) = view.kernel, view.stride, view.dilation, view.pads
        geometry = ", ".join(f"{g}L" for g in (view.in_h, view.in_w, kh, kw, sh, sw, dh, dw, ph, pw, view.out_w))
        out(f"fl_amx_im2col_pair(b_src, {problem.k}L, {problem.n}L, kk, n0, nc, {kp}L, {geometry}, rows, bp + kk * 16);")
    else:
        out(f"fl_amx_pack_b_pair(b_src, {view.rows}L, {view.cols}L, {problem.k}L, {problem.n}L, kk, n0, nc, {kp}L, "
            "rows, bp + kk * 16);")
    out.close()


def _packed_offset(problem: GemmProblem, view: Operand | Im2Col, size: int) -> str:
    """The offset of this outer index's packed operand: per outer dim with a nonzero stride,
    the product of the later such dims' extents times ``size``."""
    terms, step = [], size
    for d in reversed(range(len(problem.outer))):
        if view.outer_strides[d]:
            terms.append(f"o{d} * {step}L")
            step *= problem.outer[d]
    return " + ".join(terms) or "0"


#: a packed B up to this many bytes is read again for every row block from L2 (half of a
#: Sapphire Rapids core's 2 MiB), so the rows go outside and C, and what the epilogue reads,
#: are walked row by row, runs the hardware prefetcher follows
B_IN_L2 = 1 << 20


def _rows_outside(problem: GemmProblem, packed_b: bool) -> bool:
    """Whether the blocks of C go row block by row block (each packed A block read once, all
    of packed B again for each), else column block by column block (B once, A again): rows
    outside when B stays in L2 or is the smaller. Interleaved medians, process CPU, busy VM,
    columns -> rows outside: ResNet-50's last 3x3 convs (m=512 n=49 k=4608: 4.5 MiB of
    weights read once, not once per 32 columns) 0.67 -> 0.53 ms; a 1x1 conv 64 -> 256 on
    56x56 with a residual (0.4 MiB of B) 1.67 -> 1.52 ms; a 3x3 conv 64 -> 64 on 56x56
    (3.6 MiB of B) 1.04 -> 1.14 ms, so it keeps the columns outside."""
    b = packed_elements(problem, "b") if packed_b else _b_buffer(problem)
    a = packed_elements(problem, "a")
    return 2 * b <= B_IN_L2 or b < a


def _prefetch_next_block(out: Lines, epilogue: Epilogue | None) -> None:
    """Prefetch what the epilogue of the block below reads along its rows (a residual): the
    rows of a block lie a page or more apart, which the hardware prefetcher does not follow;
    prefetched a block ahead they arrive while this block's tiles compute. A 1x1 conv of
    256 x 3136 x 64 with a residual stalled a third of its time on those loads."""
    lines = next_rows_prefetches(epilogue.body, IndexPrinter(), rows="mm") if epilogue is not None else []
    if lines:
        out.open("for (long i = i0; i < i0 + mm; i++)")
        for line in lines:
            out(line)
        out.close()


def _blocks(out: Lines, name: str, problem: GemmProblem, epilogue: Epilogue | None, threads: bool,
            c_type: str, packed_b: bool) -> None:
    """The 32 x 32 blocks of C, a chunk of columns at a time (:func:`chunk_columns`, a
    run-time B packed per chunk; a packed constant B is one chunk), in the order
    :func:`_rows_outside` picks; each block's sums in a float32 scratch tile, the
    epilogue on it, then its store to C (a bfloat16 C: the top half of each value, which
    the epilogue's last statement rounded to bfloat16; without an epilogue, rounded here)."""
    mp, np_, kp = padded_sizes(problem)
    m, n, ldc = problem.m, problem.n, problem.c.rows
    outer_args = "".join(f", o{d}" for d in range(len(problem.outer)))
    out(f"{c_type} *c_o = C + {_outer_offset(problem.c)};")
    macs = problem.m * problem.n * problem.k
    if threads:
        out(f"#pragma omp parallel if ({macs}L >= {PARALLEL_MIN_MACS}L)")
    out.open("")  # the block a team shares
    out("float tile[1024] __attribute__((aligned(64)));")
    chunk = np_ if packed_b else chunk_columns(problem)
    if not packed_b:  # a thread's two gathered rows of B
        out(f"unsigned short rows[{2 * chunk}];")
    out("#if FL_AMX")
    out("if (amx) fl_amx_configure();")
    out("#endif")
    out.open(f"for (long n0 = 0; n0 < {np_}L; n0 += {chunk}L)")
    if packed_b:
        out(f"const unsigned short *b = b_all + (n0 >> 4) * {kp * TILE_N}L;")
    else:
        out(f"const long nc = {np_}L - n0 < {chunk}L ? {np_}L - n0 : {chunk}L;")
        _pack_chunk(out, problem, threads)
        out("const unsigned short *b = bp;")
    if threads:
        out("#pragma omp for collapse(2) schedule(static)")
    end = f"n0 + {chunk}L < {np_}L ? n0 + {chunk}L : {np_}L"
    loops = [f"for (long j0 = n0; j0 < ({end}); j0 += {BLOCK})", f"for (long i0 = 0; i0 < {mp}L; i0 += {BLOCK})"]
    rows_outside = _rows_outside(problem, packed_b)
    for loop in reversed(loops) if rows_outside else loops:
        out.open(loop)
    out(f"const int mt = {mp}L - i0 > 16 ? 2 : 1, nt = {np_}L - j0 > 16 ? 2 : 1;")
    out(f"const long mm = {m}L - i0 < {BLOCK} ? {m}L - i0 : {BLOCK}, nn = {n}L - j0 < {BLOCK} ? {n}L - j0 : {BLOCK};")
    if not rows_outside:  # the next block lies below: rows a page apart
        _prefetch_next_block(out, epilogue)
    out(f"fl_amx_block(a, b, {kp}L, i0, j0 - n0, mt, nt, amx, tile);")
    if epilogue is not None:
        out(f"{name}_epilogue(tile, i0, mm, j0, nn{outer_args}{epilogue_args(epilogue)});")
    if c_type == "float":
        value = "tile[i * 32 + j]"
    elif epilogue is not None:
        value = "(unsigned short)(fl_f_bits(tile[i * 32 + j]) >> 16)"
    else:
        value = "fl_f2bf(tile[i * 32 + j])"
    out(f"{c_type} *ct = c_o + i0 * {ldc}L + j0;")
    out.open("for (long i = 0; i < mm; i++)")
    out("#pragma omp simd")
    out(f"for (long j = 0; j < nn; j++) ct[i * {ldc}L + j] = {value};")
    out.close()
    out.close()
    out.close()
    out.close()
    out("#if FL_AMX")
    out("if (amx) _tile_release();")
    out("#endif")
    out.close()


__all__ = ["amx_available", "amx_fits", "chunk_columns", "amx_kernel", "amx_prelude", "pack_constant_amx", "packed_elements",
           "packing_bytes", "padded_sizes"]
