"""The CPU GEMM template: packed panels, an MR x NR register-blocked micro-kernel, a fused
epilogue applied to each finished tile.

The structure is Goto's, as BLIS, MLAS and Inductor's CPU GEMM template share it::

    for each outer index (batch, group):
      for jc in N by NC:                  B panel (KC x NC) packed once, lives in L3
        for pc in K by KC:
          pack B[pc:pc+KC, jc:jc+NC] into NR-wide slivers
          for ic in M by MC:              A block (MC x KC) packed, lives in L2
            pack A[ic:ic+MC, pc:pc+KC] into MR-tall slivers (all of A one block: for the first jc only)
            for jr in NC by NR:           one B sliver (KC x NR) stays in L1
              for ir in MC by MR:
                micro-kernel: C[MR x NR] (+)= A sliver . B sliver
                last pc: the epilogue runs on the tile while it is in L1

The micro-kernel keeps MR x NV vector accumulators in registers (NR = NV vector widths)
and does MR x NV vector FMAs per step of K: on AVX-512 14 x 2 zmm accumulators, 2 B
vectors and one broadcast A value fill 31 of the 32 registers. Packing zero-pads the
edges, so the micro-kernel always runs whole; only the store of an edge tile goes
element by element (no scalar cliff in the compute).

Operands are strided views, so transposed inputs cost nothing beyond packing (A^T and B^T,
the transposes of row-major matrices, have packing routines of their own that read their
contiguous runs). A matmul whose batch shares one B runs as one GEMM of the batch's rows
(:func:`plan_matmul`). B may be
the implicit im2col matrix of a convolution (:class:`Im2Col`): the patch is gathered
while packing and never materialized. A constant operand can be packed once, at compile
time (:func:`pack_constant`), and passed in packed form. A conv on small planes may fold a
batch's images into the columns (:class:`Fold`): one GEMM of n = images * plane, its
tiles stored through a scratch tile where they straddle images.

The blocked loops and the epilogue are one shared *driver* that reads the problem's numbers
(sizes, strides, offsets, blocking, the epilogue's index coefficients) from an array: GEMMs
that differ only in those numbers (squeezenet's 17 conv kernels: 3 drivers) compile one
driver, and each kernel is a call passing its own numbers. The column index keeps its
literal coefficients (the epilogue's loop over it stays unit-stride for the vectorizer) and
so do divisors (a division by a constant is a multiply).

Everything printed here is generated from shapes and our own epilogue code; no text from a
model or a rule file reaches it.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field, replace
from typing import Callable, Protocol

import numpy as np
import sympy as sp

from fusionlang.backend.cexpr import C, IndexPrinter
from fusionlang.backend.epilogue import Statement, next_rows_prefetches, statements_text
from fusionlang.backend.machine import Machine
from fusionlang.ops.access import as_expr

# ----- the problem -------------------------------------------------------------------


@dataclass(frozen=True)
class Operand:
    """A matrix view of a flat float array: element (outer..., r, c) at
    ``offset + sum(outer * outer_strides) + r * rows + c * cols``."""

    rows: int
    cols: int
    offset: int = 0
    outer_strides: tuple[int, ...] = ()


@dataclass(frozen=True)
class Im2Col:
    """B[k, n] of a 2-D convolution as a GEMM, for one image and group: k runs over
    (channel, kh, kw) of the group's input channels, n over (oh, ow); a tap outside the
    image reads 0. ``offset``/``outer_strides`` locate channel 0 of the image and group."""

    channels: int
    in_h: int
    in_w: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    pads: tuple[int, int]  # top, left
    out_h: int
    out_w: int
    offset: int = 0
    outer_strides: tuple[int, ...] = ()


@dataclass(frozen=True)
class Fold:
    """A conv's images side by side in the GEMM's columns: column j is output position
    j % plane of image j // plane (plane: the im2col operand's out_h * out_w), the image's
    input ``b_stride`` floats after the last one's and its output ``c_stride`` floats after.
    On small planes one GEMM of n = images * plane fills the micro-tile's columns where a
    GEMM per image computed padding (2x2 planes: 4 of 64)."""

    images: int
    b_stride: int
    c_stride: int


@dataclass(frozen=True)
class GemmProblem:
    """C[outer..., m, n] = sum_k A[outer..., m, k] * B[outer..., k, n]; with ``fold``, B is
    an im2col operand and n runs over the images too (:class:`Fold`)."""

    m: int
    n: int
    k: int
    a: Operand
    b: Operand | Im2Col
    c: Operand
    outer: tuple[int, ...] = ()
    fold: Fold | None = None

    def __post_init__(self):
        for name, view in (("a", self.a), ("b", self.b), ("c", self.c)):
            if len(view.outer_strides) != len(self.outer):
                raise ValueError(f"operand {name}: {len(view.outer_strides)} outer strides for {len(self.outer)} outer dims")
        if self.fold is not None and not gathers(self.b, self.fold):
            raise ValueError("a folded problem's B is an im2col operand packed by gathers")
        if isinstance(self.b, Im2Col):
            kh, kw = self.b.kernel
            images = self.fold.images if self.fold is not None else 1
            if self.b.channels * kh * kw != self.k or self.b.out_h * self.b.out_w * images != self.n:
                raise ValueError("im2col operand does not match the GEMM's k and n")
        if self.c.cols != 1:
            raise ValueError("C must be row-contiguous (column stride 1): its tiles are stored as vectors")

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k * int(np.prod(self.outer, dtype=np.int64))


@dataclass(frozen=True)
class Epilogue:
    """Statements (:mod:`.epilogue`) run on every element of a finished tile, in a SIMD loop
    over its columns: ``v`` is the accumulated value (float, read and written back to C);
    ``i`` and ``j`` are the element's row and column in the GEMM and ``o0, o1, ...`` its
    outer indices. ``params`` are extra kernel parameters the statements read (bias,
    residual)."""

    body: tuple[Statement, ...]
    params: tuple[str, ...] = ()


def plan_matmul(problem: GemmProblem) -> GemmProblem:
    """The problem a matmul runs as: a batch sharing one B (a weight: B's outer strides all
    0) whose A and C rows lie evenly spaced over the batch folds into M, one GEMM of
    m * batch rows (row r of it is row r % m of batch element r // m). B is then packed
    once, not once per element (Llama's LM head, A [4, 64, 256] by B [256, 8000]: 8 MiB
    of B packed 4 times, for 1 GFLOP); otherwise the problem is unchanged."""
    if not problem.outer or any(problem.b.outer_strides) or not _rows_span_outer(problem.a, problem) \
            or not _rows_span_outer(problem.c, problem):
        return problem
    batch = math.prod(problem.outer)
    return replace(problem, m=problem.m * batch, a=Operand(problem.a.rows, 1, problem.a.offset),
                   b=replace(problem.b, outer_strides=()), c=Operand(problem.c.rows, 1, problem.c.offset), outer=())


def _rows_span_outer(view: Operand, problem: GemmProblem) -> bool:
    """Whether ``view``'s rows over all outer indices are one run of rows ``view.rows``
    apart: row-contiguous, each outer index's rows right after the one before. An outer
    dimension of extent 1 never steps, so its stride is no constraint (an A broadcast over
    it reads stride 0 where C's stride is real: ConvNeXt's Linear on [1, 7, 7, 768])."""
    step = problem.m * view.rows
    for extent, stride in reversed(list(zip(problem.outer, view.outer_strides))):
        if extent != 1 and stride != step:
            return False
        step *= extent
    return view.cols == 1


# ----- blocking ------------------------------------------------------------------------


@dataclass(frozen=True)
class Blocking:
    vl: int  # floats per vector
    mr: int  # rows of the micro-tile (broadcast A values)
    nv: int  # vectors per micro-tile row
    kc: int
    mc: int
    nc: int

    @property
    def nr(self) -> int:
        return self.vl * self.nv


#: micro-tiles (MR, NV) per instruction set, the default first: MR * NV accumulators + NV
#: B vectors + 1 broadcast fit the vector registers (AVX-512 and NEON 32, AVX2 and the
#: fallback 16). The last columns of N run a narrower kernel of the same tile (its first
#: vectors only), so the others serve only M's the default pads by more than a tenth (16 or
#: 32 output channels fill 16 of 18 or 32 of 36 rows of 6-row tiles, all of 8-row ones):
#: a library whose GEMMs share a tile compiles one driver per epilogue. AVX-512's default
#: is 6x4: 1024^3, interleaved, 25 rounds: 6x4 158 GFLOP/s, 14x2 146 (kc 342 to 512 alike).
MICRO_TILES = {"avx512": ((6, 4), (14, 2), (12, 2), (8, 3)), "avx2": ((6, 2), (4, 3)),
               "neon": ((8, 3), (6, 4)), "generic": ((4, 2),)}


def blocking_for(machine: Machine, problem: GemmProblem | None = None, conv: bool = False) -> Blocking:
    """Cache blocking from the machine: a KC x NR sliver of B twice the size of L1 (it
    streams from L2 as the micro-kernel walks it; a longer K per C tile paid more than
    the misses: 1024^3, 6x64 tile, 48 KiB of L1, kc 128 / 192 / 384 / 512 ran 124 / 133
    / 142 / 146 GFLOP/s in one run), K cut into equal blocks, an MC x KC block of A half
    of L2, a KC x NC panel of B a quarter of L3; each is clamped to the problem so small
    GEMMs do not pack padding. The micro-tile is the one of the machine's that wastes the
    least of the problem's M x N on padding (the default unless another saves more than
    2%), or a conv's (``conv``: a pointwise one whose B is a plain matrix; :data:`CONV_TILES`)."""
    vl = machine.vector_floats
    mr, nv = _micro_tile(machine, vl, problem, conv)
    nr = vl * nv
    kc = _clamp(2 * machine.l1d // (nr * 4), 64, 512)
    mc = _clamp(machine.l2 // 2 // (kc * 4), mr, 1024) // mr * mr
    nc = _clamp(machine.l3 // 4 // (kc * 4), nr, 8192) // nr * nr
    if problem is not None:
        blocks = max(1, -(-problem.k // kc))
        kc = max(1, -(-problem.k // blocks))  # K in equal blocks: 576 is 288 + 288, not 384 + 192
        mc = min(mc, _round_up(problem.m, mr))
        if _one_a_block(problem, kc, mc) and isinstance(problem.b, Operand):
            # A is packed once (see _blocked_loops), so a B panel half of L2 costs no
            # repacking and is read back from L2, not L3: m=256 n=8000 k=256, nc 8000 ->
            # 1024 ran 115 -> 134 GFLOP/s (torch 128). A conv's gathered B (im2col) keeps
            # its panel: not measured
            nc = _clamp(machine.l2 // 2 // (kc * 4), nr, nc) // nr * nr
        nc = min(nc, _round_up(problem.n, nr))
        if (conv or isinstance(problem.b, Im2Col)) and _conv_columns(problem, vl) <= nr:
            blocks = max(1, -(-problem.k // ONE_SLIVER_CONV_KC))
            kc = max(kc, -(-problem.k // blocks))
    return Blocking(vl, mr, nv, kc, mc, nc)


#: the longest K block of a conv whose columns are one B sliver (7x7 planes: 49 columns,
#: 63 in place): its micro-kernel walks the weights (read from memory, packed at compile
#: time) down one sliver of B, and a longer walk per C tile paid more than the B sliver's
#: trips from L2. Conv + bias + relu, one core, interleaved with ORT, 31 rounds, ms kc 384
#: or 342 / 768 / 1152: 3x3 512 -> 512 at 7x7 1.94 / 1.80 / 1.81, 256 -> 512 /2 at 14x14
#: 0.99 / 0.92 / 0.92, 512 -> 512 /2 2.05 / 1.89 / 1.86, 1x1 2048 -> 512 at 7x7 0.89 / 0.84
#: / 0.83 (kc 192: 2.02 for the first). Wider planes were unchanged (256 -> 256 at 14x14,
#: 128 -> 128 at 28x28: 1.53 to 1.55 at each)
ONE_SLIVER_CONV_KC = 1152


def _one_a_block(problem: GemmProblem, kc: int, mc: int) -> bool:
    """Whether all of A (per outer index) is one packed MC x KC block."""
    return problem.k <= kc and problem.m <= mc


#: the micro-tile of a conv (an im2col B, packed or read in place) where it pads M no more
#: than the default and the columns computed hold CONV_TILE_MIN_SLIVERS of its slivers
#: (CONV_TILE_MIN_SLIVERS_ONE where the last is one vector wide: 8 broadcasts feed its 8
#: multiply-adds a step). Its B sliver is 3/4 of 6x4's, bytes per multiply-add too. Convs +
#: bias + relu at batch 1 (ResNet's), one core, interleaved with ORT, 15 rounds, ms 6x4 /
#: 8x3: 3x3 64 -> 64 at 56x56 (in place) 1.66 / 1.53, 256 -> 256 at 14x14 (in place, 224
#: columns) 1.64 / 1.57, 64 -> 128 /2 at 56 (784 columns) 0.87 / 0.85, the 7x7/2 stem
#: 1.96 / 1.93; 128 -> 128 at 28x28 packed 1.53, in place 1.50 (DIRECT_MAX_COLUMNS). Kept:
#: 196 columns (4 slivers and a vector) 128 -> 256 /2 at 28 0.87 / 0.91, 512 -> 1024 1x1/2
#: 1.52 / 1.57; 7x7 planes 2.01 / 2.03
#: Pointwise convs (B the input as it lies, packed): 64 -> 64 at 56x56 0.28 / 0.26, 64 ->
#: 256 0.95 / 0.80, 256 -> 64 0.93 / 0.88, 128 -> 512 at 28x28 0.73 / 0.66, 512 -> 128 0.73
#: / 0.70
CONV_TILES = {"avx512": (8, 3)}
CONV_TILE_MIN_SLIVERS, CONV_TILE_MIN_SLIVERS_ONE = 4, 16


def _micro_tile(machine: Machine, vl: int, problem: GemmProblem | None, conv: bool = False) -> tuple[int, int]:
    tiles = MICRO_TILES[machine.isa]
    if problem is None:
        return tiles[0]

    def padded(tile):
        # N's last sliver runs a narrower micro-kernel: N pads to a vector, not to the tile
        return _round_up(problem.m, tile[0]) * _round_up(problem.n, vl)

    conv_tile = _conv_tile(machine, vl, problem, conv)
    if conv_tile is not None and padded(conv_tile) <= padded(tiles[0]):
        return conv_tile
    best = tiles[0]
    for tile in tiles[1:]:  # another tile only where it saves more than 10% of the work
        if padded(tile) < 0.9 * padded(best):
            best = tile
    return best


def _conv_tile(machine: Machine, vl: int, problem: GemmProblem, conv: bool) -> tuple[int, int] | None:
    """CONV_TILES' tile where ``problem`` is a conv (an im2col B, or ``conv``) computing
    enough columns."""
    tile = CONV_TILES.get(machine.isa)
    if tile is None or not (conv or isinstance(problem.b, Im2Col)):
        return None
    columns = _conv_columns(problem, vl)
    width = tile[1] * vl
    one_vector_last = 0 < columns % width <= vl
    slivers = CONV_TILE_MIN_SLIVERS_ONE if one_vector_last else CONV_TILE_MIN_SLIVERS
    return tile if columns >= slivers * width else None


def _conv_columns(problem: GemmProblem, vl: int) -> int:
    """The columns a conv's GEMM computes: n, or its padded width's where it reads its
    planes in place."""
    if isinstance(problem.b, Im2Col) and reads_planes(problem, vl):
        return _direct_columns(problem.b)
    return problem.n


def _clamp(x: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, x))


def _round_up(x: int, step: int) -> int:
    return -(-x // step) * step


# ----- constant operands packed at compile time ----------------------------------------


def packed_size(problem: GemmProblem, blocking: Blocking, which: str) -> int:
    """Floats of the packed form of operand ``which`` ("a" or "b") for one outer index."""
    if which == "a":
        return _round_up(problem.m, blocking.mr) * problem.k
    return _round_up(problem.n, blocking.nr) * problem.k


def pack_constant(flat: np.ndarray, problem: GemmProblem, blocking: Blocking, which: str) -> np.ndarray:
    """The packed form of a constant operand, laid out as the kernel reads it with
    ``packed_a``/``packed_b``: per outer index (the operand's nonzero outer strides only),
    per KC block, every MR (or NR) sliver of the whole M (or N) side, zero-padded."""
    view = problem.a if which == "a" else problem.b
    if isinstance(view, Im2Col):
        raise ValueError("an im2col operand is gathered while packing; it has no constant packed form")
    flat = np.asarray(flat, dtype=np.float32).reshape(-1)
    side, step = (problem.m, blocking.mr) if which == "a" else (problem.n, blocking.nr)
    padded = _round_up(side, step)
    outer_shape = [n if s else 1 for n, s in zip(problem.outer, view.outer_strides)]
    packed = np.zeros(int(np.prod(outer_shape, dtype=np.int64)) * padded * problem.k, np.float32)
    whole = side // step  # slivers with no padding
    pos = 0
    for outer in np.ndindex(*outer_shape):
        base = view.offset + sum(o * s for o, s in zip(outer, view.outer_strides))
        # A[s, k], or B[k, s] gathered transposed: element (s, k) is at base + s*s_step + k*k_step
        s_step, k_step = (view.rows, view.cols) if which == "a" else (view.cols, view.rows)
        source = _strided(flat, base, (side, problem.k), (s_step, k_step))
        for pc in range(0, problem.k, blocking.kc):
            kc = min(blocking.kc, problem.k - pc)
            # per KC block, sliver b holds [p, t] = source[b*step + t, pc + p] (zero past the side)
            block = packed[pos:pos + padded * kc].reshape(padded // step, kc, step)
            block[:whole] = source[:whole * step, pc:pc + kc].reshape(whole, step, kc).transpose(0, 2, 1)
            if side > whole * step:
                block[whole, :, :side - whole * step] = source[whole * step:, pc:pc + kc].T
            pos += padded * kc
    return packed


def _strided(flat: np.ndarray, base: int, shape: tuple[int, int], steps: tuple[int, int]) -> np.ndarray:
    """``flat[base + i*steps[0] + j*steps[1]]`` over ``shape``: a strided view when every
    element is in range (vgg19's first dense layer: an index array of 100 million int64
    took 4 s to build and gather), else gathered by index (which raises as before)."""
    last = base + sum((n - 1) * step for n, step in zip(shape, steps))
    if min(shape) > 0 and min(steps) >= 0 and base >= 0 and last < flat.size:
        return np.lib.stride_tricks.as_strided(flat[base:], shape, tuple(step * flat.itemsize for step in steps),
                                               writeable=False)
    i, j = np.arange(shape[0])[:, None], np.arange(shape[1])[None, :]
    return flat[base + i * steps[0] + j * steps[1]]


# ----- printing ------------------------------------------------------------------------


@dataclass
class Lines:
    lines: list[str] = field(default_factory=list)
    depth: int = 0

    def __call__(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def open(self, text: str) -> None:
        self(text + " {")
        self.depth += 1

    def close(self, text: str = "}") -> None:
        self.depth -= 1
        self(text)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


#: the name of every shared driver starts so (the library and the report find them by it)
DRIVER_PREFIX = "fl_gemm_drive_"


class Numbers:
    """The numbers a shared driver reads at run time: each printed one takes the next slot of
    its array ``S`` (slots follow the printing order, so drivers printed alike share a text)."""

    def __init__(self) -> None:
        self.values: list[int] = []

    def __call__(self, value: int) -> str:
        self.values.append(int(value))
        return f"S[{len(self.values) - 1}]"

    def array(self) -> str:
        return self.array_of(tuple(self.values))

    @staticmethod
    def array_of(values: tuple[int, ...]) -> str:
        """The C table of ``values``, as a kernel passes them to its driver."""
        return f"static const long S[{max(1, len(values))}] = {{{', '.join(f'{v}L' for v in values) or '0L'}}};"


class NumberedIndex(IndexPrinter):
    """Prints an epilogue's index for a shared driver: its integer literals read from
    ``numbers``, so GEMMs that differ only in shapes share the driver's text. The column's
    coefficient stays a literal (its loop stays unit-stride for the vectorizer), and so does
    every literal of an index that divides or selects (a division by a constant is a
    multiply)."""

    def __init__(self, numbers: Numbers) -> None:
        super().__init__()
        self.numbers = numbers

    def __call__(self, e) -> str:
        e = as_expr(e)
        if e.has(sp.floor, sp.ceiling, sp.Mod, sp.Piecewise):
            return IndexPrinter()(e)
        return self.p(e)

    def p(self, e) -> str:
        if isinstance(e, sp.Integer) and abs(int(e)) < 2**31:
            slot = self.numbers(abs(int(e)))
            return slot if e >= 0 else f"(-{slot})"
        if isinstance(e, sp.Mul) and _column_term(e):
            coeff, rest = e.as_coeff_Mul()
            return "(" + " * ".join([IndexPrinter.p(self, coeff)] + [self.p(f) for f in sp.Mul.make_args(rest)]) + ")"
        return super().p(e)


def _column_term(e: sp.Mul) -> bool:
    """``c * j ...`` with a positive literal c: the column's coefficient."""
    coeff, rest = e.as_coeff_Mul()
    first = sp.Mul.make_args(rest)[0]
    return coeff.is_Integer and coeff > 1 and isinstance(first, sp.Symbol) and first.name == "j"


def vector_types(vl: int) -> str:
    """The vector types the template prints: an aligned one for packed panels, an
    element-aligned one for C."""
    return (f"typedef float fl_vf{vl} __attribute__((vector_size({vl * 4})));\n"
            f"typedef float fl_vfu{vl} __attribute__((vector_size({vl * 4}), aligned(4), may_alias));\n")


def gemm_kernel(name: str, problem: GemmProblem, blocking: Blocking, epilogue: Epilogue | None = None,
                *, packed_a: bool = False, packed_b: bool = False, threads: bool = False,
                helpers: dict[str, str] | None = None, linkage: str = "") -> str:
    """C source of ``int name(const float *A, const float *B, float *C, <epilogue params>)``:
    C = A . B over the problem's outer indices, then the epilogue on every element. Returns
    0, or 1 when its packing buffers cannot be allocated (nothing is written then).
    ``threads``: one OpenMP team for the product of each outer index (when all of them
    have :data:`PARALLEL_MIN_MACS` multiply-adds together): its threads pack a share of each panel's slivers each and share the
    panel's tiles (each writes its own block of C). ``helpers``: see
    :func:`_shared`. ``linkage`` goes before the function (``"static "``)."""
    return kernel_printer(problem, blocking, epilogue, packed_a=packed_a, packed_b=packed_b, threads=threads,
                          helpers=helpers, linkage=linkage)(name)


def kernel_printer(problem: GemmProblem, blocking: Blocking, epilogue: Epilogue | None = None, *,
                   packed_a: bool = False, packed_b: bool = False, threads: bool = False,
                   helpers: dict[str, str] | None = None, linkage: str = "") -> Callable[[str], str]:
    """name -> the C of :func:`gemm_kernel` under that name; the blocked GEMM's driver is
    planned (and named) once however often it is printed."""
    if packed_b and isinstance(problem.b, Im2Col):
        raise ValueError("an im2col operand cannot be passed packed")
    if is_gemv(problem) and not (packed_a or packed_b):
        return lambda name: gemv_kernel(name, problem, epilogue, threads=threads, helpers=helpers, vl=blocking.vl,
                                        linkage=linkage)
    fn = gemm_function("", problem, blocking, epilogue, packed_a=packed_a, packed_b=packed_b, threads=threads,
                       linkage=linkage)
    return lambda name: print_gemm(replace(fn, name=name), helpers)


class _Printer(Protocol):
    """Prints a helper's body (a Protocol: mypy accepts lambdas with defaults for it)."""

    def __call__(self, out: Lines, /) -> None: ...


@dataclass(frozen=True)
class Helper:
    """A shape-free routine a driver calls (micro-kernel, packer): printed once per unit or
    library (:func:`_shared`); ``prelude`` holds the types it needs."""

    name: str
    signature: str
    body: _Printer
    prelude: str = ""
    attributes: str = ""  # on its definition only (its declarations may precede their macros)


@dataclass(frozen=True)
class Driver:
    """The blocked loops and the epilogue of a GEMM, every number read from a table ``S``:
    GEMMs whose drivers print alike share one (its name is a hash of its text).
    ``called``: the helpers it calls, declared where it lands."""

    problem: GemmProblem
    blocking: Blocking
    epilogue: Epilogue | None
    packed_a: bool
    packed_b: bool
    threads: bool
    called: tuple[Helper, ...]

    def print(self, name: str, linkage: str) -> tuple[Lines, Numbers]:
        """The driver's text as ``linkage name``, and the numbers it reads, in slot order."""
        numbers, out = Numbers(), Lines()
        # a folded problem's epilogue runs on the scratch tile (see _folded_tile)
        row_stride = f"{self.blocking.nr}L" if self.problem.fold is not None else None
        epilogue_function(out, name, self.problem, self.epilogue, numbers, row_stride, self.blocking.vl)
        _driver(out, name, linkage, self.problem, self.blocking, self.epilogue, self.packed_a, self.packed_b,
                self.threads, numbers)
        return out, numbers

    def signature(self, name: str) -> str:
        return _drive_signature(name, self.epilogue)


#: the name and linkage a driver is printed under to name it by its text's hash (the same
#: for every driver: only what differs between drivers changes the hash)
_HASHED_NAME, _HASHED_LINKAGE = "@DRIVE@", "@LINKAGE@"


@dataclass(frozen=True)
class GemmFunction:
    """``linkage int name(params)``: passes its problem's ``numbers`` to the shared ``driver``
    named ``driver_name``. A value; :func:`print_gemm` prints it."""

    name: str
    params: tuple[str, ...]
    linkage: str
    numbers: tuple[int, ...]
    driver: Driver
    driver_name: str
    comment: str


def gemm_function(name: str, problem: GemmProblem, blocking: Blocking, epilogue: Epilogue | None = None, *,
                  packed_a: bool = False, packed_b: bool = False, threads: bool = False,
                  linkage: str = "") -> GemmFunction:
    """The blocked GEMM kernel of :func:`gemm_kernel` as a value."""
    driver = Driver(problem, blocking, epilogue, packed_a, packed_b, threads,
                    tuple(_helpers_called(problem, blocking, packed_a, packed_b)))
    hashed, numbers = driver.print(_HASHED_NAME, _HASHED_LINKAGE)
    driver_name = f"{DRIVER_PREFIX}{hashlib.sha256(hashed.text().encode()).hexdigest()[:16]}"
    params = ("const float *restrict A", "const float *restrict B", "float *restrict C") + \
        (epilogue.params if epilogue else ())
    comment = (f"/* GEMM template: m={problem.m} n={problem.n} k={problem.k} outer={list(problem.outer)}, "
               f"micro-tile {blocking.mr}x{blocking.nr}, kc={blocking.kc} mc={blocking.mc} nc={blocking.nc} */")
    return GemmFunction(name, params, linkage, tuple(numbers.values), driver, driver_name, comment)


def print_gemm(fn: GemmFunction, helpers: dict[str, str] | None = None) -> str:
    """The kernel's C: its helpers and driver (here, static under guards, or into
    ``helpers`` and declared here: see :func:`_shared`), then the function."""
    out = Lines()
    out(fn.comment)
    for helper in fn.driver.called:
        _shared(out, helpers, helper.name, helper.signature, helper.body, helper.prelude, helper.attributes)
    drive = fn.driver_name
    if helpers is None:
        out(f"#ifndef FL_SHARED_{drive}")
        out(f"#define FL_SHARED_{drive}")
        out.lines.extend(fn.driver.print(drive, "static ")[0].lines)
        out("#endif")
    else:
        if drive not in helpers:
            declarations = "".join(f"{SHARED_LINKAGE}{helper.signature};\n" for helper in fn.driver.called)
            helpers[drive] = declarations + fn.driver.print(drive, SHARED_LINKAGE)[0].text()
        out(f"{SHARED_LINKAGE}{fn.driver.signature(drive)};")
    out.open(f"{fn.linkage}int {fn.name}({', '.join(fn.params)})")
    out(Numbers.array_of(fn.numbers))
    out(f"return {drive}(S, A, B, C{epilogue_args(fn.driver.epilogue)});")
    out.close()
    return out.text()


def _helpers_called(problem: GemmProblem, bl: Blocking, packed_a: bool, packed_b: bool) -> list[Helper]:
    """Each shape-free helper the driver calls: the micro-kernels and the packing routines
    of the operands not passed packed."""
    in_rows = reads_rows(problem, bl.vl, packed_b)
    direct = reads_planes(problem, bl.vl, packed_b) or in_rows
    signature = _DIRECT_MICRO_SIGNATURE if direct else _MICRO_SIGNATURE
    called = [Helper(_micro_name(bl, w, direct),
                     f"__attribute__((noinline)) {signature.format(name=_micro_name(bl, w, direct))}",
                     lambda o, w=w: _micro_kernel(o, bl, w, direct), vector_types(bl.vl)) for w in range(bl.nv, 0, -1)]
    if TAIL_COLUMNS:
        columns = _columns_name(bl, direct)
        called.append(Helper(columns, f"__attribute__((noinline)) {signature.format(name=columns)}",
                             lambda o: _column_kernel(o, bl, direct)))
    if not packed_a:
        pack_a = _pack_a_columns if _columns_contiguous(problem.a) else _pack_a
        called.append(Helper(_pack_a_name(problem, bl), _PACK_A_SIGNATURE.format(name=_pack_a_name(problem, bl)),
                             lambda o: pack_a(o, bl), vector_types(bl.vl)))
    if in_rows:
        pass  # B read where it lies: nothing packs it
    elif direct:
        called.append(Helper(_PAD_NAME, _PAD_SIGNATURE.format(name=_PAD_NAME), _pad_planes))
        called.append(_copy_rows_helper(bl.vl))
    elif _gathered(problem, packed_b):
        gather = _gather_name(problem, bl)
        assert isinstance(problem.b, Im2Col), "only an im2col operand is gathered"
        if not gathers_in_place(problem.b, problem.fold):
            called.append(Helper(_PAD_NAME, _PAD_SIGNATURE.format(name=_PAD_NAME), _pad_planes))
        if _copies(problem, bl):
            step = problem.b.stride[1]
            called.append(Helper(gather, _GATHER_SIGNATURE.format(name=gather), lambda o: _pack_copies(o, bl, step),
                                 vector_types(bl.vl), NO_LIBCALLS))
        else:
            called.append(Helper(gather, _GATHER_SIGNATURE.format(name=gather), lambda o: _pack_gather(o, bl)))
    elif not packed_b and isinstance(problem.b, Im2Col):
        pack = f"fl_gemm_pack_im2col_{bl.nr}"
        called.append(Helper(pack, _IM2COL_SIGNATURE.format(name=pack), lambda o: _pack_im2col(o, bl)))
    elif not packed_b:
        pack_b = _pack_b_rows if _columns_contiguous(problem.b) else _pack_b
        called.append(Helper(_pack_b_name(problem, bl), _PACK_B_SIGNATURE.format(name=_pack_b_name(problem, bl)),
                             lambda o: pack_b(o, bl), vector_types(bl.vl)))
    return called


def _copies(problem: GemmProblem, bl: Blocking) -> bool:
    """Whether a gathered im2col operand is packed by copies of runs (else by gathers)."""
    assert isinstance(problem.b, Im2Col), "only an im2col operand is gathered"
    return copies_runs(problem.b, problem.fold, bl.vl)


def _gather_name(problem: GemmProblem, bl: Blocking) -> str:
    """The routine packing a gathered im2col operand."""
    if not _copies(problem, bl):
        return f"fl_gemm_pack_gather_{bl.nr}"
    step = problem.b.stride[1] if isinstance(problem.b, Im2Col) else 1
    return f"fl_gemm_pack_copies{'' if step == 1 else f'_s{step}'}_{bl.nr}"


def _columns_contiguous(view: Operand | Im2Col) -> bool:
    """Whether a matrix view is the transpose of a row-major one (rows 1 apart, columns
    not): its packing reads each column as a run."""
    return isinstance(view, Operand) and view.rows == 1 and view.cols > 1


def _pack_a_name(problem: GemmProblem, bl: Blocking) -> str:
    return f"fl_gemm_pack_a{'t' if _columns_contiguous(problem.a) else ''}_{bl.mr}"


def _pack_b_name(problem: GemmProblem, bl: Blocking) -> str:
    return f"fl_gemm_pack_b{'t' if _columns_contiguous(problem.b) else ''}_{bl.nr}"


def _drive_signature(drive: str, epilogue: Epilogue | None) -> str:
    return (f"int {drive}(const long *restrict S, const float *restrict A, const float *restrict B, "
            f"float *restrict C{epilogue_params(epilogue)})")


def epilogue_params(epilogue: Epilogue | None) -> str:
    """The epilogue's parameter declarations, each after a comma (empty without one)."""
    return "".join(", " + p for p in epilogue.params) if epilogue else ""


def epilogue_args(epilogue: Epilogue | None) -> str:
    """The epilogue's parameter names as call arguments, each after a comma."""
    return "".join(", " + param_name(p) for p in epilogue.params) if epilogue else ""


#: outputs a GEMV kernel computes together (rows of a transposed weight read side by side)
GEMV_ROWS = 8


def is_gemv(problem: GemmProblem) -> bool:
    """One row or one column of output (a batch-1 dense layer, a 1x1 conv on a pooled
    vector): the matrix is read once, in place, so packing it (at compile time: a copy of
    every weight; at run time a 1024 x 1024 copy for 2 MFLOP) buys nothing, and a 6 x 64
    micro-tile would compute padding for all but one of its rows or columns."""
    return gemv_kind(problem) is not None


def reads_in_place(problem: GemmProblem) -> bool:
    """Whether the template reads the operands as they lie, so a constant one is not packed
    at compile time: the GEMV kinds but few rows, whose constant B packed once runs faster
    in the blocked kernel (m=4 n=1280 k=1000: 0.23 against 0.27 ms, 8x1024x1024: 0.22
    against 0.42); an input B, packed on every call there (0.79 ms), runs the few-rows GEMV."""
    return is_gemv(problem) and gemv_kind(problem) != "rows"


def gemv_kind(problem: GemmProblem) -> str | None:
    """The kernel the template runs for a skinny problem: "row" (m = 1: the vector is A's
    row, the matrix B), "column" (n = 1: the vector is B's column, the matrix A), "narrow"
    (2 to NARROW_N columns: attention's P.V with 4-wide heads, :func:`narrow_kernel`),
    "short" (K up to SHORT_K: attention's Q.K^T with 4-wide heads, :func:`short_kernel`), or
    "rows" (2 to FEW_ROWS rows, A and B contiguous along K: a small batch through a
    transposed weight, :func:`gemv_kernel`), or None for the blocked GEMM."""
    if not isinstance(problem.b, Operand):
        return None
    if problem.m == 1:
        return "row"
    # a column of C written with a stride: C's own view must be column-contiguous for the
    # epilogue's loop (C is [m, 1], so its row stride is 1 as it is laid out)
    if problem.n == 1:
        return "column" if problem.c.rows == 1 else None
    if _narrow(problem):
        return "narrow"
    if _short(problem):
        return "short"
    return "rows" if _few_rows(problem) else None


#: the widest N the narrow kernel takes, and the most floats of B it transposes (on the
#: stack: 64 KiB, within any OpenMP thread's stack)
NARROW_N = 8
NARROW_FLOATS = 1 << 14


def _narrow(problem: GemmProblem) -> bool:
    # K long enough for whole vectors; A's rows contiguous along K (its vectors are loaded)
    b = problem.b
    return (isinstance(b, Operand) and 2 <= problem.n <= NARROW_N and problem.k >= 16 and problem.a.cols == 1
            and problem.n * problem.k <= NARROW_FLOATS)


#: the longest K the short kernel takes, and how many columns of C it computes per row of A
#: before the next row (SHORT_K rows of that many columns of B stay in L1)
SHORT_K = 8
SHORT_COLUMNS = 1024


def _short(problem: GemmProblem) -> bool:
    # B's rows read in place where they are contiguous, else transposed onto the stack
    b = problem.b
    return (isinstance(b, Operand) and 1 <= problem.k <= SHORT_K
            and (b.cols == 1 or problem.n * problem.k <= NARROW_FLOATS))


#: the most rows of A the few-rows GEMV takes: the blocked GEMM packed all of B for them
#: on every call (m=4 n=1280 k=1000, a classifier's input gradient: a 5 MB copy for 10 MFLOP)
FEW_ROWS = GEMV_ROWS


def _few_rows(problem: GemmProblem) -> bool:
    # A's rows and B's columns contiguous along K (dot products of vectors), C's rows
    # contiguous (the epilogue's loop)
    b = problem.b
    return (isinstance(b, Operand) and 2 <= problem.m <= FEW_ROWS and problem.a.cols == 1 and b.rows == 1
            and problem.c.cols == 1)


@dataclass(frozen=True)
class _Gemv:
    """A GEMV as the kernel reads it: out[t] = sum_p x[p] * w[t, p] for t < outputs, with
    x[p] at ``x + p * x_step``, w[t, p] at ``w + t * w_out + p * w_k``, out[t] at
    ``c + t * c_step``."""

    x: str
    x_step: int
    w: str
    w_out: int
    w_k: int
    c_step: int
    outputs: int


def _gemv_view(problem: GemmProblem) -> _Gemv:
    a, b, c = problem.a, problem.b, problem.c
    assert isinstance(b, Operand), "a GEMV reads B in place (is_gemv)"
    if gemv_kind(problem) in ("row", "rows"):
        return _Gemv("a_o", a.cols, "b_o", b.cols, b.rows, c.cols, problem.n)
    return _Gemv("b_o", b.rows, "a_o", a.rows, a.cols, c.rows, problem.m)


def gemv_kernel(name: str, problem: GemmProblem, epilogue: Epilogue | None = None, *, threads: bool = False,
                helpers: dict[str, str] | None = None, vl: int | None = None, linkage: str = "") -> str:
    """C source of ``int name(A, B, C, <epilogue params>)`` for a one-row or one-column
    problem (:func:`gemv_kind`), reading the matrix as it lies: a dot product per output
    when its K axis is contiguous (a transposed weight of a row GEMV, a row-major weight of
    a column GEMV), else an AXPY over the outputs per K step. Returns 0 (it allocates
    nothing). With ``vl`` (floats per vector) and the vector and matrix contiguous along K,
    the dot products run in shared routines of explicit vectors (:func:`_gemv_dots`;
    ``helpers``: see :func:`_shared`), compiled once per library, not once per layer."""
    # a small one stays on the calling thread: see PARALLEL_MIN_MACS
    threads = threads and problem.m * problem.n * problem.k * math.prod(problem.outer) >= PARALLEL_MIN_MACS
    if gemv_kind(problem) == "narrow":
        return narrow_kernel(name, problem, epilogue, threads=threads, helpers=helpers, vl=vl or 4, linkage=linkage)
    if gemv_kind(problem) == "short":
        return short_kernel(name, problem, epilogue, threads=threads, linkage=linkage)
    if gemv_kind(problem) == "rows":
        vl = vl or 4  # it always runs the dot routines (A and B are contiguous along K)
    g = _gemv_view(problem)
    extra, extra_args = epilogue_params(epilogue), epilogue_args(epilogue)
    outer_args = "".join(f", o{d}" for d in range(len(problem.outer)))
    out = Lines()
    out(f"/* GEMV template ({gemv_kind(problem)}): m={problem.m} n={problem.n} k={problem.k} "
        f"outer={list(problem.outer)}, the matrix read in place */")
    shared_dots = vl is not None and g.x_step == 1 and g.w_k == 1
    whole = g.outputs - g.outputs % GEMV_ROWS
    # (outputs a call computes, first output, end): GEMV_ROWS at a time, then one by one
    spans = [span for span in ((GEMV_ROWS, 0, whole), (1, whole, g.outputs)) if span[1] < span[2]]
    if gemv_kind(problem) == "rows" and vl is not None:
        _few_rows_helpers(out, problem.m, vl, helpers)
    elif shared_dots and vl is not None:
        for rows, _, _ in spans:
            dot = _gemv_dot_name(rows, vl)
            _shared(out, helpers, dot, _GEMV_DOT_SIGNATURE.format(name=dot),
                    lambda o, rows=rows: _gemv_dots(o, rows, vl), vector_types(vl))
    epilogue_function(out, name, problem, epilogue)
    out.open(f"{linkage}int {name}(const float *restrict A, const float *restrict B, float *restrict C{extra})")
    for d, extent in enumerate(problem.outer):
        out.open(f"for (long o{d} = 0; o{d} < {extent}; o{d}++)")
    out(f"const float *a_o = A + {_outer_offset(problem.a, False, problem, None, 'a')};")
    out(f"const float *b_o = B + {_outer_offset(problem.b, False, problem, None, 'b')};")
    out(f"float *c_o = C + {_outer_offset(problem.c, False, problem, None, 'c')};")
    if gemv_kind(problem) == "rows" and vl is not None:
        _few_rows_calls(out, problem, g, vl, threads)
    elif shared_dots and vl is not None:
        _gemv_dot_calls(out, g, problem.k, spans, vl, threads)
    elif g.w_k == 1 or g.w_out != 1:
        _gemv_strided_dots(out, g, problem.k, whole, threads)
    else:
        _gemv_axpy(out, g, problem.k)
    if epilogue is not None:
        # the row GEMV's C is one row, the column GEMV's one column, the few-rows' all of C
        rows, cols = (1 if gemv_kind(problem) == "row" else problem.m), (1 if gemv_kind(problem) == "column" else problem.n)
        out(f"{name}_epilogue(c_o, 0, {rows}, 0, {cols}{outer_args}{extra_args});")
    for _ in problem.outer:
        out.close()
    out("return 0;")
    out.close()
    return out.text()


def _gemv_dot_calls(out: Lines, g: _Gemv, k: int, spans, vl: int, threads: bool) -> None:
    args = f"{k}L, {g.x}, {g.w} + j * {g.w_out}L, {g.w_out}L, c_o + j * {g.c_step}L, {g.c_step}L"
    if threads:
        out("#pragma omp parallel for schedule(static)")
    for rows, first, end in spans:
        out(f"for (long j = {first}; j < {end}; j += {rows}) {_gemv_dot_name(rows, vl)}({args});")


#: accumulators of the few-rows routine (rows of A x columns of B): 16 of the 32 vector
#: registers, and each vector of B loaded once for every row of A
FEW_ROWS_SUMS = 16


def _few_rows_columns(rows: int) -> int:
    """Columns of B the few-rows routine dots with ``rows`` rows of A at a time."""
    return max(1, FEW_ROWS_SUMS // rows)


def _few_rows_helpers(out: Lines, rows: int, vl: int, helpers: dict[str, str] | None) -> None:
    for width in sorted({_few_rows_columns(rows), 1}):
        name = _few_rows_name(rows, width, vl)
        _shared(out, helpers, name, _FEW_ROWS_SIGNATURE.format(name=name),
                lambda o, width=width: _few_rows_dots(o, rows, width, vl), vector_types(vl))


def _few_rows_calls(out: Lines, problem: GemmProblem, g: _Gemv, vl: int, threads: bool) -> None:
    # every row of A against a few of B's columns at a time: each vector of B loaded once
    # for all rows (the GEMV's routine loaded it once per row: 0.44 ms for m=4 n=1280 k=1000)
    m, n = problem.m, problem.n
    cols = _few_rows_columns(m)
    whole = n - n % cols
    args = (f"{problem.k}L, {g.x}, {problem.a.rows}L, {g.w} + j * {g.w_out}L, {g.w_out}L, "
            f"c_o + j * {g.c_step}L, {problem.c.rows}L, {g.c_step}L")
    if threads:
        out("#pragma omp parallel for schedule(static)")
    for width, first, end in ((cols, 0, whole), (1, whole, n)):
        if first < end:
            out(f"for (long j = {first}; j < {end}; j += {width}) {_few_rows_name(m, width, vl)}({args});")


_FEW_ROWS_SIGNATURE = ("void {name}(long k, const float *restrict a, long lda, const float *restrict w, long ldw, "
                       "float *restrict c, long ldc, long ldcj)")


def _few_rows_name(rows: int, cols: int, vl: int) -> str:
    return f"fl_gemv_rows{rows}x{cols}v{vl}"


def _few_rows_dots(out: Lines, rows: int, cols: int, vl: int, column_step: str = "ldcj", w: str = "w",
                   ldw: str = "ldw") -> None:
    # c[i * ldc + r * column_step] = a[i * lda ..] . w[r * ldw ..]: a vector accumulator per
    # pair (row 0 alone names no lda or ldc: the GEMV's routine has neither); the GEMV's and
    # the narrow kernel's routines are this one with their own names
    vf, vfu = f"fl_vf{vl}", f"fl_vfu{vl}"

    def row(i: int, step: str) -> str:
        return f"{i} * {step} + " if i else ""

    pairs = [(i, r) for i in range(rows) for r in range(cols)]
    out(f"{vf} " + ", ".join(f"s{i}_{r} = {{0}}" for i, r in pairs) + ";")
    out("long p = 0;")
    out.open(f"for (; p + {vl} <= k; p += {vl})")
    for r in range(cols):
        out(f"const {vf} w{r} = *(const {vfu} *)({w} + {r} * {ldw} + p);")
    for i in range(rows):
        out(f"const {vf} x{i} = *(const {vfu} *)(a + {row(i, 'lda')}p);")
        for r in range(cols):
            out(f"s{i}_{r} += x{i} * w{r};")
    out.close()
    out("float " + ", ".join(f"t{i}_{r} = 0.0f" for i, r in pairs) + ";")
    out.open(f"for (int l = 0; l < {vl}; l++)")
    for i, r in pairs:
        out(f"t{i}_{r} += s{i}_{r}[l];")
    out.close()
    out.open("for (; p < k; p++)")
    for i, r in pairs:
        out(f"t{i}_{r} += a[{row(i, 'lda')}p] * {w}[{r} * {ldw} + p];")
    out.close()
    for i, r in pairs:
        out(f"c[{row(i, 'ldc')}{r} * {column_step}] = t{i}_{r};")


def narrow_kernel(name: str, problem: GemmProblem, epilogue: Epilogue | None = None, *, threads: bool = False,
                  helpers: dict[str, str] | None = None, vl: int = 4, linkage: str = "") -> str:
    """C source of ``int name(A, B, C, <epilogue params>)`` for 2 to NARROW_N columns: B
    transposed onto the stack (N rows along K), then R rows of C at a time, each element a
    dot product along K with vector accumulators (:func:`_narrow_dots`): a 6 x 64 micro-tile
    computed 60 columns of padding for P.V's 4 (m=1024 n=4 k=1024, 8 heads: 5.6 GFLOP/s).
    Returns 0 (it allocates nothing)."""
    a, b, c = problem.a, problem.b, problem.c
    assert isinstance(b, Operand) and _narrow(problem), "the narrow kernel takes 2 to NARROW_N columns of B in place"
    m, n, k = problem.m, problem.n, problem.k
    rows = _narrow_rows(n, vl)
    out = Lines()
    out(f"/* GEMM template (narrow): m={m} n={n} k={k} outer={list(problem.outer)}, {rows} rows a step */")
    for r in sorted({rows, 1}):
        dots = _narrow_name(r, n, vl)
        _shared(out, helpers, dots, _NARROW_SIGNATURE.format(name=dots), lambda o, r=r: _narrow_dots(o, r, n, vl),
                vector_types(vl))
    epilogue_function(out, name, problem, epilogue)
    out.open(f"{linkage}int {name}(const float *restrict A, const float *restrict B, float *restrict C{epilogue_params(epilogue)})")
    out(f"float bt[{n * k}] __attribute__((aligned(64)));")
    for d, extent in enumerate(problem.outer):
        out.open(f"for (long o{d} = 0; o{d} < {extent}; o{d}++)")
    out(f"const float *a_o = A + {_outer_offset(a, False, problem, None, 'a')};")
    out(f"const float *b_o = B + {_outer_offset(b, False, problem, None, 'b')};")
    out(f"float *c_o = C + {_outer_offset(c, False, problem, None, 'c')};")
    out(f"for (long j = 0; j < {n}; j++) for (long p = 0; p < {k}; p++) bt[j * {k} + p] = b_o[p * {b.rows}L + j * {b.cols}L];")
    if threads:
        out("#pragma omp parallel for schedule(static)")
    whole = m - m % rows
    args = f"{k}L, a_o + i * {a.rows}L, {a.rows}L, bt, c_o + i * {c.rows}L, {c.rows}L"
    out(f"for (long i = 0; i < {whole}; i += {rows}) {_narrow_name(rows, n, vl)}({args});")
    if whole < m:
        out(f"for (long i = {whole}; i < {m}; i++) {_narrow_name(1, n, vl)}({args});")
    if epilogue is not None:
        outer_args = "".join(f", o{d}" for d in range(len(problem.outer)))
        out(f"{name}_epilogue(c_o, 0, {m}, 0, {n}{outer_args}{epilogue_args(epilogue)});")
    for _ in problem.outer:
        out.close()
    out("return 0;")
    out.close()
    return out.text()


def short_kernel(name: str, problem: GemmProblem, epilogue: Epilogue | None = None, *, threads: bool = False,
                 linkage: str = "") -> str:
    """C source of ``int name(A, B, C, <epilogue params>)`` for K up to SHORT_K: each row of
    C is K AXPYs of B's rows, written once, in order, and its epilogue run while it is in
    L1; SHORT_COLUMNS columns at a time. A 6 x 64 micro-tile stored a tile for every K of
    4 multiply-adds (Q.K^T, m=n=1024 k=4, 8 heads: 5.9 GFLOP/s). Returns 0 (it allocates
    nothing: B, when its rows are not contiguous, is copied onto the stack)."""
    a, b, c = problem.a, problem.b, problem.c
    assert isinstance(b, Operand) and _short(problem), "the short kernel takes K up to SHORT_K and B in place"
    m, n, k = problem.m, problem.n, problem.k
    in_place = b.cols == 1
    out = Lines()
    out(f"/* GEMM template (short): m={m} n={n} k={k} outer={list(problem.outer)}, "
        f"B {'read in place' if in_place else 'copied'} */")
    epilogue_function(out, name, problem, epilogue)
    out.open(f"{linkage}int {name}(const float *restrict A, const float *restrict B, float *restrict C{epilogue_params(epilogue)})")
    if not in_place:
        out(f"float bk[{n * k}] __attribute__((aligned(64)));")
    for d, extent in enumerate(problem.outer):
        out.open(f"for (long o{d} = 0; o{d} < {extent}; o{d}++)")
    out(f"const float *a_o = A + {_outer_offset(a, False, problem, None, 'a')};")
    out(f"const float *b_o = B + {_outer_offset(b, False, problem, None, 'b')};")
    out(f"float *c_o = C + {_outer_offset(c, False, problem, None, 'c')};")
    if in_place:
        out("const float *b_rows = b_o;")
        ldb = b.rows
    else:
        out(f"for (long p = 0; p < {k}; p++) for (long j = 0; j < {n}; j++) bk[p * {n} + j] = b_o[p * {b.rows}L + j * {b.cols}L];")
        out("const float *b_rows = bk;")
        ldb = n
    out.open(f"for (long j0 = 0; j0 < {n}; j0 += {SHORT_COLUMNS})")
    out(f"const long nn = {n} - j0 < {SHORT_COLUMNS} ? {n} - j0 : {SHORT_COLUMNS};")
    if threads:
        out("#pragma omp parallel for schedule(static)")
    out.open(f"for (long i = 0; i < {m}; i++)")
    out(f"const float *ai = a_o + i * {a.rows}L;")
    out("const float " + ", ".join(f"a{p} = ai[{p * a.cols}L]" for p in range(k)) + ";")
    out(f"float *ci = c_o + i * {c.rows}L + j0;")
    out(f"const float *bj = b_rows + j0;")
    out("#pragma omp simd")
    terms = " + ".join(f"a{p} * bj[{p * ldb}L + j]" for p in range(k))
    out(f"for (long j = 0; j < nn; j++) ci[j] = {terms};")
    if epilogue is not None:
        outer_args = "".join(f", o{d}" for d in range(len(problem.outer)))
        out(f"{name}_epilogue(ci, i, 1, j0, nn{outer_args}{epilogue_args(epilogue)});")
    out.close()
    out.close()
    for _ in problem.outer:
        out.close()
    out("return 0;")
    out.close()
    return out.text()


_NARROW_SIGNATURE = ("void {name}(long k, const float *restrict a, long lda, const float *restrict bt, "
                     "float *restrict c, long ldc)")


def _narrow_rows(n: int, vl: int) -> int:
    # rows x n vector accumulators, n B vectors and rows A vectors within the registers
    # (32 where a vector holds 16 floats or 4 (AVX-512, NEON), else 16)
    accumulators = 16 if vl in (4, 16) else 8
    return max(1, min(8, accumulators // n))


def _narrow_name(rows: int, n: int, vl: int) -> str:
    return f"fl_gemm_narrow_{rows}x{n}v{vl}"


def _narrow_dots(out: Lines, rows: int, n: int, vl: int) -> None:
    # c[r * ldc + j] = a[r * lda ..] . bt[j * k ..]: a vector accumulator per (r, j), each
    # vector of A and of B^T loaded once for all of them
    _few_rows_dots(out, rows, n, vl, column_step="1", w="bt", ldw="k")


def _gemv_strided_dots(out: Lines, g: _Gemv, k: int, whole: int, threads: bool) -> None:
    # GEMV_ROWS outputs at a time: independent sums, and each element of x loaded once for them
    rows = GEMV_ROWS
    if threads:
        out("#pragma omp parallel for schedule(static)")
    out.open(f"for (long j = 0; j < {whole}; j += {rows})")
    out(f"const float *w = {g.w} + j * {g.w_out}L;")
    sums = [f"s{r}" for r in range(rows)]
    out(f"float {', '.join(f'{x} = 0.0f' for x in sums)};")
    out(f"#pragma omp simd reduction(+:{', '.join(sums)})")
    out.open(f"for (long p = 0; p < {k}; p++)")
    out(f"const float xp = {g.x}[p * {g.x_step}L];")
    for r, x in enumerate(sums):
        out(f"{x} += xp * w[{r * g.w_out}L + p * {g.w_k}L];")
    out.close()
    for r, x in enumerate(sums):
        out(f"c_o[(j + {r}) * {g.c_step}L] = {x};")
    out.close()
    out.open(f"for (long j = {whole}; j < {g.outputs}; j++)")
    out(f"const float *w = {g.w} + j * {g.w_out}L;")
    out("float acc = 0.0f;")
    out("#pragma omp simd reduction(+:acc)")
    out(f"for (long p = 0; p < {k}; p++) acc += {g.x}[p * {g.x_step}L] * w[p * {g.w_k}L];")
    out(f"c_o[j * {g.c_step}L] = acc;")
    out.close()


def _gemv_axpy(out: Lines, g: _Gemv, k: int) -> None:
    # the matrix contiguous along the outputs: one AXPY over them per K step
    out(f"for (long j = 0; j < {g.outputs}; j++) c_o[j * {g.c_step}L] = 0.0f;")
    out.open(f"for (long p = 0; p < {k}; p++)")
    out(f"const float xp = {g.x}[p * {g.x_step}L], *w = {g.w} + p * {g.w_k}L;")
    out("#pragma omp simd")
    out(f"for (long j = 0; j < {g.outputs}; j++) c_o[j * {g.c_step}L] += xp * w[j];")
    out.close()


_GEMV_DOT_SIGNATURE = ("void {name}(long k, const float *restrict a, const float *restrict w, long ldw, "
                       "float *restrict c, long ldc)")


def _gemv_dot_name(rows: int, vl: int) -> str:
    return f"fl_gemv_dot{rows}v{vl}"


def _gemv_dots(out: Lines, rows: int, vl: int) -> None:
    # c[r * ldc] = a . w[r * ldw ..] for r < rows: a vector accumulator per row, each vector
    # of a loaded once for all rows; written as vectors, so gcc compiles it in no time, and
    # once per library (a loop nest per layer, vectorized by gcc, took it 0.02 s a layer)
    _few_rows_dots(out, 1, rows, vl, column_step="ldc")


#: how a helper is declared when one copy serves every unit of a library: hidden, so the
#: other units call it directly (no PLT) and no symbol leaks into the process
SHARED_LINKAGE = '__attribute__((visibility("hidden"))) '


def _shared(out: Lines, helpers: dict[str, str] | None, name: str, signature: str, body, prelude: str = "",
            attributes: str = "") -> None:
    """Print a helper that depends only on the blocking (not on the problem's shape), so that
    the C compiler optimizes it once, not once per kernel (densenet121: 120 micro-kernels
    were a third of its compile time).

    ``helpers`` None: the helper is printed here, static, under a guard: a translation unit
    keeps one copy whichever of its kernels prints it first. A dict: the helper's source
    (``prelude``, the types it needs, and the function with :data:`SHARED_LINKAGE`) goes
    into it by name, and only its declaration here: a library of several units then
    compiles each helper once (in one of its units, :mod:`.runtime_c`), not once per unit
    that calls it. ``attributes`` go on the definition only."""
    if helpers is None:
        out(f"#ifndef FL_SHARED_{name}")
        out(f"#define FL_SHARED_{name}")
        out.open(f"{attributes}static {signature}")
        body(out)
        out.close()
        out("#endif")
        return
    if name not in helpers:
        text = Lines()
        text.open(f"{attributes}{SHARED_LINKAGE}{signature}")
        body(text)
        text.close()
        helpers[name] = prelude + text.text()
    out(f"{SHARED_LINKAGE}{signature};")


_MICRO_SIGNATURE = ("void {name}(long kc, const float *restrict a, const float *restrict b, float *restrict c, "
                    "long ldc, int mm, int nn, int accumulate)")
#: the micro-kernel reading B in place (:func:`reads_planes`): row p of its sliver at b + koff[p]
_DIRECT_MICRO_SIGNATURE = ("void {name}(long kc, const float *restrict a, const float *restrict b, "
                           "const long *restrict koff, float *restrict c, long ldc, int mm, int nn, int accumulate)")
_PACK_A_SIGNATURE = "void {name}(const float *restrict src, long rows, long cols, long m, long kc, float *restrict dst)"
_PACK_B_SIGNATURE = "void {name}(const float *restrict src, long rows, long cols, long kc, long n, float *restrict dst)"
#: on a helper that copies short runs: gcc (-O2) turns a loop of vector copies into a call of
#: memcpy (clang likewise), a call per run of 16 to 64 floats. convnet_bn (batch 8, one core,
#: AVX-512): memmove was 8% of the run, from the direct convs' rows into C (64 floats a
#: row) and the 16-float runs of the packed 16x16 conv
NO_LIBCALLS = ("#if defined(__clang__)\n__attribute__((no_builtin(\"memcpy\")))\n"
               "#elif defined(__GNUC__)\n__attribute__((optimize(\"no-tree-loop-distribute-patterns\")))\n#endif\n")
_COPY_ROWS_SIGNATURE = ("void {name}(float *restrict dst, long ldd, const float *restrict src, long lds, long rows, "
                        "long width)")


def _micro_name(bl: Blocking, vectors: int | None = None, direct: bool = False) -> str:
    """The micro-kernel of ``bl``'s tile, or of its first ``vectors`` vectors (a narrower
    kernel over the same packed slivers, for the last columns of a problem); ``direct``:
    the one reading B's rows in place (:func:`reads_planes`)."""
    kind = "direct_" if direct else ""
    if vectors is None or vectors == bl.nv:
        return f"fl_gemm_micro_{kind}{bl.mr}x{bl.nv}v{bl.vl}"
    return f"fl_gemm_micro_{kind}{bl.mr}x{vectors}v{bl.vl}_of{bl.nv}"


#: how far ahead (floats) the micro-kernel prefetches its A sliver, each step. A is most
#: often a conv's weights packed at compile time and read once a call, from L3 or memory
#: (ResNet's 512 -> 512 3x3 conv at 7x7: 9.4 MB, each weight used 49 times), and the
#: hardware prefetcher fell behind; slivers lie one after the other, so this reads into
#: the next tile's. One core, AVX-512, caches flushed before each run, interleaved with
#: ORT: that conv 5.03 -> 2.53 ms (ORT 2.35, 96 floats ahead 3.97, 384 2.59), 256 -> 256
#: at 14x14 2.51 -> 2.14, 64 -> 64 at 56x56 2.26 -> 2.20, the 7x7/2 stem 2.81 -> 2.63
A_PREFETCH_FLOATS = 768


def _micro_kernel(out: Lines, bl: Blocking, vectors: int | None = None, direct: bool = False) -> None:
    # noinline (in its signature): shared by the unit's kernels; a call per MR x NR tile of
    # kc steps costs nothing. ``vectors`` < NV: the same slivers (NR floats a step), only
    # their first vectors computed: the last columns of N cost what they hold, not a tile.
    # ``direct``: step p's B row is read where it lies, at b + koff[p], not packed
    nv = vectors or bl.nv
    row = "b + koff[p] + " if direct else "b + "
    width = nv * bl.vl
    vf, vfu = f"fl_vf{bl.vl}", f"fl_vfu{bl.vl}"
    accs = [[f"c{i}_{v}" for v in range(nv)] for i in range(bl.mr)]
    out(f"{vf} " + ", ".join(f"{acc} = {{0}}" for row in accs for acc in row) + ";")
    # two k steps a trip: 1024^3 on AVX-512, 6x4 tile, ran 159 -> 167 GFLOP/s (4 and 8: no better)
    out("#pragma GCC unroll 2")
    out.open("for (long p = 0; p < kc; p++)")
    if A_PREFETCH_FLOATS:
        out(f"__builtin_prefetch(a + {A_PREFETCH_FLOATS});")
    for v in range(nv):
        # element-aligned loads: a packed constant from NumPy need not be 64-byte aligned,
        # and an unaligned-type load of aligned data costs the same
        out(f"const {vf} b{v} = *(const {vfu} *)({row}{v * bl.vl});")
    for i in range(bl.mr):
        out(f"const float a{i} = a[{i}];")
        for v in range(nv):
            out(f"{accs[i][v]} += a{i} * b{v};")
    out(f"a += {bl.mr};" if direct else f"a += {bl.mr}; b += {bl.nr};")
    out.close()
    out.open(f"if (mm == {bl.mr} && nn == {width})")
    for i in range(bl.mr):
        for v in range(nv):
            ptr = f"(({vfu} *)(c + {i} * ldc + {v * bl.vl}))"
            out(f"if (accumulate) *{ptr} += {accs[i][v]}; else *{ptr} = {accs[i][v]};")
    out.close("} else {")
    out.depth += 1
    out(f"float t[{bl.mr}][{width}] __attribute__((aligned(64)));")
    for i in range(bl.mr):
        for v in range(nv):
            out(f"*({vf} *)&t[{i}][{v * bl.vl}] = {accs[i][v]};")
    out.open("for (int i = 0; i < mm; i++)")
    out.open("for (int j = 0; j < nn; j++)")
    out("float *cp = c + i * ldc + j;")
    out("*cp = accumulate ? *cp + t[i][j] : t[i][j];")
    out.close()
    out.close()
    out.close()


#: the most columns past N's last whole vector that the column kernel computes (each one
#: multiply-add of an MR-lane vector a step) instead of a vector more of the micro-tile
#: (MR multiply-adds a step): 1x1 convs on 7x7 planes compute 48 + 1 columns, not 64
TAIL_COLUMNS = 2
#: the longest K block the column kernel runs: it reads the B sliver's rows again, a line a
#: step, from L2 past L1's (1x1 convs at 7x7 + bias + relu, ms with / without it,
#: interleaved: 160 -> 960 0.144 / 0.188, 320 -> 1280 0.418 / 0.438, 960 -> 160 0.181 / 0.172)
TAIL_MAX_KC = 512
#: independent sums a column of the column kernel keeps (multiply-add latency over throughput)
COLUMN_CHAINS = 4


def _columns_name(bl: Blocking, direct: bool = False) -> str:
    return f"fl_gemm_micro_cols_{'direct_' if direct else ''}{bl.mr}x{TAIL_COLUMNS}v{bl.vl}"


def _column_kernel(out: Lines, bl: Blocking, direct: bool = False) -> None:
    # nn <= TAIL_COLUMNS columns of a tile, the sliver's rows read down K: each step one
    # vector of A's MR floats (and the next step's first, whose products are dropped)
    # times each column's B value; the last step's MR floats are copied alone (a wider
    # load would read past the sliver: a copy every step, through the stack, ran 2x
    # slower than the vector kernel). All TAIL_COLUMNS columns are computed (B's sliver,
    # or the row read in place, is at least that wide past a whole vector); nn are stored
    lanes = 1 << (bl.mr - 1).bit_length()
    out(f"typedef float fl_vr __attribute__((vector_size({lanes * 4})));")
    out(f"typedef float fl_vru __attribute__((vector_size({lanes * 4}), aligned(4), may_alias));")
    out(" ".join(f"fl_vr s{j} = {{0}};" for j in range(TAIL_COLUMNS)))
    whole = "kc" if lanes == bl.mr else "kc - 1"
    # COLUMN_CHAINS steps a trip into sums of their own: one sum a column waited on each
    # multiply-add's latency (960 steps: slower than the vector it replaced)
    chains = COLUMN_CHAINS
    out(" ".join(f"fl_vr s{j}_{u} = {{0}};" for j in range(TAIL_COLUMNS) for u in range(chains)))
    out("long p = 0;")
    out.open(f"for (; p + {chains} <= {whole}; p += {chains})")
    for u in range(chains):
        _column_step(out, bl, direct, f"p + {u}", f"_{u}", f"*(const fl_vru *)(a + (p + {u}) * {bl.mr})")
    out.close()
    for j in range(TAIL_COLUMNS):
        out(f"s{j} = " + " + ".join(f"s{j}_{u}" for u in range(chains)) + ";")
    out.open(f"for (; p < {whole}; p++)")
    _column_step(out, bl, direct, "p", "", f"*(const fl_vru *)(a + p * {bl.mr})")
    out.close()
    if lanes != bl.mr:
        out.open("if (kc > 0)")
        out("fl_vr last = {0};")
        out(f"__builtin_memcpy(&last, a + (kc - 1) * {bl.mr}, {bl.mr * 4});")
        _column_step(out, bl, direct, "kc - 1", "", "last")
        out.close()
    for j in range(TAIL_COLUMNS):
        out.open(f"if ({j} < nn) for (int i = 0; i < mm; i++)")
        out(f"float *cp = c + i * ldc + {j};")
        out(f"*cp = accumulate ? *cp + s{j}[i] : s{j}[i];")
        out.close()


def _column_step(out: Lines, bl: Blocking, direct: bool, step: str, sums: str, a_vector: str) -> None:
    """One step of K of the column kernel: ``a_vector`` times row ``step``'s columns of B,
    into the sums ``s<column><sums>``."""
    row = f"b + koff[{step}]" if direct else f"b + ({step}) * {bl.nr}"
    out("{")
    out.depth += 1
    out(f"const fl_vr av = {a_vector};")
    out(f"const float *bp = {row};")
    for j in range(TAIL_COLUMNS):
        out(f"s{j}{sums} += av * bp[{j}];")
    out.close()


def _pack_a(out: Lines, bl: Blocking) -> None:
    # dst: MR-tall slivers, each kc steps of MR values (column p of the sliver is contiguous)
    out.open(f"for (long i0 = 0; i0 < m; i0 += {bl.mr}, dst += {bl.mr} * kc)")
    out(f"const long mm = m - i0 < {bl.mr} ? m - i0 : {bl.mr};")
    # a full sliver of row-major A: MR row streams read together, dst written in order
    # (the row-by-row copy below scatters its stores MR floats apart)
    out.open(f"if (mm == {bl.mr} && cols == 1)")
    out("const float *row = src + i0 * rows;")
    _pack_a_interleaved(out, bl)
    out(f"for (long p = whole; p < kc; p++) for (int i = 0; i < {bl.mr}; i++) dst[p * {bl.mr} + i] = row[i * rows + p];")
    out("continue;")
    out.close()
    out.open("for (long i = 0; i < mm; i++)")
    out("const float *row = src + (i0 + i) * rows;")
    out(f"if (cols == 1) for (long p = 0; p < kc; p++) dst[p * {bl.mr} + i] = row[p];")
    out(f"else for (long p = 0; p < kc; p++) dst[p * {bl.mr} + i] = row[p * cols];")
    out.close()
    out(f"for (long i = mm; i < {bl.mr}; i++) for (long p = 0; p < kc; p++) dst[p * {bl.mr} + i] = 0.0f;")
    out.close()


def _pack_a_interleaved(out: Lines, bl: Blocking) -> None:
    # a full sliver of row-major A, VL steps of K at a time: one vector from each of its MR
    # rows, dealt into MR stored vectors by two-input shuffles (each row pair's lanes of a
    # stored vector, then merged pair by pair). The step-by-step loop that follows (the K
    # remainder, and all of K before GCC 12) moved one or two floats a load: ViT-S's A
    # packing was 3.2% of its run, the micro-kernel 74%
    vl, mr = bl.vl, bl.mr
    vf, vfu = f"fl_vf{vl}", f"fl_vfu{vl}"
    out("#if defined(__clang__) || __GNUC__ >= 12")
    out(f"const long whole = kc / {vl} * {vl};")
    out.open(f"for (long p = 0; p < whole; p += {vl})")
    out(f"const {vf} " + ", ".join(f"r{i} = *(const {vfu} *)(row + {i} * rows + p)" for i in range(mr)) + ";")
    for k in range(mr):
        out(f"*({vfu} *)(dst + p * {mr} + {k * vl}) = {_interleaved_vector(k, mr, vl)};")
    out.close()
    out("#else")
    out("const long whole = 0;")
    out("#endif")


def _interleaved_vector(k: int, mr: int, vl: int) -> str:
    """Stored vector ``k`` of VL interleaved steps of MR rows ``r0``.. (lane l holds row
    (k * VL + l) % MR at step (k * VL + l) // MR), as nested __builtin_shufflevector calls."""
    lanes = [divmod(k * vl + lane, mr) for lane in range(vl)]  # (step, row) of each lane
    merged = None
    for first in range(0, mr, 2):
        pair = (first, min(first + 1, mr - 1))
        picks = [step + vl * (row - first) if row in pair else -1 for step, row in lanes]
        if all(pick < 0 for pick in picks):
            continue
        part = f"__builtin_shufflevector(r{pair[0]}, r{pair[1]}, {', '.join(map(str, picks))})"
        if merged is None:
            merged = part
        else:
            blend = [vl + lane if row in pair else lane for lane, (_, row) in enumerate(lanes)]
            merged = f"__builtin_shufflevector({merged}, {part}, {', '.join(map(str, blend))})"
    assert merged is not None, "every stored vector holds some row's lanes"
    return merged


#: slivers of A^T packed together, step by step of K (see _pack_a_columns)
A_COLUMN_SLIVERS = 8


def _pack_a_columns(out: Lines, bl: Blocking) -> None:
    # A^T row-major (rows == 1: A's columns contiguous): A_COLUMN_SLIVERS slivers at a
    # time, step by step of K, each step's MR floats of a sliver one short copy from the
    # source's row. _pack_a's path read its MR columns kc rows apart, float by float (m=8000
    # k=256 packed: 3.1 to 3.3 ms; this 0.96; a row-major A 0.7 to 0.9); the whole row a
    # step, 1.6 ms: each step wrote every sliver, MR * kc floats apart, into two L1 sets
    group = A_COLUMN_SLIVERS * bl.mr
    out(f"const long whole = m / {bl.mr} * {bl.mr};")
    out.open(f"for (long g0 = 0; g0 < whole; g0 += {group})")
    out(f"const long g1 = whole - g0 < {group} ? whole : g0 + {group};")
    out.open("for (long p = 0; p < kc; p++)")
    out("const float *row = src + p * cols;")
    out(f"float *d = dst + g0 * kc + p * {bl.mr};")
    out(f"for (long i0 = g0; i0 < g1; i0 += {bl.mr}, d += {bl.mr} * kc) "
        f"__builtin_memcpy(d, row + i0, {4 * bl.mr});")
    out.close()
    out.close()
    out.open("if (whole < m)")
    out("float *d = dst + whole * kc;")
    out(f"for (long p = 0; p < kc; p++) for (long i = 0; i < {bl.mr}; i++) "
        f"d[p * {bl.mr} + i] = whole + i < m ? src[p * cols + whole + i] : 0.0f;")
    out.close()


def _pack_b(out: Lines, bl: Blocking) -> None:
    # dst: NR-wide slivers, each kc rows of NR values
    # row-major B: row by row, each row dealt out to the slivers (sliver by sliver touched
    # a page per row: 1024^3 ran 158 -> 163 GFLOP/s this way)
    out.open("if (cols == 1)")
    out.open("for (long p = 0; p < kc; p++)")
    out("const float *row = src + p * rows;")
    out(f"float *d = dst + p * {bl.nr};")
    out("long j0 = 0;")
    out.open(f"for (; j0 + {bl.nr} <= n; j0 += {bl.nr}, d += {bl.nr} * kc)")
    out("#pragma omp simd  /* vectorized at TEMPLATE_OPT (-O2) too */")
    out(f"for (long j = 0; j < {bl.nr}; j++) d[j] = row[j0 + j];")
    out.close()
    out.open("if (j0 < n)")
    out("for (long j = 0; j < n - j0; j++) d[j] = row[j0 + j];")
    out(f"for (long j = n - j0; j < {bl.nr}; j++) d[j] = 0.0f;")
    out.close()
    out.close()
    out("return;")
    out.close()
    out.open(f"for (long j0 = 0; j0 < n; j0 += {bl.nr}, dst += {bl.nr} * kc)")
    out(f"const long nn = n - j0 < {bl.nr} ? n - j0 : {bl.nr};")
    out.open("for (long p = 0; p < kc; p++)")
    out("const float *row = src + p * rows + j0 * cols;")
    out(f"float *d = dst + p * {bl.nr};")
    out("for (long j = 0; j < nn; j++) d[j] = row[j * cols];")
    out(f"for (long j = nn; j < {bl.nr}; j++) d[j] = 0.0f;")
    out.close()
    out.close()


def _pack_b_rows(out: Lines, bl: Blocking) -> None:
    # B^T row-major (rows == 1: B's columns contiguous): a whole sliver as VL x VL blocks
    # transposed in registers (VL column runs loaded, VL rows of the sliver stored), VL
    # columns at a time down K. _pack_b's strided path read NR columns kc apart for every
    # step, float by float (n=8000 k=256 packed: 1.3 to 1.6 ms, this 0.86 to 0.92; a row-
    # major B 0.6 to 0.8). __builtin_shufflevector is GCC 12's and clang's: an older GCC
    # runs the step-by-step loop below alone
    vl, nr = bl.vl, bl.nr
    vf, vfu = f"fl_vf{vl}", f"fl_vfu{vl}"
    out.open(f"for (long j0 = 0; j0 < n; j0 += {nr}, dst += {nr} * kc)")
    out(f"const long nn = n - j0 < {nr} ? n - j0 : {nr};")
    out("#if defined(__clang__) || __GNUC__ >= 12")
    out(f"const long whole = nn == {nr} ? kc / {vl} * {vl} : 0;  /* steps done by blocks */")
    out.open(f"for (long jb = 0; jb < {nr} && whole; jb += {vl})")
    out.open(f"for (long p0 = 0; p0 < whole; p0 += {vl})")
    out("const float *s = src + (j0 + jb) * cols + p0;")
    out(f"{vf} " + ", ".join(f"r{r}_0 = *(const {vfu} *)(s + {r} * cols)" for r in range(vl)) + ";")
    stage, h = 0, vl // 2
    while h:
        for r in range(vl):
            if r & h:
                continue
            low = [c if not c & h else vl + c - h for c in range(vl)]
            high = [c + h if not c & h else vl + c for c in range(vl)]
            pair = f"r{r}_{stage}, r{r + h}_{stage}"
            out(f"const {vf} r{r}_{stage + 1} = __builtin_shufflevector({pair}, {', '.join(map(str, low))});")
            out(f"const {vf} r{r + h}_{stage + 1} = __builtin_shufflevector({pair}, {', '.join(map(str, high))});")
        stage, h = stage + 1, h // 2
    for r in range(vl):
        out(f"*({vfu} *)(dst + (p0 + {r}) * {nr} + jb) = r{r}_{stage};")
    out.close()
    out.close()
    out("#else")
    out("const long whole = 0;")
    out("#endif")
    out.open("for (long p = whole; p < kc; p++)")
    out(f"for (long j = 0; j < nn; j++) dst[p * {nr} + j] = src[(j0 + j) * cols + p];")
    out(f"for (long j = nn; j < {nr}; j++) dst[p * {nr} + j] = 0.0f;")
    out.close()
    out.close()


#: the geometry an im2col packing routine takes, in this order (see :func:`_im2col_args`)
IM2COL_GEOMETRY = ("taps", "kw", "dh", "dw", "ph", "pw", "in_h", "in_w", "out_w", "sh", "sw")


def _im2col_args(b: Im2Col, num=None) -> str:
    num = num or (lambda value: f"{value}L")
    (kh, kw), (sh, sw), (dh, dw), (ph, pw) = b.kernel, b.stride, b.dilation, b.pads
    values = (kh * kw, kw, dh, dw, ph, pw, b.in_h, b.in_w, b.out_w, sh, sw)
    return ", ".join(num(v) for v in values)


_IM2COL_SIGNATURE = ("void {name}(const float *restrict src, long pc, long kc, long n0, long n, float *restrict dst, "
                     + ", ".join(f"long {g}" for g in IM2COL_GEOMETRY) + ")")


#: an im2col operand whose zero-padded input fits this many floats (2 MiB: in L2, for it is
#: read again for every block) is packed by gathering from such a copy (:func:`_pack_gather`),
#: a larger one by runs of input rows (:func:`_pack_im2col`), which copies nothing first.
#: On small planes the runs are short: 3x3 taps of 512 channels at 7x7 packed at 0.80 ns a
#: float by runs and 0.21 by gathers, 14x14 0.56 and 0.28; 28x28 0.30 and 0.28, 56x56 0.29
#: and 0.31, a 7x7/2 stem 0.30 and 0.30 (one core, AVX-512). Whole convs by gathers: 256
#: channels at 14x14 9% faster, 512 at 7x7 3%, 16 at 55x55 4%; 64 at 56x56 4% slower, a
#: 7x7/2 stem 1%. The light models ran 0 to 6% faster (inception_v1 and v2, densenet121 4
#: to 6%; A/B in one process). One way per driver: a driver that could do both cost gcc
#: 0.035 s more in every library with a conv; keeping wide planes of many channels on runs
#: would put both packers in most libraries for about 0.5% of resnet50
GATHER_MAX_FLOATS = 1 << 19


def gathers(b, fold: Fold | None = None) -> bool:
    """Whether an im2col operand is packed by gathers from a padded copy of its input (of
    every image, ``fold``'s)."""
    images = fold.images if fold is not None else 1
    return isinstance(b, Im2Col) and _padded_floats(b) * images <= GATHER_MAX_FLOATS


def gathers_in_place(b: Im2Col, fold: Fold | None = None) -> bool:
    """Whether a gathered im2col operand is gathered from its input where it lies, with no
    padded copy: every window lies inside the input (no padding, none past the end), and
    its stride along rows is over 1, so it is packed by gathers, never by copies of runs
    (whose last vector may read past a run's end, past the input). Downsampling 1x1
    convs (ResNet's and RegNet's shortcuts) copied their whole input to read a quarter of
    it: RegNet's m=48 n=3136 k=32 at 24 GFLOP/s. Folded, the index holds each image's
    input offset too, so every image's must fit an int."""
    hp, wp = _padded_extent(b)
    images = fold.images if fold is not None else 1
    return b.stride[1] > 1 and b.pads == (0, 0) and hp <= b.in_h and wp <= b.in_w \
        and images * (fold.b_stride if fold is not None else 0) < 1 << 31


def _gathered(problem: GemmProblem, packed_b: bool) -> bool:
    """Whether the kernel packs B by gathers: the helpers it declares, the buffer it
    allocates, the padding it does per image and the packing call all follow this."""
    return not packed_b and gathers(problem.b)


def _padded_extent(b: Im2Col) -> tuple[int, int]:
    """Rows and columns the windows span, from the first padded row and column."""
    (kh, kw), (sh, sw), (dh, dw) = b.kernel, b.stride, b.dilation
    return (b.out_h - 1) * sh + (kh - 1) * dh + 1, (b.out_w - 1) * sw + (kw - 1) * dw + 1


def _padded_floats(b: Im2Col) -> int:
    hp, wp = _padded_extent(b)
    return b.channels * hp * wp


def _gather_floats(b: Im2Col, fold: Fold | None = None) -> int:
    # the padded planes, then the index of every output position (an int in a float's slot);
    # folded, the planes and positions of every image, and each column's offset in C;
    # gathered in place, no planes
    planes = 0 if gathers_in_place(b, fold) else _padded_floats(b)
    if fold is None:
        return _round_up(planes + b.out_h * b.out_w, 16)
    return _round_up(fold.images * (planes + 2 * b.out_h * b.out_w), 16)


_PAD_NAME = "fl_gemm_pad_planes"
_PAD_SIGNATURE = ("void {name}(const float *restrict src, float *restrict planes, int *restrict index, long channels, "
                  "long in_h, long in_w, long ph, long pw, long hp, long wp, long out_h, long out_w, long sh, long sw)")
_GATHER_SIGNATURE = ("void {name}(const float *restrict planes, const int *restrict index, long pc, long kc, long n0, "
                     "long n, float *restrict dst, long taps, long kw, long dh, long dw, long plane, long wp)")


def _pad_planes(out: Lines) -> None:
    # each channel's input into an hp x wp plane of zeros, where window row r and column c
    # are input row r - ph and column c - pw (what lies outside the input is padding); and
    # the offset in a plane of each output position's first tap
    out("const long y0 = ph < 0 ? -ph : 0, y1 = in_h < hp - ph ? in_h : hp - ph;")
    out("const long x0 = pw < 0 ? -pw : 0, x1 = in_w < wp - pw ? in_w : wp - pw;")
    out.open("for (long c = 0; c < channels; c++)")
    out("float *q = planes + c * hp * wp;")
    out("const float *s = src + c * in_h * in_w;")
    out("for (long t = 0; t < hp * wp; t++) q[t] = 0.0f;")
    out.open("for (long y = y0; y < y1; y++)")
    out("#pragma omp simd")
    out("for (long x = x0; x < x1; x++) q[(y + ph) * wp + x + pw] = s[y * in_w + x];")
    out.close()
    out.close()
    out("for (long y = 0; y < out_h; y++) for (long x = 0; x < out_w; x++) index[y * out_w + x] = (int)(y * sh * wp + x * sw);")


def _pack_gather(out: Lines, bl: Blocking) -> None:
    # B rows pc..pc+kc of the implicit patch matrix, columns n0..: tap (channel, ky, kx) of
    # output position q is plane[channel][index[q] + ky*dh*wp + kx*dw], one gather per vector
    # whatever the plane's width, and no bounds: padding is in the planes
    out("const long kh = taps / kw, first_ch = pc / taps, first_ky = pc % taps / kw, first_kx = pc % kw;")
    out.open(f"for (long j0 = 0; j0 < n; j0 += {bl.nr}, dst += {bl.nr} * kc)")
    out(f"const long nn = n - j0 < {bl.nr} ? n - j0 : {bl.nr};")
    out("const int *ix = index + n0 + j0;")
    out("long ch = first_ch, kyi = first_ky, kxi = first_kx;")
    out.open("for (long p = 0; p < kc; p++)")
    out("const float *s = planes + ch * plane + kyi * dh * wp + kxi * dw;")
    out(f"float *d = dst + p * {bl.nr};")
    out("#pragma omp simd")
    out("for (long t = 0; t < nn; t++) d[t] = s[ix[t]];")
    out(f"for (long t = nn; t < {bl.nr}; t++) d[t] = 0.0f;")
    out("if (++kxi == kw) { kxi = 0; if (++kyi == kh) { kyi = 0; ch++; } }")
    out.close()
    out.close()


#: whether a gathered im2col operand of stride 1 along rows copies its runs of consecutive
#: taps (:func:`_pack_copies`) rather than gathering each vector (tests turn it off to
#: cover the gathers of every geometry)
COPY_RUNS = True


#: the strides along rows whose runs of taps are copied: 1, a vector a load; 2 (ResNet's
#: 7x7/2 stem and its 3x3/2 convs), a vector from two loads and a permute, where the
#: gathers it replaces ran 90% of their packing's time on a gather instruction
COPY_STRIDES = (1, 2)


def copies_runs(b: Im2Col, fold: Fold | None, vl: int) -> bool:
    """Whether a gathered im2col operand is packed by copying runs: a stride of 1 or 2 along
    rows (the taps of one output row are every first or second float of a padded plane's
    row; not gathered in place, where a run's last vector may read past the input), output
    rows at least half a vector long (a shorter run's copy fills under half its lanes: 3x3
    convs of 128 channels, one core, AVX-512, copies / gathers: 56x56 0.86, 28x28 0.80,
    14x14 0.82, 7x7 1.20), and positions enough that the index array after the planes
    holds the up to ``stride * vl - 1`` floats a run's last vector reads past the planes."""
    images = fold.images if fold is not None else 1
    step = b.stride[1]
    return COPY_RUNS and step in COPY_STRIDES and not (step > 1 and gathers_in_place(b, fold)) \
        and 2 * b.out_w >= vl and b.out_h * b.out_w * images >= step * vl


def _copy_vector(out: Lines, bl: Blocking, step: int, column: str) -> None:
    """Print the copy of the ``vl`` columns from ``column`` of a run: one vector load, or
    (``step`` 2) the even floats of two loads, one permute (a loop for the compiler to
    vectorize ran 8 lanes, then 4, then one at a time, at AVX-512's preferred width 256)."""
    vf, vfu = f"fl_vf{bl.vl}", f"fl_vfu{bl.vl}"
    if step == 1:
        out(f"*({vfu} *)(d + {column}) = *(const {vfu} *)(from + {column});")
        return
    evens = ", ".join(str(2 * u) for u in range(bl.vl))
    out(f"const {vf} lo = *(const {vfu} *)(from + 2 * {column}), hi = *(const {vfu} *)(from + 2 * {column} + {bl.vl});")
    out("#if defined(__clang__)")
    out(f"*({vfu} *)(d + {column}) = __builtin_shufflevector(lo, hi, {evens});")
    out("#else")
    out(f"*({vfu} *)(d + {column}) = __builtin_shuffle(lo, hi, (fl_vi{bl.vl}){{{evens}}});")
    out("#endif")


def _pack_copies(out: Lines, bl: Blocking, step: int = 1) -> None:
    # as _pack_gather, but stride ``step`` (1 or 2) along rows: the columns of a sliver are
    # runs of offsets ``step`` apart in the planes (an output row's, or its part in the
    # sliver), found once per sliver from the index, and each row of taps is copied run by
    # run, a vector at a time. A run's last vector may spill past it: into the next run's
    # columns, copied after it, or past nn, zeroed after; where it would leave the sliver's
    # row it ends at the run's end instead (the run's own columns copied twice)
    times = "" if step == 1 else f"{step} * "
    if step > 1:  # the permute's lane indices
        out(f"typedef int fl_vi{bl.vl} __attribute__((vector_size({bl.vl * 4})));")
    out("const long kh = taps / kw, first_ch = pc / taps, first_ky = pc % taps / kw, first_kx = pc % kw;")
    out.open(f"for (long j0 = 0; j0 < n; j0 += {bl.nr}, dst += {bl.nr} * kc)")
    out(f"const long nn = n - j0 < {bl.nr} ? n - j0 : {bl.nr};")
    out("const int *ix = index + n0 + j0;")
    out(f"long start[{bl.nr + 1}], runs = 0;")
    out(f"for (long t = 0; t < nn; t++) if (t == 0 || ix[t] != ix[t - 1] + {step}) start[runs++] = t;")
    out("start[runs] = nn;")
    out("long ch = first_ch, kyi = first_ky, kxi = first_kx;")
    out.open("for (long p = 0; p < kc; p++)")
    out("const float *s = planes + ch * plane + kyi * dh * wp + kxi * dw;")
    out(f"float *d = dst + p * {bl.nr};")
    out.open("for (long r = 0; r < runs; r++)")
    out("const long t0 = start[r], t1 = start[r + 1];")
    out(f"const float *from = s + ix[t0] - {times}t0;  /* from[{times}t]: column t's tap */")
    out("long t = t0;")
    out.open(f"for (; t + {bl.vl} <= t1; t += {bl.vl})")
    _copy_vector(out, bl, step, "t")
    out.close()
    out.open("if (t < t1)")
    out.open(f"if (t + {bl.vl} <= {bl.nr})")
    _copy_vector(out, bl, step, "t")
    out.close(f"}} else if (t1 - {bl.vl} >= t0) {{")
    out.depth += 1
    _copy_vector(out, bl, step, f"(t1 - {bl.vl})")
    out.close("} else {")
    out.depth += 1
    if step == 1:  # one call, as gcc made it before NO_LIBCALLS
        out("__builtin_memcpy(d + t, from + t, 4 * (t1 - t));")
    else:
        out(f"for (; t < t1; t++) d[t] = from[{times}t];")
    out.close()
    out.close()
    out.close()
    out(f"for (long t = nn; t < {bl.nr}; t++) d[t] = 0.0f;")
    out("if (++kxi == kw) { kxi = 0; if (++kyi == kh) { kyi = 0; ch++; } }")
    out.close()
    out.close()


#: a conv reads its planes in place (:func:`reads_planes`) where the columns it computes
#: then, padding columns included, are at most this many times the output's (both in whole
#: vectors): 3x3 convs at 56x56 compute 58 columns a row (1.04), at 7x7 9 (64 against 64);
#: or at most 1 + DIRECT_ROWS / m times: the packing it saves is shared by fewer rows of A
#: (one core, AVX-512, time in place / packed: 3x3 convs of 128 channels at 28x28 (1.08)
#: 1.00 to 1.05, grouped ones of 8 channels a group 0.45 to 0.46); 1.09 takes in 28x28
#: planes on AVX-512 (848 columns for 784), where CONV_TILES' tile reads them: 128 -> 128
#: + bias + relu, interleaved, 15 rounds, ms in place 8x3 / packed 6x4 / in place 6x4: 1.50
#: / 1.53 / 1.64
DIRECT_MAX_COLUMNS = 1.09
DIRECT_ROWS = 8
#: a conv of this many output channels or more packs its B: the panel packed is shared by
#: that many rows of A, and reading the planes in place costs its unaligned loads and the
#: copy of the padded result into C (one core, AVX-512, caches flushed before each run,
#: in place / packed ms: 512 -> 512 3x3 at 7x7 2.72 / 2.41, at 14x14 7.70 / 7.21, 256 ->
#: 512 at 7x7 1.52 / 1.45; 256 -> 256 at 14x14 2.12 / 2.14 and 64 -> 64 at 56x56 2.41 /
#: 2.43 alike)
DIRECT_MAX_ROWS = 512
#: whether any conv reads its planes in place (tests turn it off to cover the packers)
READ_PLANES = True


def reads_planes(problem: GemmProblem, vl: int, packed_b: bool = False) -> bool:
    """Whether a conv's B is read in place from its padded planes instead of packed: stride
    1, so the taps of one (channel, ky, kx) for consecutive positions of a padded row are
    consecutive floats of the planes. The GEMM then runs over the padded width (column
    oh * wp + ow, :func:`_direct_columns`): row p of B is the planes from offset koff[p],
    and the wp - out_w columns past each output row are computed and dropped when the
    result is copied into C. The im2col panel packed on every call was a sixth of a 3x3
    conv of 64 channels at 56x56 (one core, AVX-512)."""
    b = problem.b
    if not READ_PLANES or not isinstance(b, Im2Col) or problem.fold is not None or b.stride != (1, 1) \
            or not _gathered(problem, packed_b):
        return False
    if problem.m >= DIRECT_MAX_ROWS:
        return False
    limit = max(DIRECT_MAX_COLUMNS, 1 + DIRECT_ROWS / problem.m)
    return _round_up(_direct_columns(b), vl) <= limit * _round_up(problem.n, vl)


def _direct_columns(b: Im2Col) -> int:
    """The columns a conv read in place computes: its output rows at the padded width."""
    return b.out_h * _padded_extent(b)[1]


#: a GEMM of at most this many rows whose B is row-major reads B's rows where they lie
#: (:func:`reads_rows`); more rows share each packed panel, which then pays for itself.
#: Pointwise conv + bias + relu, one core, in place / packed, interleaved, 21 rounds (busy
#: 2-core VM, CPU time): 32 -> 16 at 112x112 0.65, 16 -> 96 at 112x112 0.84, 96 -> 24 and
#: 144 -> 24 at 56x56 0.96 to 0.98, 144 -> 32 at 28x28 0.96; 24 -> 144 at 56x56 1.01 and
#: 32 -> 192 at 28x28 1.03 (so not past 96 rows)
ROWS_IN_PLACE_MAX_M = 96
#: and at most this long a K: each step is another row's stream (a page apart on large
#: planes), and past it the packed panel's one stream paid: 192 -> 32 at 28x28 0.94; 256 ->
#: 64 at 56x56 1.04 and 1.14, 256 -> 96 at 28x28 1.14 and 1.09, 512 -> 64 at 28x28 0.93 and
#: 1.09 (two runs each)
ROWS_IN_PLACE_MAX_K = 192
#: and at least this many columns (a row's stream is worth the prefetcher's while)
ROWS_IN_PLACE_MIN_N = 512
#: whether any GEMM reads B's rows in place (tests turn it off to cover the packer)
READ_ROWS = True


def reads_rows(problem: GemmProblem, vl: int, packed_b: bool = False) -> bool:
    """Whether a row-major B (a pointwise conv's input as it lies) is read in place by the
    micro-kernel instead of packed: row p of a sliver at B + p * ldb (the direct micro-
    kernel's offsets), the last sliver copied with its rows padded where N is not whole
    vectors (a vector load there would read past B). With few rows of A the packed panel
    is read back by few tiles and its copy is most of the cost (MobileNetV2's 32 -> 16
    pointwise conv at 112x112: m=16 n=12544 k=32)."""
    b = problem.b
    return READ_ROWS and not packed_b and isinstance(b, Operand) and b.cols == 1 and problem.fold is None \
        and problem.m <= ROWS_IN_PLACE_MAX_M and problem.n >= ROWS_IN_PLACE_MIN_N \
        and 0 < problem.k <= ROWS_IN_PLACE_MAX_K


def _rows_buffer(problem: GemmProblem, bl: Blocking) -> tuple[int, int]:
    """Floats of a row-reading GEMM's buffer: each step's offset in B, then in the copy
    (longs, two floats' slots each), then the last sliver's rows copied (k rows of NR
    floats); and where that copy starts."""
    tail = _round_up(4 * problem.k, 16)
    return tail + problem.k * bl.nr, tail


def _rows_tail(out: Lines, problem: GemmProblem, bl: Blocking, num: Numbers) -> None:
    # koff[p]: row p of B, from b_o; the last sliver's columns (from jt) copied into tp,
    # zero past N, with its own offsets (row p at p * NR) in koff + k
    assert isinstance(problem.b, Operand), "only a plain B is read by rows"
    ldb, n, k = num(problem.b.rows), num(problem.n), num(problem.k)
    out("long *koff = (long *)gp;")
    out(f"float *tp = gp + {num(_rows_buffer(problem, bl)[1])};")
    out(f"const long jt = ({n} - 1) / {bl.nr} * {bl.nr};")
    out(f"for (long p = 0; p < {k}; p++) {{ koff[p] = p * {ldb}; koff[{k} + p] = p * {bl.nr}; }}")
    out.open(f"for (long p = 0; p < {k}; p++)")
    out(f"for (long j = 0; j < {bl.nr}; j++) tp[p * {bl.nr} + j] = jt + j < {n} ? b_o[p * {ldb} + jt + j] : 0.0f;")
    out.close()


@dataclass(frozen=True)
class _DirectBuffer:
    """Where the parts of a conv's buffer read in place start, in floats, each on a 64-byte
    line: the padded planes at 0, then zeros for the last rows' reads past them (up to a
    vector past the last padded row's taps), the positions' index (_pad_planes writes it),
    each step's offset in the planes (a long in two floats' slots) and the result over the
    padded width (``row`` floats a row); ``size`` floats in all."""

    zeros: int
    index: int
    offsets: int
    result: int
    row: int
    size: int


def _direct_buffer(problem: GemmProblem) -> _DirectBuffer:
    b = problem.b
    assert isinstance(b, Im2Col), "only a conv reads planes"
    zeros = _round_up(_padded_floats(b), 16)
    index = zeros + _round_up((b.kernel[1] - 1) * b.dilation[1] + 64, 16)
    offsets = index + _round_up(b.out_h * b.out_w, 16)
    result = offsets + _round_up(2 * problem.k, 16)
    row = _round_up(_direct_columns(b), 16)
    return _DirectBuffer(zeros, index, offsets, result, row, result + problem.m * row)


def _direct_offsets(out: Lines, problem: GemmProblem, num: Numbers) -> None:
    # koff[p]: where row p = (channel, ky, kx) of B starts in the planes; and the zeros
    # after them that the last columns' vectors read
    b, buffer = problem.b, _direct_buffer(problem)
    assert isinstance(b, Im2Col), "only a conv reads planes"
    hp, wp = _padded_extent(b)
    (kh, kw), (dh, dw) = b.kernel, b.dilation
    out(f"for (long t = {num(_padded_floats(b))}; t < {num(buffer.index)}; t++) gp[t] = 0.0f;")
    out(f"const long taps = {num(kh * kw)}, kw = {num(kw)};")
    out(f"for (long p = 0; p < {num(b.channels * kh * kw)}; p++) koff[p] = p / taps * {num(hp * wp)} + "
        f"p % taps / kw * {num(dh * wp)} + p % kw * {num(dw)};")


def _copy_rows_helper(vl: int) -> Helper:
    name = f"fl_gemm_copy_rows_{vl}"
    return Helper(name, _COPY_ROWS_SIGNATURE.format(name=name), lambda o: _copy_rows(o, vl), vector_types(vl),
                  NO_LIBCALLS)


def _copy_rows(out: Lines, vl: int) -> None:
    # rows of ``width`` floats, whole vectors; a row's last vector ends at its end (overlapping
    # the one before), and only a row narrower than a vector is a call of memcpy
    vfu = f"fl_vfu{vl}"
    out.open("for (long r = 0; r < rows; r++)")
    out("float *d = dst + r * ldd;")
    out("const float *s = src + r * lds;")
    out(f"if (width < {vl}) {{ __builtin_memcpy(d, s, 4 * width); continue; }}")
    out("long x = 0;")
    out(f"for (; x + {vl} <= width; x += {vl}) *({vfu} *)(d + x) = *(const {vfu} *)(s + x);")
    out(f"if (x < width) *({vfu} *)(d + width - {vl}) = *(const {vfu} *)(s + width - {vl});")
    out.close()


def _direct_store(out: Lines, name: str, problem: GemmProblem, epilogue: Epilogue | None, outer_args: str,
                  extra_args: str, num: Numbers, vl: int, threads: bool = False) -> None:
    # the result's rows at the padded width, row by row of the output plane into C, then
    # the epilogue on C's row (its columns are the output positions again); with threads,
    # the rows shared by the team (after the tiles' loop and its barrier), not run by the
    # caller alone with the other threads idle (64 -> 64 at 56x56 + bias + relu, two
    # threads, min of 41 wall times interleaved on a loaded machine: 1.65 -> 1.33 ms)
    b = problem.b
    assert isinstance(b, Im2Col), "only a conv reads planes"
    wp, width = num(_padded_extent(b)[1]), num(_direct_buffer(problem).row)
    out_h, out_w, ldc = num(b.out_h), num(b.out_w), num(problem.c.rows)
    if threads:
        out("#pragma omp for schedule(static)")
    out.open(f"for (long i = 0; i < {num(problem.m)}; i++)")
    out(f"{_copy_rows_helper(vl).name}(c_o + i * {ldc}, {out_w}, xp + i * {width}, {wp}, {out_h}, {out_w});")
    if epilogue is not None:
        out(f"{name}_epilogue(S, c_o + i * {ldc}, i, 1, 0, {num(problem.n)}{outer_args}{extra_args});")
    out.close()


def im2col_blocking(machine: Machine, problem: GemmProblem, bl: Blocking) -> Blocking:
    """``bl`` with the B panel of an (unfolded) im2col operand cut to a quarter of L2: the
    panel is packed on every call and read back by each MR-row block of A, from L2 rather
    than L3 (a conv's few output channels read it few times: 3x3 convs, one core, AVX-512,
    time with the panel in L2 / in L3: densenet's 128 -> 32 at 56x56 0.73 to 0.86, 28x28
    0.86, resnet18's 64 -> 64 at 56x56 0.80, its 7x7/2 stem 0.92, 64 -> 128 /2 0.97)."""
    if not isinstance(problem.b, Im2Col) or problem.fold is not None:
        return bl
    nc = max(bl.nr, machine.l2 // 4 // (bl.kc * 4) // bl.nr * bl.nr)
    return replace(bl, nc=min(bl.nc, nc))


def _pack_im2col(out: Lines, bl: Blocking) -> None:
    # B rows pc..pc+kc of the implicit patch matrix, columns n0.. of the output plane.
    # A sliver's columns run along output rows; within one output row the taps of one
    # (channel, ky, kx) are one strided run of an input row (contiguous at stride 1),
    # with zeros where the run leaves the image: three plain loops, no test per element.
    # No division in the loops: (channel, ky, kx) and (oh, ow) are counted, not divided
    # out, so the routine is as fast with its geometry in registers as with it folded in
    # as constants (a division per run of 7 to 56 elements was a tenth of a conv's time).
    out("const long kh = taps / kw, first_ch = pc / taps, first_ky = pc % taps / kw, first_kx = pc % kw;")
    out("const long plane_size = in_h * in_w;")
    out.open(f"for (long j0 = 0; j0 < n; j0 += {bl.nr}, dst += {bl.nr} * kc)")
    out(f"const long nn = n - j0 < {bl.nr} ? n - j0 : {bl.nr};")
    out("const long oh0 = (n0 + j0) / out_w, ow0 = (n0 + j0) % out_w;")
    out("long ch = first_ch, kyi = first_ky, kxi = first_kx;")
    out.open("for (long p = 0; p < kc; p++)")
    out("const long ky = kyi * dh - ph, kx = kxi * dw - pw;")
    out("const float *plane = src + ch * plane_size;")
    out(f"float *d = dst + p * {bl.nr};")
    out("long j = 0, oh = oh0, ow = ow0;")
    out.open("while (j < nn)")
    out("const long seg = nn - j < out_w - ow ? nn - j : out_w - ow;")
    out("const long y = oh * sh + ky, x0 = ow * sw + kx;")
    out("long lo = seg, hi = seg;")
    out.open("if (y >= 0 && y < in_h)")
    out.open("if (sw == 1)")
    out("lo = x0 >= 0 ? 0 : -x0;")
    out("hi = in_w - x0;")
    out.close("} else {")
    out.depth += 1
    out("lo = x0 >= 0 ? 0 : (-x0 + sw - 1) / sw;")
    out("hi = x0 >= in_w ? 0 : (in_w - 1 - x0) / sw + 1;")
    out.close()
    out("if (lo > seg) lo = seg;")
    out("if (hi > seg) hi = seg;")
    out("if (hi < lo) hi = lo;")
    out.close()
    out("const long base = y * in_w + x0;  /* an index, not a pointer: y may be outside */")
    out("for (long t = 0; t < lo; t++) d[j + t] = 0.0f;")
    out.open("if (sw == 1)")
    out("#pragma omp simd  /* vectorized at TEMPLATE_OPT (-O2) too */")
    out("for (long t = lo; t < hi; t++) d[j + t] = plane[base + t];")
    out.close("} else if (sw == 2) {")
    out.depth += 1
    # the stride of most strided convs (resnet's and squeezenet's stems, downsampling):
    # with the stride a literal the loop vectorizes as loads and an even-lane permute
    out("#pragma omp simd")
    out("for (long t = lo; t < hi; t++) d[j + t] = plane[base + 2 * t];")
    out.close("} else if (sw == 4) {")
    out.depth += 1
    # alexnet's 11x11/4 stem: with the stride a literal this loop vectorizes too
    # (alexnet's stem 2.27-2.57 -> 2.05 ms, per-kernel profile)
    out("#pragma omp simd")
    out("for (long t = lo; t < hi; t++) d[j + t] = plane[base + 4 * t];")
    out.close("} else {")
    out.depth += 1
    out("for (long t = lo; t < hi; t++) d[j + t] = plane[base + t * sw];")
    out.close()
    out("for (long t = hi; t < seg; t++) d[j + t] = 0.0f;")
    out("j += seg; oh++; ow = 0;")
    out.close()
    out(f"for (long t = nn; t < {bl.nr}; t++) d[t] = 0.0f;")
    out("if (++kxi == kw) { kxi = 0; if (++kyi == kh) { kyi = 0; ch++; } }")
    out.close()
    out.close()


def _outer_params(problem: GemmProblem) -> str:
    return "".join(f", long o{d}" for d in range(len(problem.outer)))


def epilogue_function(out: Lines, name: str, problem: GemmProblem, epilogue: Epilogue | None,
                      numbers: Numbers | None = None, row_stride: str | None = None, vl: int = 0) -> None:
    """``name_epilogue(c, i0, mm, j0, nn, o..., params)``: the epilogue over an mm x nn tile
    of C at row i0, column j0 (``c`` points at its first element, its rows ``row_stride``
    apart: C's by default). With ``numbers`` it also takes the driver's ``S`` first and
    reads its numbers from it; ``vl`` (floats a vector) sets the SIMD loop's length."""
    if epilogue is None:
        return
    extra = epilogue_params(epilogue)
    numbered = numbers is not None
    head = "const long *restrict S, " if numbered else ""
    # a shared driver's epilogue stays a call: it runs once per finished tile (the models
    # within +-2.6%), and inlined into the blocked loops gcc spent 0.07 s on the driver
    # against 0.05 s (-O2; zfnet512's template unit 0.256 -> 0.240 s)
    linkage = "__attribute__((noinline)) static void" if numbered else "static inline void"
    out.open(f"{linkage} {name}_epilogue({head}float *restrict c, long i0, long mm, long j0, long nn"
             f"{_outer_params(problem)}{extra})")
    out.open("for (long i = i0; i < i0 + mm; i++)")
    if row_stride is None:
        row_stride = numbers(problem.c.rows) if numbers is not None else f"{problem.c.rows}L"
    out(f"float *row = c + (i - i0) * {row_stride} - j0;")
    if numbers is not None:  # a blocked driver's tile: the next one lies below
        for line in next_rows_prefetches(epilogue.body, NumberedIndex(numbers)):
            out(line)
    # vl: gcc's -O2 tuning vectorizes with 256-bit vectors where the micro-kernel's are 512
    # (erf GELU's backward over a 6 x 64 tile: 0.27 -> 0.22 ms per 256 x 1024)
    out(f"#pragma omp simd simdlen({vl})" if vl else "#pragma omp simd")
    out.open("for (long j = j0; j < j0 + nn; j++)")
    out("float v = row[j];")
    for line in statements_text(epilogue.body, C, NumberedIndex(numbers) if numbers is not None else None):
        out(line)
    out("row[j] = v;")
    out.close()
    out.close()
    out.close()


def _a_block(bl: Blocking) -> int:
    return _round_up(_round_up(bl.mc, bl.mr) * bl.kc, 16)  # whole 64-byte lines


def _b_panel(bl: Blocking) -> int:
    return _round_up(_round_up(bl.nc, bl.nr) * bl.kc, 16)


def packing_floats(problem: GemmProblem, bl: Blocking, packed_a: bool = False, packed_b: bool = False) -> int:
    """Floats of packing buffers the kernel allocates on each call."""
    if is_gemv(problem) and not (packed_a or packed_b):
        return 0
    if reads_planes(problem, bl.vl, packed_b):
        return (0 if packed_a else _a_block(bl)) + _direct_buffer(problem).size
    if reads_rows(problem, bl.vl, packed_b):
        return (0 if packed_a else _a_block(bl)) + _rows_buffer(problem, bl)[0]
    gather = _gather_floats(problem.b, problem.fold) if _gathered(problem, packed_b) and isinstance(problem.b, Im2Col) \
        else 0
    return (0 if packed_a else _a_block(bl)) + (0 if packed_b else _b_panel(bl)) + gather


def _allocator(out: Lines, name: str) -> None:
    # 64-byte aligned packing buffers (aligned_alloc wants whole lines); compiled with
    # -DFL_ALLOC_LIMIT=N a request above N bytes fails, which is how tests make it fail
    out.open(f"static inline float *{name}_alloc(size_t n)")
    out("#ifdef FL_ALLOC_LIMIT")
    out("if (n > (size_t)(FL_ALLOC_LIMIT)) return NULL;")
    out("#endif")
    out("return (float *)aligned_alloc(64, n);")
    out.close()


def _driver(out: Lines, name: str, linkage: str, problem: GemmProblem, bl: Blocking, epilogue: Epilogue | None,
            packed_a: bool, packed_b: bool, threads: bool, num: Numbers) -> None:
    """``int name(S, A, B, C, <epilogue params>)``: the blocked loops, every number read from S."""
    extra_args = epilogue_args(epilogue)
    outer_args = "".join(f", o{d}" for d in range(len(problem.outer)))
    if not (packed_a and packed_b):
        _allocator(out, name)
    if threads:  # declared here, not by omp.h: a unit's prelude is the same with or without threads
        out("int omp_get_num_threads(void);\nint omp_get_thread_num(void);")
    per_image = images_shared(problem, bl, packed_a, packed_b, threads)
    if per_image:
        out("int omp_get_max_threads(void);")
    out.open(linkage + _drive_signature(name, epilogue))
    if not packed_a:
        out(f"float *ap = {name}_alloc({num(4 * _a_block(bl))});")
    direct = reads_planes(problem, bl.vl, packed_b)
    in_rows = reads_rows(problem, bl.vl, packed_b)
    if not packed_b and not direct and not in_rows:
        out(f"float *bp = {name}_alloc({num(4 * _b_panel(bl))});")
    gather = _gathered(problem, packed_b)
    if per_image:  # a buffer for each member of the team
        out("const long members = omp_get_max_threads();")
        out(f"float *gp = {name}_alloc({num(4 * _direct_buffer(problem).size)} * members);")
    elif in_rows:
        out(f"float *gp = {name}_alloc({num(4 * _rows_buffer(problem, bl)[0])});")
    elif direct:
        out(f"float *gp = {name}_alloc({num(4 * _direct_buffer(problem).size)});")
    elif gather and isinstance(problem.b, Im2Col):
        out(f"float *gp = {name}_alloc({num(4 * _gather_floats(problem.b, problem.fold))});")
    skips = (("ap", packed_a), ("bp", packed_b or direct or in_rows), ("gp", not (gather or in_rows)))
    checks = [v for v, skip in skips if not skip]
    if checks:
        out(f"if ({' || '.join('!' + v for v in checks)}) {{ {' '.join(f'free({v});' for v in checks)} return 1; }}")
    if per_image:
        _open_images_team(out, num(_direct_buffer(problem).size), len(problem.outer))
        threads = False  # inside, each member runs its images' loops alone
    for d, extent in enumerate(problem.outer):
        out.open(f"for (long o{d} = 0; o{d} < {num(extent)}; o{d}++)")
    out(f"const float *a_o = A + {_outer_offset(problem.a, packed_a, problem, bl, 'a', num)};")
    out(f"const float *b_o = B + {_outer_offset(problem.b, packed_b, problem, bl, 'b', num)};")
    out(f"float *c_o = C + {_outer_offset(problem.c, False, problem, bl, 'c', num)};")
    if in_rows:
        _rows_tail(out, problem, bl, num)
    elif direct and problem.k > 0 and isinstance(problem.b, Im2Col):
        buffer = _direct_buffer(problem)
        _pad_call(out, problem.b, num, buffer.index)
        out(f"long *koff = (long *)(gp + {num(buffer.offsets)});")
        out(f"float *xp = gp + {num(buffer.result)};")
        _direct_offsets(out, problem, num)
    elif gather and problem.k > 0 and isinstance(problem.b, Im2Col):
        if gathers_in_place(problem.b, problem.fold):
            _in_place_index(out, problem.b, problem.fold, num)
        elif problem.fold is None:
            _pad_call(out, problem.b, num)
        else:
            _pad_images(out, problem.b, problem.fold, num)
    if problem.k == 0:
        _zero_k(out, name, problem, epilogue, outer_args, extra_args, num)
    else:
        _blocked_loops(out, name, problem, bl, epilogue, packed_a, packed_b, gather, outer_args, extra_args, threads,
                       num)
    for _ in problem.outer:
        out.close()
    if per_image:
        out.close()
    for v in checks:
        out(f"free({v});")
    out("return 0;")
    out.close()


#: a conv read in place (:func:`reads_planes`) over at least this many images (outer
#: indices), on threads, gives each member of the team its own images, its own buffer and
#: its own pad step: one region per image (its pad and copy steps on one thread, the other
#: waiting) kept the worker idle a fifth of convnet_bn's first conv (batch 8, 3 -> 32 at
#: 64x64: region 0.56 ms, worker busy 0.46)
IMAGES_SHARED_MIN = 4


def images_shared(problem: GemmProblem, bl: Blocking, packed_a: bool, packed_b: bool, threads: bool) -> bool:
    """Whether the team shares a conv's images rather than each image's tiles: a conv read
    in place with its weights packed (no A block packed on the way), at least
    :data:`IMAGES_SHARED_MIN` images and work enough for a team."""
    images = math.prod(problem.outer)
    return threads and packed_a and problem.k > 0 and images >= IMAGES_SHARED_MIN \
        and reads_planes(problem, bl.vl, packed_b) \
        and problem.m * problem.n * problem.k * images >= PARALLEL_MIN_MACS


def _open_images_team(out: Lines, buffer_floats: str, outer: int) -> None:
    # one region for all images, each member its share of them (static: images cost alike)
    # in its own slice of the buffer; the region's end is the only barrier
    out("float *const buffers = gp;")
    out("#pragma omp parallel")
    out("{")
    out.depth += 1
    out(f"float *const gp = buffers + omp_get_thread_num() * {buffer_floats};")
    out(f"#pragma omp for collapse({outer}) schedule(static)" if outer > 1 else "#pragma omp for schedule(static)")


def _pad_call(out: Lines, b: Im2Col, num: Numbers, index_at: int | None = None) -> None:
    # this image's (and group's) channels into padded planes, once for all its blocks; the
    # positions' index right after them, or ``index_at`` floats into the buffer
    hp, wp = _padded_extent(b)
    (sh, sw), (ph, pw) = b.stride, b.pads
    out(f"int *gix = (int *)(gp + {num(_padded_floats(b) if index_at is None else index_at)});")
    values = (b.channels, b.in_h, b.in_w, ph, pw, hp, wp, b.out_h, b.out_w, sh, sw)
    out(f"{_PAD_NAME}(b_o, gp, gix, {', '.join(num(v) for v in values)});")


def _pad_images(out: Lines, b: Im2Col, fold: Fold, num: Numbers) -> None:
    # every image's channels into padded planes (image after image), the gather index of
    # each folded column (its image's planes included) and its offset in C (image and position)
    hp, wp = _padded_extent(b)
    (sh, sw), (ph, pw) = b.stride, b.pads
    padded, plane = _padded_floats(b), b.out_h * b.out_w
    out(f"int *gix = (int *)(gp + {num(fold.images * padded)});")
    out(f"int *cix = gix + {num(fold.images * plane)};")
    values = (b.channels, b.in_h, b.in_w, ph, pw, hp, wp, b.out_h, b.out_w, sh, sw)
    out.open(f"for (long img = 0; img < {num(fold.images)}; img++)")
    out(f"int *ix = gix + img * {num(plane)}, *cx = cix + img * {num(plane)};")
    out(f"{_PAD_NAME}(b_o + img * {num(fold.b_stride)}, gp + img * {num(padded)}, ix, "
        f"{', '.join(num(v) for v in values)});")
    out(f"for (long q = 0; q < {num(plane)}; q++) {{ ix[q] += (int)(img * {num(padded)}); "
        f"cx[q] = (int)(img * {num(fold.c_stride)} + q); }}")
    out.close()


def _in_place_index(out: Lines, b: Im2Col, fold: Fold | None, num: Numbers) -> None:
    # the offset in the input of each output position's first tap (of each folded column,
    # its image's input included) and, folded, each column's offset in C: as _pad_call and
    # _pad_images index their planes, with the input read where it lies
    images, plane = fold.images if fold is not None else 1, b.out_h * b.out_w
    (sh, sw), ow = b.stride, num(b.out_w)
    out("int *gix = (int *)gp;")
    if fold is not None:
        out(f"int *cix = gix + {num(images * plane)};")
    out.open(f"for (long img = 0; img < {num(images)}; img++)")
    out(f"int *ix = gix + img * {num(plane)};")
    source = f"img * {num(fold.b_stride)} + " if fold is not None else ""
    out(f"for (long y = 0; y < {num(b.out_h)}; y++) for (long x = 0; x < {ow}; x++) "
        f"ix[y * {ow} + x] = (int)({source}y * {num(sh * b.in_w)} + x * {num(sw)});")
    if fold is not None:
        out(f"for (long q = 0; q < {num(plane)}; q++) cix[img * {num(plane)} + q] = (int)(img * {num(fold.c_stride)} + q);")
    out.close()


def _folded_tile(out: Lines, name: str, bl: Blocking, epilogue: Epilogue | None, outer_args: str,
                 extra_args: str) -> None:
    """A tile of a folded problem. Its columns in one run of C (within an image): the
    micro-kernel accumulates there, as unfolded, and the epilogue runs on a copy in a
    scratch tile (its rows NR apart: the epilogue's row stride). Its columns straddling
    images (a plane under NR columns puts several in every tile): the micro-kernel writes
    the scratch tile, the partial sum of the K blocks before is added from C, the epilogue
    runs on it, and each element is stored at its column's offset (cix) in C's row."""
    out(f"float tile[{bl.mr * bl.nr}] __attribute__((aligned(64)));")
    out("float *ct = c_o + (ic + ir) * ldc;")
    out("const int *cj = cix + jc + jr;")
    out.open("if (cj[nn - 1] - cj[0] == nn - 1)")
    out("float *run = ct + cj[0];")
    _micro_calls(out, bl, "apan + ir * kc", "bpan + jr * kc", "run", "ldc", "pc > 0")
    if epilogue is not None:
        out.open("if (pc + kc == k)")
        _tile_copy(out, bl, "tile[i * {nr} + j] = run[i * ldc + j]")
        out(f"{name}_epilogue(S, tile, ic + ir, mm, jc + jr, nn{outer_args}{extra_args});")
        _tile_copy(out, bl, "run[i * ldc + j] = tile[i * {nr} + j]")
        out.close()
    out.close("} else {")
    out.depth += 1
    _micro_calls(out, bl, "apan + ir * kc", "bpan + jr * kc", "tile", str(bl.nr), "0")
    out.open("if (pc > 0)")
    _tile_copy(out, bl, "tile[i * {nr} + j] += ct[i * ldc + cj[j]]")
    out.close()
    if epilogue is not None:
        out(f"if (pc + kc == k) {name}_epilogue(S, tile, ic + ir, mm, jc + jr, nn{outer_args}{extra_args});")
    _tile_copy(out, bl, "ct[i * ldc + cj[j]] = tile[i * {nr} + j]")
    out.close()


def _tile_copy(out: Lines, bl: Blocking, assignment: str) -> None:
    """``assignment`` (NR: ``{nr}``) over the mm x nn elements (i, j) of a tile."""
    out.open("for (long i = 0; i < mm; i++)")
    out("#pragma omp simd")
    out(f"for (long j = 0; j < nn; j++) {assignment.format(nr=bl.nr)};")
    out.close()


def _micro_calls(out: Lines, bl: Blocking, a: str, b: str, c: str, ldc: str, accumulate: str,
                 koff: str | None = None) -> None:
    """The micro-kernel call on a tile (``koff``: the direct kernel's, B's rows at b + koff[p]):
    the last sliver of N runs only the vectors it holds, and where its last vector would
    hold at most TAIL_COLUMNS columns (and K is short: TAIL_MAX_KC), its whole vectors and
    then the column kernel."""
    direct = koff is not None
    offsets = f"{koff}, " if direct else ""

    def call(name: str, shift: str, nn: str) -> str:
        return f"{name}(kc, {a}, {b}{shift}, {offsets}{c}{shift}, {ldc}, (int)mm, {nn}, {accumulate});"

    if bl.nv == 1 and not TAIL_COLUMNS:
        out(call(_micro_name(bl, None, direct), "", "(int)nn"))
        return
    out(f"const long vectors = (nn + {bl.vl - 1}) / {bl.vl}, rest = nn % {bl.vl};")
    if TAIL_COLUMNS:
        out.open(f"if (rest && rest <= {TAIL_COLUMNS} && kc <= {TAIL_MAX_KC})")
        out("const long whole = nn - rest;")
        for w in range(bl.nv - 1, 0, -1):
            out(f"{'if' if w == bl.nv - 1 else 'else if'} (whole == {w * bl.vl}) "
                + call(_micro_name(bl, w, direct), "", f"{w * bl.vl}"))
        out(call(_columns_name(bl, direct), " + whole", "(int)rest"))
        out.close("} else {")
        out.depth += 1
    for w in range(bl.nv, 1, -1):
        out(f"{'if' if w == bl.nv else 'else if'} (vectors == {w}) " + call(_micro_name(bl, w, direct), "", "(int)nn"))
    out(("else " if bl.nv > 1 else "") + call(_micro_name(bl, 1, direct), "", "(int)nn"))
    if TAIL_COLUMNS:
        out.close()


#: whether the tiles of a B sliver packed at compile time (a linear layer's weights) each
#: prefetch a share of the next sliver into L2: the weights are read once a call, from
#: memory (ViT-S's 12 layers hold 85 MB of them), and each sliver's first tile waited for
#: its KC x NR floats (m=197 n=1536 k=384 alone: 1.64 ms with B in cache, 2.07 evicted).
#: ViT-S whole, one thread, CPU ms a run, three alternating pairs on a busy machine: 77.2,
#: 78.2, 77.4 -> 76.3, 77.4, 76.4
B_SLIVER_PREFETCH = True


def _prefetch_next_sliver(out: Lines, bl: Blocking, npad: str) -> None:
    # the sliver the loops read next (the panel's next one; after its last, the first of
    # the next K block's panel, or of the next panel of N) in equal shares of whole cache
    # lines over this sliver's tiles, each share before its tile's micro-kernel call
    nr = bl.nr
    out.open(f"if (jr + {nr} < nc || pc + kc < k || jc + nc < n)")
    out("const long pn = pc + kc < k ? pc + kc : 0, jn = pc + kc < k ? jc : jc + nc;")
    out("const long kn = k - pn < kc_max ? k - pn : kc_max;")
    out(f"const float *next = jr + {nr} < nc ? bpan + (jr + {nr}) * kc : b_o + pn * {npad} + jn * kn;")
    out(f"const long tiles = (mc + {bl.mr - 1}) / {bl.mr}, floats = (jr + {nr} < nc ? kc : kn) * {nr};")
    out("const long share = (floats + tiles * 16 - 1) / (tiles * 16) * 16;")
    out(f"const long from = ir / {bl.mr} * share, to = from + share < floats ? from + share : floats;")
    out("for (long f = from; f < to; f += 16) __builtin_prefetch(next + f, 0, 2);")
    out.close()


def _blocked_loops(out, name, problem, bl, epilogue, packed_a, packed_b, gather, outer_args, extra_args, threads,
                   num) -> None:
    m, n, k = problem.m, problem.n, problem.k
    mpad, npad = _round_up(m, bl.mr), _round_up(n, bl.nr)
    direct = reads_planes(problem, bl.vl, packed_b)
    in_rows = reads_rows(problem, bl.vl, packed_b)
    ldc = problem.c.rows
    if direct:  # over the padded width, into the buffer's rows (_direct_store copies them to C)
        assert isinstance(problem.b, Im2Col), "only a conv reads planes"
        n, ldc = _direct_columns(problem.b), _direct_buffer(problem).row
    # one slot per number, printed once, so the loops below read locals
    out(f"const long m = {num(m)}, n = {num(n)}, k = {num(k)}, ldc = {num(ldc)};")
    out(f"const long kc_max = {num(bl.kc)}, mc_max = {num(bl.mc)}, nc_max = {num(bl.nc)};")
    if threads:
        _open_team(out, num(math.prod(problem.outer)))
    out.open("for (long jc = 0; jc < n; jc += nc_max)")
    out("const long nc = n - jc < nc_max ? n - jc : nc_max;")
    out.open("for (long pc = 0; pc < k; pc += kc_max)")
    out("const long kc = k - pc < kc_max ? k - pc : kc_max;")
    if packed_b:
        out(f"const float *bpan = b_o + pc * {num(npad)} + jc * kc;")
    elif direct:
        out("const float *bpan = gp + jc;")
    elif in_rows:
        out("const float *bpan = b_o + jc;")
    else:
        _pack(out, threads, "nc", bl.nr, "bp", _b_packing(problem, bl, gather, num))
        out("const float *bpan = bp;")
    out.open("for (long ic = 0; ic < m; ic += mc_max)")
    out("const long mc = m - ic < mc_max ? m - ic : mc_max;")
    if packed_a:
        out(f"const float *apan = a_o + pc * {num(mpad)} + ic * kc;")
    else:
        a = problem.a
        rows, cols = num(a.rows), num(a.cols)
        # the same block for every B panel: packed for the first only (with one panel the
        # text stays as it was, and so does the driver's hash)
        once = _one_a_block(problem, bl.kc, bl.mc) and problem.n > bl.nc
        if once:
            out.open("if (jc == 0)")
        _pack(out, threads, "mc", bl.mr, "ap", lambda first, count, dst:
              f"{_pack_a_name(problem, bl)}(a_o + ({first}) * {rows} + pc * {cols}, {rows}, {cols}, {count}, kc, {dst});",
              start="ic")
        if once:
            out.close()
        out("const float *apan = ap;")
    if threads:
        # the tiles of the panel, not just its slivers: a 7x7 plane is one 64-wide sliver
        # (each tile writes its own block of C); the loop's closing barrier keeps the
        # packed panels until every thread is done with them
        out("#pragma omp for collapse(2) schedule(static)")
    loops = [f"for (long jr = 0; jr < nc; jr += {bl.nr})", f"for (long ir = 0; ir < mc; ir += {bl.mr})"]
    if gather and problem.fold is None and not (direct or in_rows or packed_b) and rows_outside(problem):
        loops.reverse()
    for loop in loops:
        out.open(loop)
    out(f"const long nn = nc - jr < {bl.nr} ? nc - jr : {bl.nr};")
    out(f"const long mm = mc - ir < {bl.mr} ? mc - ir : {bl.mr};")
    if problem.fold is not None:
        _folded_tile(out, name, bl, epilogue, outer_args, extra_args)
    elif direct:
        out("float *ct = xp + (ic + ir) * ldc + jc + jr;")
        _micro_calls(out, bl, "apan + ir * kc", "bpan + jr", "ct", "ldc", "pc > 0", "koff + pc")
    elif in_rows:  # the last sliver from its padded copy (row p at tp + p * NR: offsets koff + k)
        out("float *ct = c_o + (ic + ir) * ldc + jc + jr;")
        out(f"const int copied = jc + jr == jt && n % {bl.vl};")
        out("const float *bs = copied ? tp : bpan + jr;")
        out("const long *ks = copied ? koff + k + pc : koff + pc;")
        _micro_calls(out, bl, "apan + ir * kc", "bs", "ct", "ldc", "pc > 0", "ks")
        if epilogue is not None:
            out(f"if (pc + kc == k) {name}_epilogue(S, ct, ic + ir, mm, jc + jr, nn{outer_args}{extra_args});")
    else:
        out(f"float *ct = c_o + (ic + ir) * ldc + (jc + jr) * {problem.c.cols}L;")
        if packed_b and B_SLIVER_PREFETCH:
            _prefetch_next_sliver(out, bl, num(npad))
        _micro_calls(out, bl, "apan + ir * kc", "bpan + jr * kc", "ct", "ldc", "pc > 0")
        if epilogue is not None:
            out(f"if (pc + kc == k) {name}_epilogue(S, ct, ic + ir, mm, jc + jr, nn{outer_args}{extra_args});")
    for _ in range(5):
        out.close()
    if direct:  # in the team: each thread copies and finishes its rows
        _direct_store(out, name, problem, epilogue, outer_args, extra_args, num, bl.vl, threads)
    if threads:
        out.close()


#: a GEMM of fewer multiply-adds (m * n * k, all outer indices together) runs on the
#: calling thread: waking the team (a futex wake per thread with passive waiting) and its
#: barriers cost more than the other threads save (1 << 18 is about 10 us of one core's
#: FMAs at 50 GFLOP/s)
PARALLEL_MIN_MACS = 1 << 18


#: a gathered conv of K up to this many taps (a stem's: 3 channels, 3x3 27, 7x7 147) walks
#: its tiles row block by row block, each along the whole packed B panel. Its micro-kernel
#: runs few steps, so storing C and the epilogue weigh more than reading B: a row block's
#: tiles write its rows as contiguous streams (the B panel is read once per row block, from
#: L2). Conv + bias + relu, one core, interleaved in one process, 31 rounds, row blocks
#: inside / outside: 3x3/2 3 -> 32 at 224 (MobileNetV2's stem) 0.389 / 0.368 ms and 0.374 /
#: 0.367, 3 -> 64 padded 0.664 / 0.600, 7x7/2 3 -> 64 (ResNet's) 2.24 / 2.16. Convs
#: of K 576 to 2304 were unchanged or up to 4% slower, so they keep the columns outside
ROWS_OUTSIDE_MAX_K = 160


def rows_outside(problem: GemmProblem) -> bool:
    """Whether a gathered conv's tile loops put its row blocks outside (ROWS_OUTSIDE_MAX_K)."""
    return isinstance(problem.b, Im2Col) and problem.k <= ROWS_OUTSIDE_MAX_K


def _open_team(out: Lines, batches: str) -> None:
    # one parallel region for the whole product of each outer index: every thread walks the
    # blocked loops and the work-sharing inside splits the packing and the tiles (a region
    # per blocked step, as before, paid a fork and a join for each and packed on one
    # thread). Many small products (attention's heads, Swin's windows) each form a team
    # still, as they did: one thread would run them all otherwise
    out(f"#pragma omp parallel if (m * n * k * {batches} >= {PARALLEL_MIN_MACS}L)")
    out("{")
    out.depth += 1
    out("const long team = omp_get_num_threads(), member = omp_get_thread_num();")


def _b_packing(problem: GemmProblem, bl: Blocking, gather: bool, num: Numbers):
    """``call(first, count, dst)``: the C call packing B's columns first.. (count of them) into dst."""
    b = problem.b
    if gather and isinstance(b, Im2Col):  # from the planes _pad_call filled, or the input itself
        in_place = gathers_in_place(b, problem.fold)
        source = "b_o" if in_place else "gp"
        hp, wp = (b.in_h, b.in_w) if in_place else _padded_extent(b)
        (kh, kw), (dh, dw) = b.kernel, b.dilation
        tail = f"{num(kh * kw)}, {num(kw)}, {num(dh)}, {num(dw)}, {num(hp * wp)}, {num(wp)}"
        gather = _gather_name(problem, bl)
        return lambda first, count, dst: f"{gather}({source}, gix, pc, kc, {first}, {count}, {dst}, {tail});"
    if isinstance(b, Im2Col):
        geometry = _im2col_args(b, num)
        return lambda first, count, dst: f"fl_gemm_pack_im2col_{bl.nr}(b_o, pc, kc, {first}, {count}, {dst}, {geometry});"
    rows, cols = num(b.rows), num(b.cols)
    pack = _pack_b_name(problem, bl)
    return lambda first, count, dst: f"{pack}(b_o + pc * {rows} + {first} * {cols}, {rows}, {cols}, kc, {count}, {dst});"


def _pack(out: Lines, threads: bool, extent: str, step: int, buffer: str, call, start: str = "jc") -> None:
    """Print the packing of ``extent`` rows or columns from ``start`` into ``buffer``: on one
    thread, or (``threads``) each member of the team packing its own run of whole
    ``step``-wide slivers (a sliver of kc steps is ``step * kc`` floats of the buffer), then
    a barrier, so the panel is whole before any tile reads it."""
    if not threads:
        out(call(start, extent, buffer))
        return
    out("{")
    out.depth += 1
    out(f"const long share = (({extent} + {step - 1}) / {step} + team - 1) / team * {step};")
    out(f"const long lo = member * share < {extent} ? member * share : {extent};")
    out(f"const long hi = lo + share < {extent} ? lo + share : {extent};")
    out(f"if (lo < hi) {call(f'({start} + lo)', 'hi - lo', f'{buffer} + lo * kc')}")
    out.close()
    out("#pragma omp barrier")


def _zero_k(out, name, problem, epilogue, outer_args, extra_args, num) -> None:
    # an empty sum: C is 0, then the epilogue
    m, n, ldc = num(problem.m), num(problem.n), num(problem.c.rows)
    out(f"for (long i = 0; i < {m}; i++) for (long j = 0; j < {n}; j++) c_o[i * {ldc} + j * {problem.c.cols}L] = 0.0f;")
    if epilogue is not None:
        out(f"for (long i = 0; i < {m}; i++) {name}_epilogue(S, c_o + i * {ldc}, i, 1, 0, {n}{outer_args}{extra_args});")


def _outer_offset(view, packed: bool, problem: GemmProblem, bl: Blocking | None, which: str, num=None) -> str:
    num = num or (lambda value: f"{value}L")
    if packed:
        assert bl is not None, "a packed operand's layout comes from its blocking"
        size = packed_size(problem, bl, which)
        strides, step = [], size
        for extent, s in reversed(list(zip(problem.outer, view.outer_strides))):
            strides.append(step if s else 0)
            step *= extent if s else 1
        strides.reverse()
        terms = [f"o{d} * {num(s)}" for d, s in enumerate(strides) if s]
        return " + ".join(terms) or "0"
    terms = [num(view.offset)] + [f"o{d} * {num(s)}" for d, s in enumerate(view.outer_strides) if s]
    return " + ".join(terms)


def param_name(decl: str) -> str:
    return decl.replace("*", " ").split()[-1]


__all__ = ["DRIVER_PREFIX", "IMAGES_SHARED_MIN", "Blocking", "Driver", "Epilogue", "Fold", "GemmFunction", "GemmProblem", "Helper",
           "Im2Col", "Lines", "NumberedIndex", "Numbers", "Operand", "SHARED_LINKAGE", "blocking_for", "copies_runs",
           "epilogue_args", "epilogue_function", "epilogue_params", "gathers_in_place", "gemm_function",
           "gemm_kernel", "gemv_kernel", "gemv_kind", "im2col_blocking", "is_gemv", "kernel_printer",
           "narrow_kernel", "pack_constant", "packed_size", "packing_floats", "param_name", "plan_matmul",
           "images_shared", "print_gemm", "reads_in_place", "reads_planes", "short_kernel", "vector_types"]
