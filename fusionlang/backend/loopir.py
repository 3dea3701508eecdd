"""The loop IR both emitters print: loops, guards, stores, loads, and where arrays live.

Index expressions are sympy integer expressions over loop variables; values are sympy
expressions whose loads appear as placeholder symbols (``Assign.loads``). Nothing here
is target specific: ``emit_c`` and ``emit_cuda`` print the same tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np
import sympy as sp

from fusionlang.backend.poly import Array, PolyStmt
from fusionlang.ops.access import as_expr


@dataclass(eq=False)
class Storage:
    """Where an array lives in generated code.

    kind: "global" (a kernel parameter, full shape), "local" (a buffer private to the
    kernel, or to one iteration of an outer parallel loop, holding only the ``kept``
    dimensions) or "scalar" (every dimension contracted away).
    """

    array: Array
    kind: str
    kept: tuple[bool, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(n for n, k in zip(self.array.shape, self.kept) if k)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    def offset(self, index) -> sp.Expr:
        """Row-major element offset of ``index`` (given over all dims) in this storage."""
        expr, step = sp.Integer(0), 1
        for e, n, keep in reversed(list(zip(index, self.array.shape, self.kept))):
            if keep:
                expr += as_expr(e) * step
                step *= n
        return expr


@dataclass(eq=False)
class Load:
    array: Array
    index: tuple[sp.Expr, ...]
    guard: tuple[tuple[sp.Expr, int], ...] = ()
    cond: sp.Basic | None = None
    pad: float | None = None
    #: (node name, op) the read belongs to (see poly.Access.origin)
    origin: tuple[str, str] | None = None


@dataclass(eq=False)
class Assign:
    """``array[index] = value`` (or ``op=`` when ``reduce`` is set)."""

    stmt: PolyStmt
    array: Array
    index: tuple[sp.Expr, ...]
    value: sp.Expr
    loads: dict[sp.Symbol, Load] = field(default_factory=dict)
    reduce: str | None = None


@dataclass(frozen=True)
class Reduction:
    """A scalar accumulator a SIMD loop reduces: its array id, op (sum, prod, max, min), the
    OpenMP reduction identifier it prints with, and its dtype."""

    acc: int
    op: str
    clause: str
    dtype: str


@dataclass(frozen=True)
class StreamedStore:
    """The row a SIMD loop stores to a streamed output: the store, its flat offset and the
    loop's first and last value (see backend.streaming)."""

    store: Assign
    offset: sp.Expr
    first: int
    last: int


@dataclass(frozen=True)
class PrefetchRow:
    """Prefetch the row of ``array`` at ``where`` (an offset over ``fl_q``, which runs from
    ``first`` to ``last`` by ``step``) when ``guard`` holds, right after loop ``after``."""

    after: "For"
    array: Array
    where: sp.Expr
    guard: sp.Basic
    first: int
    last: int
    step: int


@dataclass
class LoopCodegen:
    """How one loop is printed: every decision the codegen passes
    (:mod:`.codegen_passes`) took for it. The printers only print what it says.

    pragma: "" (none), "parallel" (``omp parallel for``) or "simd" (``omp simd``, with a
    reduction clause per entry of ``reductions``). ``split_streams`` > 1: the SIMD reduction
    loop runs that many interleaved accumulator streams over ``span``. ``nan_flags``: the
    max/min accumulators reduced as plain selects plus a NaN flag. ``lane_checks``: checked
    indices reduce flags beside the loop's reductions. ``streamed_store``: the row stored by
    non-temporal vector stores. ``prefetch``: rows prefetched after the first pass of this
    loop's body. ``reciprocals``: scalars (array id -> dtype) divided by, hoisted as
    reciprocals before the loop. ``threads`` (CUDA, a loop at the level of a unit whose
    points a block or warp runs; see :mod:`.cuda_passes`): "split" (the threads share its
    iterations), "reduce" (per-thread partials of the accumulators ``block_scalars``, then an
    all-reduce) or "one" (thread 0 runs it and broadcasts ``block_scalars``, the point's
    scalars it writes)."""

    pragma: str = ""
    reductions: tuple[Reduction, ...] = ()
    split_streams: int = 1
    span: tuple[int, int] | None = None
    nan_flags: tuple[int, ...] = ()
    lane_checks: bool = False
    streamed_store: StreamedStore | None = None
    prefetch: tuple[PrefetchRow, ...] = ()
    reciprocals: dict[int, str] = field(default_factory=dict)
    threads: str = ""
    block_scalars: tuple[int, ...] = ()


@dataclass(eq=False)
class For:
    var: sp.Symbol
    init: sp.Expr
    cond: sp.Basic
    step: int
    body: list
    #: the fused-tree loop this is (None for loops isl added on its own)
    loop: int | None = None
    #: how it is printed; set by :func:`.codegen_passes.plan_codegen` before printing
    plan: LoopCodegen = field(default_factory=LoopCodegen)


@dataclass(eq=False)
class If:
    cond: sp.Basic
    then: list
    orelse: list = field(default_factory=list)


def walk(body: list):
    """Every IR node, depth first."""
    for node in body:
        yield node
        if isinstance(node, For):
            yield from walk(node.body)
        elif isinstance(node, If):
            yield from walk(node.then)
            yield from walk(node.orelse)


def assigns(body: list):
    return [n for n in walk(body) if isinstance(n, Assign)]


def rewrite_loops(body: list, rewrite: Callable[[For], "For | None"], top: bool = True) -> list:
    """``body`` with ``rewrite`` applied to every loop, innermost first (None keeps the loop
    as it is), except the loops at the top (with OpenMP, the one the thread team shares).
    Unchanged parts stay the same objects; an unchanged body is returned as it is."""
    out, changed = [], False
    for node in body:
        new = node
        if isinstance(node, For):
            inner = rewrite_loops(node.body, rewrite, top=False)
            new = node if inner is node.body else replace(node, body=inner)
            new = new if top else rewrite(new) or new
        elif isinstance(node, If):
            then, orelse = rewrite_loops(node.then, rewrite, top), rewrite_loops(node.orelse, rewrite, top)
            if then is not node.then or orelse is not node.orelse:
                new = replace(node, then=then, orelse=orelse)
        changed |= new is not node
        out.append(new)
    return out if changed else body


__all__ = ["Assign", "For", "If", "Load", "LoopCodegen", "PrefetchRow", "Reduction", "Storage", "StreamedStore",
           "assigns", "rewrite_loops", "walk"]
