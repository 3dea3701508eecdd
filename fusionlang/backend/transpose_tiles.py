"""Strip-mining a transposing loop pair, so the rows it reads across stay in L1 (C).

A transpose fused with other work stays a loop nest (the transpose template takes only a
lone transpose), and isl orders its loops by the output: the innermost loop writes one row
and reads one float from each of its rows, a row apart. ViT's K^T (``[197, 1152] ->
[6, 64, 197]`` with the attention scale): each of the 64 passes over the 197 tokens read
197 cache lines and used one float of each, and the next pass read them again from L2.
Where an inner loop ``j < W`` is the only statement of an outer ``i < H``, and some load
steps a cache line or more along ``j`` but less along ``i``, ``j`` is cut into strips of
a cache line's elements run one after the other over all of ``i``: a strip's lines stay in
L1 while ``i`` walks across them. Alone in a C harness, library flags: that K^T 84 -> 23
us.

Only plain copies qualify (every statement an assignment, none a reduction, no guard,
condition or gathered index reading the two loop variables, no array both written and read
by the pair: any order of their iterations computes the same), with constant bounds and
unit steps, both loops parallel. A loop at the kernel's top is kept as it is: with OpenMP,
it is the one the thread team shares.
"""

from __future__ import annotations

from dataclasses import replace

import sympy as sp

from fusionlang.backend.codegen_passes import CACHE_LINE, constant_span, itemsize
from fusionlang.backend.loopir import Assign, For, rewrite_loops
from fusionlang.backend.lower import LoweredGroup
from fusionlang.ops.access import as_expr
from fusionlang.ops.scalar import CheckedIndex


def tile_transposes(group: LoweredGroup) -> LoweredGroup:
    """``group`` with every transposing loop pair (see the module doc) strip-mined."""
    body = rewrite_loops(group.body, lambda outer: _strips(group, outer))
    return group if body is group.body else replace(group, body=body)


def _strips(group: LoweredGroup, outer: For) -> For | None:
    """``outer`` and its only child loop, the child cut into strips run outermost, or None
    where the pair does not qualify."""
    if len(outer.body) != 1 or not isinstance(outer.body[0], For):
        return None
    inner = outer.body[0]
    assigns = inner.body
    if not assigns or not all(isinstance(a, Assign) and a.reduce is None for a in assigns):
        return None
    if not _parallel_pair(group, outer, inner) or not _copies_only(assigns):
        return None
    outer_span, inner_span = constant_span(outer), constant_span(inner)
    if outer_span is None or inner_span is None or outer_span[0] != 0 or inner_span[0] != 0:
        return None
    strip = _strip(group, assigns, outer.var, inner.var)
    last = inner_span[1]
    if strip is None or last + 1 < 2 * strip:
        return None
    start = sp.Symbol(f"{inner.var.name}_strip", integer=True)
    bound = start + strip - 1 if (last + 1) % strip == 0 else sp.Min(start + strip - 1, last)
    cut = For(inner.var, start, sp.Le(inner.var, bound), 1, assigns, inner.loop)
    return For(start, sp.Integer(0), sp.Le(start, last), strip, [replace(outer, body=[cut])], None)


def _parallel_pair(group: LoweredGroup, outer: For, inner: For) -> bool:
    """Both loops are parallel tree loops with no accumulators, and nothing is declared in
    the outer one's body outside the inner loop."""
    if outer.loop is None or inner.loop is None or outer.step != 1 or inner.step != 1:
        return False
    a, b = group.loops[outer.loop], group.loops[inner.loop]
    if not (a.coincident and b.coincident) or a.simd_accs or b.simd_accs:
        return False
    return outer.loop not in group.scope.values()


def _copies_only(assigns: list[Assign]) -> bool:
    """No array is both written and read by the statements: their order does not matter."""
    written = {a.array.id for a in assigns}
    return not any(ld.array.id in written for a in assigns for ld in a.loads.values())


def _strip(group: LoweredGroup, assigns: list[Assign], i: sp.Symbol, j: sp.Symbol) -> int | None:
    """The strip length (a cache line of the widest element read across rows), when every
    access is affine in ``i`` and ``j`` with constant steps and some load steps a cache
    line or more along ``j`` and less along ``i``; else None."""
    loops = {i, j}
    strip = None
    for a in assigns:
        if loops & (as_expr(a.value).free_symbols - set(a.loads)):
            return None
        steps = _steps(group, a.array, a.index, i, j, set(a.loads))
        if steps is None:
            return None
        for ld in a.loads.values():
            conditions = [g for g, _ in ld.guard] + ([ld.cond] if ld.cond is not None else [])
            if any(loops & as_expr(c).free_symbols for c in conditions):
                return None
            steps = _steps(group, ld.array, ld.index, i, j, set(a.loads))
            if steps is None:
                return None
            size = itemsize(ld.array.dtype)
            along_i, along_j = (abs(s) * size for s in steps)
            if along_j >= CACHE_LINE > along_i:
                strip = max(strip or 0, CACHE_LINE // size)
    return strip


def _steps(group: LoweredGroup, array, index, i: sp.Symbol, j: sp.Symbol, loaded: set) -> tuple[int, int] | None:
    """(elements stepped along ``i``, along ``j``) of an access, when both are constants."""
    storage = group.storage.get(array.id)
    if storage is None:
        return None
    if storage.kind == "scalar":
        return 0, 0
    offset = sp.expand(storage.offset(index))
    if offset.atoms(CheckedIndex) or offset.free_symbols & loaded:
        return None
    along_i, along_j = offset.diff(i), offset.diff(j)
    if not (along_i.is_Integer and along_j.is_Integer):
        return None
    return int(along_i), int(along_j)


__all__ = ["tile_transposes"]
