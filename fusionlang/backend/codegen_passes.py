"""The codegen decisions, as passes over a lowered group's loop IR.

Each pass looks at one loop and returns what it decided; :func:`plan_codegen` runs them
once, in the order of :data:`PASSES`, and records the results as the loop's
:class:`.loopir.LoopCodegen` (``For.plan``). The printers (:mod:`.emit_c`,
:mod:`.emit_cuda`) then print what the plans say and decide nothing.

In order:

1. **pragma** (C): the outermost coincident loop of a kernel large enough
   (:data:`PARALLEL_MIN_ELEMENTS`) gets ``omp parallel for`` with OpenMP; innermost
   coincident loops ``omp simd``, innermost loops carrying only scalar accumulators ``omp simd
   reduction(...)``. None around a heap local (its allocation may leave by goto).
2. **reciprocals** (CUDA): a loop of plain statements dividing by loop-invariant float
   scalars multiplies by their reciprocals, hoisted (a GPU divides at a fraction of its
   multiply rate; on the CPU the SIMD division hides behind the row's exp: softmax 4096 x
   1024, A/B in one process, three runs: 1.92 / 1.87, 3.31 / 3.24, 3.44 / 3.38 ms with /
   without).
3. **streamed store** (C): a SIMD loop writing one contiguous L1-sized row of a streamed
   output (see backend.streaming) stores it by non-temporal vector stores.
4. **split streams** (C): a SIMD loop that sums (or multiplies) floats into scalars is
   split into :data:`REDUCTION_STREAMS` interleaved accumulator streams. One vector
   accumulator makes every step wait for the previous add (3 to 4 cycles); four keep the FP
   units busy (layer_norm's two row sums with rows in cache: 1.6x faster).
5. **NaN flags** (C): a float max/min SIMD reduction is a plain compare-select plus an "any
   NaN seen" flag applied after the loop: the NaN-propagating select chain is three times
   slower, and OpenMP's own max/min combiner drops NaN lanes anyway.
6. **lane checks** (C): in a SIMD loop each checked index or-reduces a flag and min-reduces
   the bad value instead of storing to the error record (a conditional store the
   vectorizer refuses).
7. **prefetch**: a multi-pass nest (softmax, layer_norm) streams each row in its first pass
   and re-reads it from L1 in the others; while those compute no demand miss drives the
   hardware prefetcher, so the rows some iterations ahead are prefetched after the first
   pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable

import sympy as sp

from fusionlang.backend.loopir import (Assign, For, LoopCodegen, PrefetchRow, Reduction, Storage, StreamedStore,
                                       assigns, walk)
from fusionlang.backend.lower import LoweredGroup, declaration_sites
from fusionlang.backend.storage_codecs import codec
from fusionlang.ops.access import as_expr
from fusionlang.ops.scalar import CheckedIndex

#: local buffers above this many bytes live on the heap instead of the stack
STACK_LIMIT = 256 * 1024
#: how far ahead a multi-pass nest prefetches its rows (bytes), and the longest row it
#: prefetches: a longer one does not stay in L1 between passes anyway. Softmax over
#: 4096x1024 from a cold cache: 1.6 ms without, 1.3 with 64 KiB ahead into L1 (16 to 128
#: KiB all help; into L2 helps less). With the output streamed too (see backend.streaming),
#: kernel alone, 40 runs: softmax 2.53 -> 2.36 ms, layer_norm 1.78 -> 1.69 (an earlier
#: machine had measured the opposite, 1.95 -> 2.5, and prefetching was off with streaming)
PREFETCH_AHEAD = 64 * 1024
PREFETCH_ROW_MAX = 16 * 1024
CACHE_LINE = 64
#: independent accumulators of a split sum/product loop, and the fewest iterations each
#: must get (shorter loops are not worth the combining)
REDUCTION_STREAMS = 4
MIN_STREAM_ITERATIONS = 32
#: with OpenMP, a kernel whose largest array has fewer elements runs on the calling thread:
#: waking the team (a futex wake per thread with passive waiting) and joining it cost more
#: than sharing the loop saves (1 << 15 floats: about 10 us of a cheap elementwise loop
#: from L2 on one core)
PARALLEL_MIN_ELEMENTS = 1 << 15

OMP_REDUCTION = {"sum": "+", "prod": "*", "max": "max", "min": "min"}
_FLOATS = ("float32", "float64")
#: the reductions a split loop's streams start from (-0: a sum of -0.0s stays -0.0)
STREAM_IDENTITY = {"sum": -0.0, "prod": 1.0}


@dataclass(frozen=True)
class CodegenOptions:
    """What the passes decide for: the target ("c" or "cuda") and the build's options."""

    target: str = "c"
    openmp: bool = False
    check_indices: bool = True
    #: values whose row stores may stream past the caches (see backend.streaming)
    streamed: frozenset = frozenset()


@dataclass
class _Context:
    """A group and its options, with the lookups every pass shares."""

    group: LoweredGroup
    options: CodegenOptions
    inner: dict = field(init=False)
    declared_in: dict = field(init=False)
    #: the parallel pass has placed its one ``omp parallel for``
    parallel_done: bool = False

    def __post_init__(self) -> None:
        _, self.inner = declaration_sites(self.group)
        # array id -> id(For) declaring it (a local lookup, rebuilt per group)
        self.declared_in = {st.array.id: fid for fid, sts in self.inner.items() for st in sts}

    def update_of(self, acc_id: int):
        """The update statement of a reduction accumulator."""
        return next(s for s in self.group.prog.stmts if s.kind == "update" and s.acc is not None and s.acc.id == acc_id)

    def simd_accs(self, f: For) -> list[int]:
        return list(self.group.loops[f.loop].simd_accs) if f.loop is not None else []


# ----- 1. pragma ----------------------------------------------------------------------------
def plan_pragma(ctx: _Context, f: For, plan: LoopCodegen) -> LoopCodegen:
    """``f``'s OpenMP pragma and, for a SIMD reduction, its reductions (see module doc, 1).
    Visited in print order, so the first eligible loop takes the parallel team."""
    g = ctx.group
    loop = g.loops.get(f.loop) if f.loop is not None else None
    if ctx.options.target != "c" or loop is None or _has_heap_local_inside(ctx, f):
        return plan
    if ctx.options.openmp and not ctx.parallel_done and loop.level == "outer" and loop.coincident \
            and worth_a_team(g) and not _scalars_written_outside(ctx, f):
        ctx.parallel_done = True
        return replace(plan, pragma="parallel")
    if any(isinstance(n, For) for n in walk(f.body)):
        return plan
    if loop.coincident:
        return plan if _scalars_written_outside(ctx, f) else replace(plan, pragma="simd")
    if loop.simd_accs:
        accs = [a for a in loop.simd_accs if a in g.storage and g.storage[a].kind == "scalar"]
        if len(accs) != len(loop.simd_accs) or _scalars_written_outside(ctx, f, allow=set(accs)):
            return plan
        return replace(plan, pragma="simd", reductions=tuple(_reduction(ctx, aid) for aid in accs))
    return plan


def _reduction(ctx: _Context, aid: int) -> Reduction:
    """A float sum reduces with cexpr's fl_add, whose lanes start at -0.0 (those of + start
    at +0, and a sum of -0.0s came out +0)."""
    op, dtype = ctx.update_of(aid).reduce, ctx.group.storage[aid].array.dtype
    return Reduction(aid, op, "fl_add" if op == "sum" and dtype in _FLOATS else OMP_REDUCTION[op], dtype)


def worth_a_team(group: LoweredGroup) -> bool:
    """Is the kernel large enough for its loop to be shared by threads?"""
    return max((math.prod(a.shape) for a in group.params), default=0) >= PARALLEL_MIN_ELEMENTS


def _has_heap_local_inside(ctx: _Context, f: For) -> bool:
    return any(st.kind == "local" and is_heap(st)
               for n in walk([f]) if isinstance(n, For) for st in ctx.inner.get(id(n), []))


def is_heap(st: Storage) -> bool:
    """Does local ``st`` live on the heap (over :data:`STACK_LIMIT`)?"""
    return st.size * itemsize(st.array.dtype) > STACK_LIMIT


def _scalars_written_outside(ctx: _Context, f: For, allow=()) -> bool:
    """Does the loop write a scalar declared outside it (other than ``allow``)?"""
    inside = {id(n) for n in walk([f]) if isinstance(n, For)}
    for n in assigns(f.body):
        st = ctx.group.storage.get(n.array.id)
        if st is not None and st.kind == "scalar" and n.array.id not in allow \
                and ctx.declared_in.get(n.array.id) not in inside:
            return True
    return False


# ----- 2. reciprocals -----------------------------------------------------------------------
def plan_reciprocals(ctx: _Context, f: For, plan: LoopCodegen) -> LoopCodegen:
    """Scalars (array id -> dtype) that the plain statements of ``f`` only divide by, of their
    own float dtype, and that ``f`` does not write: softmax's row sum (CUDA only)."""
    if ctx.options.target != "cuda" or not f.body or not all(isinstance(n, Assign) for n in f.body):
        return plan
    written = {n.array.id for n in f.body}
    found = {}
    for a in f.body:
        dtype = a.stmt.compute_dtype
        if dtype not in _FLOATS:
            continue
        for sym, ld in a.loads.items():
            st = ctx.group.storage.get(ld.array.id)
            if st is None or st.kind != "scalar" or ld.array.id in written or ld.array.dtype != dtype:
                continue
            powers = [p for p in as_expr(a.value).atoms(sp.Pow) if p.base == sym]
            if powers and all(p.exp == -1 for p in powers):
                found[ld.array.id] = dtype
    return replace(plan, reciprocals=found) if found else plan


# ----- 3. streamed store --------------------------------------------------------------------
def plan_streamed_store(ctx: _Context, f: For, plan: LoopCodegen) -> LoopCodegen:
    """The row ``f`` stores by non-temporal stores: a plain SIMD loop of plain statements
    writing one contiguous row of a streamed float32 output, short enough to sit in L1, and
    otherwise only scalars."""
    if plan.pragma != "simd" or plan.reductions or not f.body or not all(isinstance(n, Assign) for n in f.body) \
            or any(st.kind != "scalar" for st in ctx.inner.get(id(f), [])):
        return plan
    g = ctx.group
    rows = [a for a in f.body if g.storage.get(a.array.id) is None or g.storage[a.array.id].kind != "scalar"]
    if len(rows) != 1:
        return plan
    store, span = rows[0], constant_span(f)
    array = store.array
    if span is None or store.reduce is not None or array.role != "output" or array.value not in ctx.options.streamed:
        return plan
    st = g.storage.get(array.id)
    if st is None or st.kind != "global" or array.dtype != "float32" or store.stmt.compute_dtype != "float32":
        return plan
    offset = sp.expand(st.offset(store.index))
    if f.var not in offset.free_symbols or not offset.is_polynomial(f.var) \
            or sp.Poly(offset, f.var).degree() != 1 or sp.Poly(offset, f.var).coeff_monomial(f.var) != 1:
        return plan
    if (span[1] - span[0] + 1) * 4 > PREFETCH_ROW_MAX:
        return plan
    return replace(plan, streamed_store=StreamedStore(store, offset, span[0], span[1]))


# ----- 4. split streams ---------------------------------------------------------------------
def plan_split_streams(ctx: _Context, f: For, plan: LoopCodegen) -> LoopCodegen:
    """Split a SIMD loop of plain statements with constant bounds that only sums or
    multiplies floats into scalars, long enough for every stream to get a fair share."""
    if not plan.reductions or not all(isinstance(n, Assign) for n in f.body):
        return plan
    if ctx.options.check_indices and _has_checked_index(f.body):
        return plan  # (its checks reduce flags of their own; not worth splitting as well)
    span = constant_span(f)
    if span is None or any(r.op not in STREAM_IDENTITY or r.dtype not in _FLOATS for r in plan.reductions):
        return plan
    trips = span[1] - span[0] + 1
    if trips % REDUCTION_STREAMS or trips // REDUCTION_STREAMS < MIN_STREAM_ITERATIONS:
        return plan
    return replace(plan, split_streams=REDUCTION_STREAMS, span=span)


# ----- 5. NaN flags -------------------------------------------------------------------------
def plan_nan_flags(ctx: _Context, f: For, plan: LoopCodegen) -> LoopCodegen:
    """The float max/min accumulators an unsplit SIMD reduction loop reduces with a NaN flag."""
    if not plan.reductions or plan.split_streams > 1:
        return plan
    flags = []
    for r in plan.reductions:
        stmt = ctx.update_of(r.acc)
        if stmt.reduce in ("max", "min") and stmt.compute_dtype in _FLOATS and r.dtype == stmt.compute_dtype:
            flags.append(r.acc)
    return replace(plan, nan_flags=tuple(flags)) if flags else plan


# ----- 6. lane checks -----------------------------------------------------------------------
def plan_lane_checks(ctx: _Context, f: For, plan: LoopCodegen) -> LoopCodegen:
    """A SIMD loop (not split, not streamed) whose loads check indices reduces lane flags."""
    if plan.pragma != "simd" or plan.split_streams > 1 or plan.streamed_store is not None \
            or not ctx.options.check_indices or not _has_checked_index(f.body):
        return plan
    return replace(plan, lane_checks=True)


def _has_checked_index(body: list) -> bool:
    for a in assigns(body):
        for ld in a.loads.values():
            exprs = list(ld.index) + [g for g, _ in ld.guard] + ([ld.cond] if ld.cond is not None else [])
            if any(as_expr(e).atoms(CheckedIndex) for e in exprs):
                return True
    return False


# ----- 7. prefetch --------------------------------------------------------------------------
def plan_prefetch(ctx: _Context, f: For, plan: LoopCodegen) -> LoopCodegen:
    """The input rows the first pass of ``f``'s body reads some iterations of ``f`` ahead,
    prefetched after that pass; none unless ``f`` runs several passes. Loops printed whole
    another way (streamed, split) have no inner passes."""
    passes = [n for n in f.body if isinstance(n, For)]
    if len(passes) < 2 or any(isinstance(n, For) for n in walk(passes[0].body)):
        return plan
    first = passes[0]
    span = constant_span(first)
    if span is None:
        return plan
    rows = [row for ld, offset in _streamed_rows(ctx, f, first)
            if (row := _prefetch_row(f, first, span, ld.array, offset)) is not None]
    return replace(plan, prefetch=tuple(rows)) if rows else plan


def _streamed_rows(ctx: _Context, f: For, first: For):
    """(load, element offset) of each distinct read in ``first`` that is a kernel input,
    unguarded, contiguous in ``first``'s loop and moving with ``f`` (a gamma read by
    every row stays cached by itself)."""
    seen = set()
    for a in assigns(first.body):
        for ld in a.loads.values():
            st = ctx.group.storage.get(ld.array.id)
            if st is None or st.kind != "global" or ld.array.role != "input" or ld.guard or ld.cond is not None:
                continue
            offset = sp.expand(st.offset(ld.index))
            if row_offset(offset, f.var, first.var) and (ld.array.id, offset) not in seen:
                seen.add((ld.array.id, offset))
                yield ld, offset


def _prefetch_row(f: For, first: For, span: tuple[int, int], array, offset: sp.Expr) -> PrefetchRow | None:
    size = itemsize(array.dtype)
    row = (span[1] - span[0] + 1) * size
    ahead = f.var + f.step * -(-PREFETCH_AHEAD // row)
    guard = f.cond.xreplace({f.var: ahead})
    if row > PREFETCH_ROW_MAX or guard == sp.false:
        return None  # a long row is not kept in L1; fewer rows than the distance all stay cached
    where = offset.xreplace({f.var: ahead, first.var: sp.Symbol("fl_q", integer=True)})
    return PrefetchRow(first, array, where, guard, span[0], span[1], CACHE_LINE // size)


def row_offset(offset: sp.Expr, outer: sp.Symbol, inner: sp.Symbol) -> bool:
    """Is ``offset`` = (affine in ``outer``, moving with it) + ``inner``: one contiguous row per outer step?"""
    if offset.free_symbols - {outer, inner} or not offset.is_polynomial(outer, inner):
        return False  # other symbols (indirect indices), or floor/mod of the iterators
    poly = sp.Poly(offset, outer, inner)
    if poly.total_degree() != 1:
        return False
    return poly.coeff_monomial(inner) == 1 and poly.coeff_monomial(outer) != 0 \
        and all(sum(m) <= 1 for m in poly.monoms())


# ----- shared helpers -----------------------------------------------------------------------
def constant_span(f: For) -> tuple[int, int] | None:
    """(first, last) value of a unit-step loop with constant bounds, else None."""
    if f.step != 1 or not f.init.is_Integer or not isinstance(f.cond, (sp.Le, sp.Lt)) or f.cond.lhs != f.var:
        return None
    bound = f.cond.rhs
    if not bound.is_Integer:
        return None
    return int(f.init), int(bound) - (1 if isinstance(f.cond, sp.Lt) else 0)


def itemsize(dtype: str) -> int:
    if codec(dtype):
        return 1
    return {"float32": 4, "float64": 8, "int64": 8, "int32": 4, "int8": 1, "uint8": 1, "bool": 1,
            "int16": 2, "uint16": 2, "uint32": 4, "uint64": 8, "float16": 2, "bfloat16": 2}[dtype]


Pass = Callable[[_Context, For, LoopCodegen], LoopCodegen]

#: the passes, in the order they run (each reads what the earlier ones decided)
PASSES: tuple[Pass, ...] = (plan_pragma, plan_reciprocals, plan_streamed_store, plan_split_streams, plan_nan_flags,
                            plan_lane_checks, plan_prefetch)


def plan_loop(ctx: _Context, f: For) -> LoopCodegen:
    """Every pass's decision for one loop."""
    plan = LoopCodegen()
    for run in PASSES:
        plan = run(ctx, f, plan)
    return plan


def plan_codegen(group: LoweredGroup, options: CodegenOptions) -> LoweredGroup:
    """Record the plan of every loop of ``group`` (``For.plan``), visiting loops in the order
    they are printed; returns ``group``, planned for ``options``."""
    ctx = _Context(group, options)
    for node in walk(group.body):
        if isinstance(node, For):
            node.plan = plan_loop(ctx, node)
    return group


__all__ = ["CACHE_LINE", "PARALLEL_MIN_ELEMENTS", "PASSES", "PREFETCH_AHEAD", "PREFETCH_ROW_MAX", "REDUCTION_STREAMS",
           "STACK_LIMIT", "CodegenOptions", "constant_span", "is_heap", "itemsize", "plan_codegen", "plan_loop",
           "row_offset", "worth_a_team"]
