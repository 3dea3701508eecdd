"""The CUDA GEMM template: shared-memory tiles, warp tiles, tensor-core ``mma.sync``, a fused
epilogue applied to the accumulators before they are stored.

The CUDA sibling of :mod:`.gemm_template`, over the same :class:`.gemm_template.GemmProblem`
(so both targets fuse the same epilogues, and a conv is the same implicit GEMM)::

    for each tile (outer index, BM rows, BN columns) of C:       one thread block
      stage A[BM x BK] and B[BK x BN] of k-tile 0 into shared memory
      for each k-tile:
        stage k-tile + 1 into the other buffer (cp.async: it lands while we compute)
        each warp multiplies its WM x WN part: (WM/16) x (WN/8) mma.m16n8k8 per 8 of K
      each thread runs the epilogue on the accumulators it owns and stores them

The im2col matrix of a convolution is gathered while staging (a tap outside the image is
staged as 0, by cp.async's zero fill); it never exists in memory. An elementwise prologue
of one operand (:class:`Prologue`) is computed while that operand is staged, from what it
reads, so its result never exists in memory either. float16 and bfloat16 operands are
staged as their 16-bit patterns and multiplied by ``mma.m16n8k16`` (two to a register),
with the same fp32 accumulators.

Three variants of the inner product share the staging, the thread ownership of the
accumulators (the m16n8 C fragment of ``mma.sync``) and the epilogue:

* ``__CUDA_ARCH__ >= 800``: TF32 tensor cores (``mma.sync.aligned.m16n8k8``, inputs rounded
  to TF32 by ``cvt.rna``, fp32 accumulation) and ``cp.async`` staging, double-buffered. At
  precision "fp32" (the default) each product is three TF32 passes over split operands
  (CUTLASS's 3xTF32), as accurate as fp32; at "tf32" one pass, about 1e-3 relative;
* ``FL_EMU_MMA`` (the CPU emulator, :mod:`.cuda_emu`): the same fragments exchanged through
  the emulated warp, so the register layout of the tensor-core path is checked on the CPU;
* otherwise (older GPUs, the emulator by default): FMAs from shared memory into the same
  accumulators, in fp32.

Everything printed here comes from shapes and our own epilogue code; no text from a model
or a rule file reaches it.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusionlang.backend.cexpr import CUDA
from fusionlang.backend.epilogue import Statement, statements_text
from fusionlang.backend.gemm_template import GemmProblem, Im2Col, Operand
from fusionlang.backend.half import CONVERSIONS, narrow

#: streaming multiprocessors the tile choice fills (an H100 SXM has 132; an A100 108)
TARGET_SMS = 132


@dataclass(frozen=True)
class CudaTile:
    """A thread block computes BM x BN of C in steps of BK; each warp WM x WN of it."""

    bm: int
    bn: int
    bk: int
    wm: int
    wn: int

    @property
    def warps(self) -> int:
        return (self.bm // self.wm) * (self.bn // self.wn)

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def label(self) -> str:
        return f"{self.bm}x{self.bn}x{self.bk}, {self.warps} warps of {self.wm}x{self.wn}"

    @property
    def shared_bytes(self) -> int:
        return 4 * 2 * (self.bm * (self.bk + A_PAD) + self.bk * (self.bn + B_PAD))


#: shared-memory row padding (floats) that keeps the fragment loads free of bank conflicts:
#: A rows of BK + 4 (20 floats: lanes g*20 + t hit 32 distinct banks), B rows of BN + 8
A_PAD, B_PAD = 4, 8

#: the tile table, largest first, with the fraction of the tensor cores' rate a tile of that
#: size keeps (more reuse per staged element): what :func:`choose_tile` weighs against waves
TILES = (
    (CudaTile(128, 128, 16, 64, 32), 1.00),
    (CudaTile(128, 64, 16, 64, 32), 0.90),
    (CudaTile(64, 64, 16, 32, 32), 0.80),
    (CudaTile(64, 32, 16, 32, 16), 0.60),
    (CudaTile(32, 32, 16, 16, 16), 0.45),
)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def choose_tile(problem: GemmProblem) -> CudaTile:
    """The tile of :data:`TILES` with the least estimated time: waves of thread blocks over
    :data:`TARGET_SMS`, each as long as its padded tile's work at the tile's rate. Small or
    skinny problems get small tiles (more blocks, less padding); large ones the largest."""
    outer = 1
    for e in problem.outer:
        outer *= e

    def cost(entry):
        tile, rate = entry
        blocks = _ceil(problem.m, tile.bm) * _ceil(problem.n, tile.bn) * outer
        waves = _ceil(blocks, TARGET_SMS)
        return waves * tile.bm * tile.bn * _ceil(problem.k, tile.bk) / rate

    return min(TILES, key=cost)[0]


PRELUDE = r"""
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define FL_TENSOR_CORES 1
#endif
static __device__ __forceinline__ void fl_stage4(float* dst, const float* src, bool ok) {
#ifdef FL_TENSOR_CORES
  unsigned s = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(s), "l"(src), "r"(ok ? 4 : 0));
#else
  *dst = ok ? *src : 0.0f;
#endif
}
static __device__ __forceinline__ void fl_stage16(void* dst, const void* src, bool ok) {
#ifdef FL_TENSOR_CORES
  unsigned s = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(s), "l"(src), "r"(ok ? 16 : 0));
#else
  for (int q = 0; q < 4; q++) ((unsigned*)dst)[q] = ok ? ((const unsigned*)src)[q] : 0u;
#endif
}
// a 16-bit element (float16 or bfloat16 bits): cp.async moves 4 bytes or more, so this one is a plain copy
static __device__ __forceinline__ void fl_stage2(unsigned short* dst, const unsigned short* src, bool ok) {
  *dst = ok ? *src : (unsigned short)0;
}
static __device__ __forceinline__ void fl_stage_commit() {
#ifdef FL_TENSOR_CORES
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N> static __device__ __forceinline__ void fl_stage_wait() {
#ifdef FL_TENSOR_CORES
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
#endif
}
#if defined(FL_TENSOR_CORES)
static __device__ __forceinline__ unsigned fl_tf32(float x) {
  unsigned u;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(u) : "f"(x));
  return u;
}
// d (16x8, fp32) += a (16x8, tf32) . b (8x8, tf32); lane l holds a[g + 8(r%2)][t + 4(r/2)],
// b[t + 4r][g] and d[g + 8(r/2)][2t + r%2], with g = l/4, t = l%4
static __device__ __forceinline__ void fl_mma_tf32(float* d, const float* a, const float* b) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(fl_tf32(a[0])), "r"(fl_tf32(a[1])), "r"(fl_tf32(a[2])), "r"(fl_tf32(a[3])),
                 "r"(fl_tf32(b[0])), "r"(fl_tf32(b[1])));
}
static __device__ __forceinline__ float fl_tf32_rounded(float x) { return __uint_as_float(fl_tf32(x)); }
#define FL_MMA 1
#elif defined(FL_EMU_MMA)
#define fl_mma_tf32 fl_emu_mma_tf32
#define fl_tf32_rounded fl_emu_tf32
#define FL_MMA 1
#endif
#if defined(FL_TENSOR_CORES)
// d (16x8, fp32) += a (16x16) . b (16x8), 16-bit inputs two to a register (the lower k in the
// low half): lane l holds a[g + 8(r%2)][2t + 8(r/2) + {0,1}] and b[2t + 8r + {0,1}][g]
static __device__ __forceinline__ void fl_mma_f16(float* d, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
static __device__ __forceinline__ void fl_mma_bf16(float* d, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#elif defined(FL_EMU_MMA)
static inline void fl_emu_unpack(const unsigned* in, int n, float* out, float (*widen)(unsigned short)) {
  for (int r = 0; r < n; r++) { out[2 * r] = widen(in[r] & 0xffffu); out[2 * r + 1] = widen(in[r] >> 16); }
}
static inline void fl_mma_f16(float* d, const unsigned* a, const unsigned* b) {
  float af[8], bf[4];
  fl_emu_unpack(a, 4, af, fl_h2f);
  fl_emu_unpack(b, 2, bf, fl_h2f);
  fl_emu_mma_k16(d, af, bf);
}
static inline void fl_mma_bf16(float* d, const unsigned* a, const unsigned* b) {
  float af[8], bf[4];
  fl_emu_unpack(a, 4, af, fl_bf2f);
  fl_emu_unpack(b, 2, bf, fl_bf2f);
  fl_emu_mma_k16(d, af, bf);
}
#endif
#if defined(FL_MMA)
// precision "fp32": each operand split into a TF32 part and the TF32 of what it left out;
// three products (the small x small one is below fp32's rounding) keep fp32's accuracy
static __device__ __forceinline__ void fl_mma(float* d, const float* a, const float* b) {
#if FL_TF32_PASSES == 3
  float ab[4], as[4], bb[2], bs[2];
  for (int r = 0; r < 4; r++) { ab[r] = fl_tf32_rounded(a[r]); as[r] = a[r] - ab[r]; }
  for (int r = 0; r < 2; r++) { bb[r] = fl_tf32_rounded(b[r]); bs[r] = b[r] - bb[r]; }
  fl_mma_tf32(d, as, bb);
  fl_mma_tf32(d, ab, bs);
  fl_mma_tf32(d, ab, bb);
#else
  fl_mma_tf32(d, a, b);
#endif
}
#endif
"""

#: compile(precision=...): TF32 passes per product on the tensor cores
PRECISIONS = {"fp32": 3, "tf32": 1}


def prelude(precision: str = "fp32") -> str:
    """The template's device helpers, multiplying at ``precision`` (see :data:`PRECISIONS`)."""
    return f"#define FL_TF32_PASSES {PRECISIONS[precision]}\n" + PRELUDE


@dataclass(frozen=True)
class Prologue:
    """Operand ``which`` ("a" or "b") computed while staged: ``body`` (statements over the
    operand tensor's index ``fl_x0, fl_x1, ...``) leaves its value in ``result``; ``coords``
    are that index as C expressions of the staged element: ``o0, o1, ...`` and ``fl_row``,
    ``fl_col`` (a matrix view), or ``ch``, ``iy``, ``ix`` (the im2col of a conv)."""

    which: str
    coords: tuple[str, ...]
    body: tuple[Statement, ...]
    result: str


@dataclass(frozen=True)
class Names:
    """The kernel's parameter names for A, B and C."""

    a: str
    b: str
    c: str


def gemm_kernel(name: str, problem: GemmProblem, tile: CudaTile, params: list[str], names: Names,
                epilogue: tuple[Statement, ...] = (), element: str = "float32", c_dtype: str = "float32",
                prologue: Prologue | None = None) -> str:
    """``extern "C" __global__ void name(params..., fl_scratch, fl_err)``: C = A . B over
    ``problem``, each element passed through ``epilogue`` (:mod:`.epilogue` statements reading
    and writing ``v``, with ``i``, ``j`` and ``o0, o1, ...`` its coordinates) before it is stored.
    ``element``: A's and B's dtype (float32, or float16 / bfloat16 bits: m16n8k16 tensor
    cores, fp32 accumulation); ``c_dtype``: C's, which ``v`` is rounded to once, at the
    store. ``prologue``: one operand is computed element by element while staged (see
    :class:`Prologue`). Launch it with ``tile.threads`` threads per block and any grid
    (blocks stride over the tiles; :func:`grid_size` covers them once)."""
    out = _Lines()
    args = ", ".join(params + ["unsigned char* __restrict__ fl_scratch", "long long* __restrict__ fl_err"])
    out.open(f'extern "C" __global__ void __launch_bounds__({tile.threads}) {name}({args})')
    _declare(out, problem, tile, element)
    out.open("for (long long fl_tile = blockIdx.x; fl_tile < FL_TILES; fl_tile += gridDim.x)")
    _tile_origin(out, problem, tile)
    out("float acc[MI][NI][4];")
    out("#pragma unroll")
    out.open("for (int mi = 0; mi < MI; mi++)")
    out("#pragma unroll")
    out("for (int ni = 0; ni < NI; ni++) acc[mi][ni][0] = acc[mi][ni][1] = acc[mi][ni][2] = acc[mi][ni][3] = 0.0f;")
    out.close()
    _stage(out, problem, names, "0", "0", element, prologue)
    out("fl_stage_commit();")
    out.open("for (int kt = 0; kt < KT; kt++)")
    out.open("if (kt + 1 < KT)")
    _stage(out, problem, names, "(kt + 1) & 1", "(kt + 1) * BK", element, prologue)
    out("fl_stage_commit();")
    out("fl_stage_wait<1>();")
    out.close()
    out("else fl_stage_wait<0>();")
    out("__syncthreads();")
    out("const int s = kt & 1;")
    _multiply(out, element)
    out("__syncthreads();")
    out.close()
    _store(out, problem, epilogue, names, c_dtype)
    out.close()
    out.close()
    return out.text()


def grid_size(problem: GemmProblem, tile: CudaTile, limit: int) -> int:
    return max(1, min(_tiles(problem, tile), limit))


def _tiles(problem: GemmProblem, tile: CudaTile) -> int:
    outer = 1
    for e in problem.outer:
        outer *= e
    return _ceil(problem.m, tile.bm) * _ceil(problem.n, tile.bn) * outer


class _Lines:
    def __init__(self):
        self.lines: list[str] = []
        self.depth = 0

    def __call__(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def open(self, head: str) -> None:
        self(head + " {")
        self.depth += 1

    def close(self) -> None:
        self.depth -= 1
        self("}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


#: element dtype -> (its C type in shared memory, A's row padding, B's row padding, the
#: elements one 16-byte copy moves); 16-bit rows of BK + 8 (24 halves, 12 words) keep the
#: m16n8k16 fragment loads free of bank conflicts as 20 floats do for m16n8k8
ELEMENTS = {"float32": ("float", A_PAD, B_PAD, 4), "float16": ("unsigned short", 8, 8, 8),
            "bfloat16": ("unsigned short", 8, 8, 8)}


def _declare(out: _Lines, problem: GemmProblem, tile: CudaTile, element: str) -> None:
    kt = _ceil(problem.k, tile.bk)
    t, a_pad, b_pad, _ = ELEMENTS[element]
    out(f"constexpr int BM = {tile.bm}, BN = {tile.bn}, BK = {tile.bk}, WM = {tile.wm}, WN = {tile.wn};")
    out(f"constexpr int MI = WM / 16, NI = WN / 8, WARPS_N = BN / WN, KT = {kt};")
    out(f"constexpr long long FL_TILES = {_tiles(problem, tile)}LL;")
    out(f"__shared__ __align__(16) {t} fl_as[2][BM][BK + {a_pad}];")
    out(f"__shared__ __align__(16) {t} fl_bs[2][BK][BN + {b_pad}];")
    out("const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t4 = lane & 3;")
    out("const int wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;")


def _tile_origin(out: _Lines, problem: GemmProblem, tile: CudaTile) -> None:
    """m0, n0, the outer indices o0.. and each operand's base offset for this block's tile."""
    tiles_m, tiles_n = _ceil(problem.m, tile.bm), _ceil(problem.n, tile.bn)
    out(f"const int m0 = (int)(fl_tile % {tiles_m}) * BM;")
    out(f"const int n0 = (int)(fl_tile / {tiles_m} % {tiles_n}) * BN;")
    rest = f"fl_tile / {tiles_m * tiles_n}LL"
    inner = 1
    for d in reversed(range(len(problem.outer))):
        out(f"const long long o{d} = {rest} / {inner}LL % {problem.outer[d]}LL;")
        inner *= problem.outer[d]
    for which, view in (("a", problem.a), ("b", problem.b), ("c", problem.c)):
        terms = [f"{view.offset}LL"] + [f"o{d} * {s}LL" for d, s in enumerate(view.outer_strides) if s]
        out(f"const long long {which}_base = {' + '.join(terms)};")


#: how each element's fragments are read from shared memory for mma.sync: (K per
#: instruction, A's and B's register type, the lines reading them, the instruction's helper)
_FRAGMENTS = {
    "float32": (8, "float", [
        "const int r = wm0 + mi * 16 + g;",
        "af[mi][0] = fl_as[s][r][kk + t4]; af[mi][1] = fl_as[s][r + 8][kk + t4];",
        "af[mi][2] = fl_as[s][r][kk + t4 + 4]; af[mi][3] = fl_as[s][r + 8][kk + t4 + 4];"], [
        "const int c = wn0 + ni * 8 + g;",
        "bf[ni][0] = fl_bs[s][kk + t4][c]; bf[ni][1] = fl_bs[s][kk + t4 + 4][c];"], "fl_mma"),
    # 16-bit inputs two to a register, the lower k in the low half
    "16": (16, "unsigned", [
        "const int r = wm0 + mi * 16 + g, k = kk + 2 * t4;",
        "af[mi][0] = *(const unsigned*)&fl_as[s][r][k]; af[mi][1] = *(const unsigned*)&fl_as[s][r + 8][k];",
        "af[mi][2] = *(const unsigned*)&fl_as[s][r][k + 8]; af[mi][3] = *(const unsigned*)&fl_as[s][r + 8][k + 8];"], [
        "const int c = wn0 + ni * 8 + g, k = kk + 2 * t4;",
        "bf[ni][0] = (unsigned)fl_bs[s][k][c] | ((unsigned)fl_bs[s][k + 1][c] << 16);",
        "bf[ni][1] = (unsigned)fl_bs[s][k + 8][c] | ((unsigned)fl_bs[s][k + 9][c] << 16);"], "fl_mma_@"),
}


def _multiply(out: _Lines, element: str) -> None:
    """The inner product of one staged k-tile into each thread's accumulators: mma.sync on
    tensor cores (m16n8k8 TF32, or m16n8k16 for 16-bit inputs), else FMAs on the (widened)
    values into the same accumulators."""
    step, reg, a_lines, b_lines, mma = _FRAGMENTS["float32" if element == "float32" else "16"]
    mma = mma.replace("@", "f16" if element == "float16" else "bf16")
    widen = CONVERSIONS[element][0] if element in CONVERSIONS else ""
    out("#if defined(FL_MMA)")
    out("#pragma unroll")
    out.open(f"for (int kk = 0; kk < BK; kk += {step})")
    out(f"{reg} af[MI][4], bf[NI][2];")
    for loop, lines in (("mi < MI; mi++", a_lines), ("ni < NI; ni++", b_lines)):
        out("#pragma unroll")
        out.open(f"for (int {loop[:2]} = 0; {loop})")
        for line in lines:
            out(line)
        out.close()
    out("#pragma unroll")
    out.open("for (int mi = 0; mi < MI; mi++)")
    out("#pragma unroll")
    out(f"for (int ni = 0; ni < NI; ni++) {mma}(acc[mi][ni], af[mi], bf[ni]);")
    out.close()
    out.close()
    out("#else")
    out("#pragma unroll 4")
    out.open("for (int kk = 0; kk < BK; kk++)")
    out("float av[MI][2], bv[NI][2];")
    out("#pragma unroll")
    out.open("for (int mi = 0; mi < MI; mi++)")
    out(f"av[mi][0] = {widen}(fl_as[s][wm0 + mi * 16 + g][kk]);")
    out(f"av[mi][1] = {widen}(fl_as[s][wm0 + mi * 16 + g + 8][kk]);")
    out.close()
    out("#pragma unroll")
    out.open("for (int ni = 0; ni < NI; ni++)")
    out(f"bv[ni][0] = {widen}(fl_bs[s][kk][wn0 + ni * 8 + 2 * t4]);")
    out(f"bv[ni][1] = {widen}(fl_bs[s][kk][wn0 + ni * 8 + 2 * t4 + 1]);")
    out.close()
    _fma_block(out)
    out.close()
    out("#endif")


def _fma_block(out: _Lines) -> None:
    out("#pragma unroll")
    out.open("for (int mi = 0; mi < MI; mi++)")
    out("#pragma unroll")
    out.open("for (int ni = 0; ni < NI; ni++)")
    out("acc[mi][ni][0] += av[mi][0] * bv[ni][0]; acc[mi][ni][1] += av[mi][0] * bv[ni][1];")
    out("acc[mi][ni][2] += av[mi][1] * bv[ni][0]; acc[mi][ni][3] += av[mi][1] * bv[ni][1];")
    out.close()
    out.close()


def _store(out: _Lines, problem: GemmProblem, epilogue: tuple[Statement, ...], names: Names, c_dtype: str) -> None:
    """Each thread's accumulators through the epilogue into C (fragment layout of m16n8)."""
    out("#pragma unroll")
    out.open("for (int mi = 0; mi < MI; mi++)")
    out("#pragma unroll")
    out.open("for (int ni = 0; ni < NI; ni++)")
    out("#pragma unroll")
    out.open("for (int r = 0; r < 4; r++)")
    out("const long long i = m0 + wm0 + mi * 16 + g + 8 * (r >> 1);")
    out("const long long j = n0 + wn0 + ni * 8 + 2 * t4 + (r & 1);")
    out.open(f"if (i < {problem.m} && j < {problem.n})")
    out("float v = acc[mi][ni][r];")
    for line in statements_text(epilogue, CUDA):
        out(line)
    out(f"{names.c}[c_base + i * {problem.c.rows}LL + j] = {narrow(c_dtype, 'v') if c_dtype in CONVERSIONS else 'v'};")
    out.close()
    out.close()
    out.close()
    out.close()


def _vector_ok(view: Operand, cols: int, width: int) -> bool:
    """Whether ``width`` consecutive elements along the contiguous axis are 16-byte aligned
    and either all inside or all outside the matrix (so one cp.async of 16 bytes moves them)."""
    strides = (view.rows, view.offset) + tuple(view.outer_strides)
    return view.cols == 1 and cols % width == 0 and all(s % width == 0 for s in strides)


def _stage(out: _Lines, problem: GemmProblem, names: Names, buffer: str, k_first: str, element: str,
           prologue: Prologue | None) -> None:
    """A[m0.., k0..] and B[k0.., n0..] into shared buffer ``buffer`` (asynchronously on sm_80+)."""
    out.open("")
    out(f"const int s = {buffer}, k0 = {k_first}, tid = threadIdx.x;")
    a_pro = prologue if prologue is not None and prologue.which == "a" else None
    b_pro = prologue if prologue is not None and prologue.which == "b" else None
    _stage_view(out, problem.a, names.a, "a", "fl_as", (problem.m, problem.k), ("m0", "k0"), ("BM", "BK"), element,
                a_pro)
    if isinstance(problem.b, Im2Col):
        _stage_im2col(out, problem, names.b, element, b_pro)
    else:
        _stage_view(out, problem.b, names.b, "b", "fl_bs", (problem.k, problem.n), ("k0", "n0"), ("BK", "BN"),
                    element, b_pro)
    out.close()


def _staged_value(out: _Lines, prologue: Prologue, dest: str, element: str) -> None:
    """``dest`` = the prologue's value of the operand element (0 outside the matrix or the
    image), computed now from what it reads: no copy is in flight for this operand."""
    out("float fl_pv = 0.0f;")
    out.open("if (ok)")
    for d, coord in enumerate(prologue.coords):
        out(f"const long long fl_x{d} = {coord};")
    for line in statements_text(prologue.body, CUDA):
        out(line)
    out(f"fl_pv = {prologue.result};")
    out.close()
    out(f"{dest} = {narrow(element, 'fl_pv') if element in CONVERSIONS else 'fl_pv'};")


def _stage_one(element: str) -> str:
    return "fl_stage4" if element == "float32" else "fl_stage2"


def _stage_view(out: _Lines, view: Operand, name: str, which: str, dest: str, extents: tuple[int, int],
                origin: tuple[str, str], tile: tuple[str, str], element: str, prologue: Prologue | None) -> None:
    """A tile of a strided matrix into ``dest[s][r][c]``: consecutive threads take consecutive
    elements along its contiguous axis (16 bytes at a time where :func:`_vector_ok`), or
    computes each by the prologue from the tensor element (``fl_row``, ``fl_col``) it stands for."""
    rows, cols = extents
    (r0, c0), (tr, tc) = origin, tile
    width = ELEMENTS[element][3]
    if view.cols == 1:
        vec = width if _vector_ok(view, cols, width) and prologue is None else 1
        out.open(f"for (int e = tid; e < {tr} * {tc} / {vec}; e += blockDim.x)")
        out(f"const int r = e / ({tc} / {vec}), c = e % ({tc} / {vec}) * {vec};")
    else:
        vec = 1
        out.open(f"for (int e = tid; e < {tr} * {tc}; e += blockDim.x)")
        out(f"const int r = e % {tr}, c = e / {tr};")
    out(f"const bool ok = {r0} + r < {rows} && {c0} + c < {cols};")
    if prologue is not None:
        out(f"const long long fl_row = {r0} + r, fl_col = {c0} + c;")
        _staged_value(out, prologue, f"{dest}[s][r][c]", element)
        out.close()
        return
    out(f"const {ELEMENTS[element][0]}* src = ok ? {name} + {which}_base + (long long)({r0} + r) * {view.rows}LL + "
        f"(long long)({c0} + c) * {view.cols}LL : {name};")
    out(f"{'fl_stage16' if vec > 1 else _stage_one(element)}(&{dest}[s][r][c], src, ok);")
    out.close()


def _stage_im2col(out: _Lines, problem: GemmProblem, x: str, element: str, prologue: Prologue | None) -> None:
    """B[k, n] of the convolution gathered from the image: k = (channel, kh, kw), n = (oh, ow)."""
    b = problem.b
    assert isinstance(b, Im2Col), "only a convolution's B is gathered from its image"
    kh, kw = b.kernel
    out.open("for (int e = tid; e < BK * BN; e += blockDim.x)")
    out("const int r = e / BN, c = e % BN;")
    out("const int k = k0 + r, n = n0 + c;")
    out(f"const int ch = k / {kh * kw}, tap = k % {kh * kw};")
    out(f"const int iy = n / {b.out_w} * {b.stride[0]} - {b.pads[0]} + tap / {kw} * {b.dilation[0]};")
    out(f"const int ix = n % {b.out_w} * {b.stride[1]} - {b.pads[1]} + tap % {kw} * {b.dilation[1]};")
    out(f"const bool ok = k < {problem.k} && n < {problem.n} && iy >= 0 && iy < {b.in_h} && ix >= 0 && "
        f"ix < {b.in_w};")
    if prologue is not None:
        _staged_value(out, prologue, "fl_bs[s][r][c]", element)
        out.close()
        return
    out(f"const {ELEMENTS[element][0]}* src = ok ? {x} + b_base + (long long)ch * {b.in_h * b.in_w}LL + "
        f"iy * {b.in_w} + ix : {x};")
    out(f"{_stage_one(element)}(&fl_bs[s][r][c], src, ok);")
    out.close()


__all__ = ["PRECISIONS", "PRELUDE", "TILES", "CudaTile", "Names", "Prologue", "choose_tile", "gemm_kernel",
           "grid_size", "prelude"]
