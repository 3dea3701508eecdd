"""Collapsing a perfect pair of loops that walk memory as one row into one loop (C).

isl prints a loop per tensor axis, so a batch norm's per-channel sums over an N x C x 16 x
16 tensor are 16-iteration SIMD loops, each ending in a horizontal add of its vector
accumulator (and, for 4 x 4 planes, a loop shorter than one vector). Where an inner loop
``j < W`` is the only statement of an outer ``i < H`` and every element the pair touches
sits at ``i * W + j`` times one stride (``W * s`` for ``i``, ``s`` for ``j``, in every
array), the pair is one loop ``j < H * W`` with ``i`` set to 0: the same elements in the
same order. Then the row is long enough for SIMD and for the split accumulator streams
(:mod:`.codegen_passes`). In MobileNetV2's training step (bench/torch_runtime.py, one
thread) the forward batch norm kernel over 4 x 96 x 32 x 32 went from 0.62 to 0.26 ms CPU,
the 35 of them from 8.1 to 3.7 ms, all its kernels from 42.5 to 29.9 ms.
EfficientNet-B0's squeeze-excite means and channel scales ran a 7 to 56-wide row at a time
(inference, one thread: its loop-nest kernels 1.52 -> 0.84 ms, a mean 0.106 -> 0.008 ms).

Only plain statements qualify: no guard, condition or gathered index reads the two loop
variables, no value computes with them, and nothing is declared between the two loops. A loop at
the kernel's top is kept as it is: with OpenMP, it is the one the thread team shares.
"""

from __future__ import annotations

from dataclasses import replace

import sympy as sp

from fusionlang.backend.codegen_passes import constant_span
from fusionlang.backend.loopir import Assign, For, Load, rewrite_loops
from fusionlang.backend.lower import LoweredGroup
from fusionlang.ops.access import as_expr
from fusionlang.ops.scalar import CheckedIndex


def collapse_rows(group: LoweredGroup) -> LoweredGroup:
    """``group`` with every collapsible loop pair (see the module doc) made one loop."""
    body = rewrite_loops(group.body, lambda outer: _merged(group, outer))
    return group if body is group.body else replace(group, body=body)


def _merged(group: LoweredGroup, outer: For) -> For | None:
    """The one loop ``outer`` and its only child loop make, or None where they do not."""
    if len(outer.body) != 1 or not isinstance(outer.body[0], For):
        return None
    inner = outer.body[0]
    if not all(isinstance(n, Assign) for n in inner.body) or not _same_kind(group, outer, inner):
        return None
    outer_span, inner_span = constant_span(outer), constant_span(inner)
    if outer_span is None or inner_span is None or outer_span[0] != 0 or inner_span[0] != 0:
        return None
    width = inner_span[1] + 1
    if not all(_one_row(group, a, outer.var, inner.var, width) for a in inner.body):
        return None
    rows = outer_span[1] + 1
    body = [_substituted(a, {outer.var: sp.Integer(0)}) for a in inner.body]
    return For(inner.var, sp.Integer(0), sp.Le(inner.var, rows * width - 1), 1, body, inner.loop)


def _same_kind(group: LoweredGroup, outer: For, inner: For) -> bool:
    """Both loops are tree loops of the same kind (both parallel, or both reducing the same
    accumulators), and nothing is declared in the outer one's body outside the inner loop."""
    if outer.loop is None or inner.loop is None:
        return False
    a, b = group.loops[outer.loop], group.loops[inner.loop]
    if a.coincident != b.coincident or set(a.simd_accs) != set(b.simd_accs):
        return False
    return outer.loop not in group.scope.values()


def _one_row(group: LoweredGroup, a: Assign, i: sp.Symbol, j: sp.Symbol, width: int) -> bool:
    """Does every access of ``a`` sit at (i * width + j) times one stride, and nothing else
    of it read i or j?"""
    loops = {i, j}
    if loops & (as_expr(a.value).free_symbols - set(a.loads)):
        return False
    for ld in a.loads.values():
        conditions = [g for g, _ in ld.guard] + ([ld.cond] if ld.cond is not None else [])
        if any(loops & as_expr(c).free_symbols for c in conditions):
            return False
    accesses = [(a.array, a.index)] + [(ld.array, ld.index) for ld in a.loads.values()]
    return all(_row_offset(group, array, index, i, j, width, set(a.loads)) for array, index in accesses)


def _row_offset(group: LoweredGroup, array, index, i: sp.Symbol, j: sp.Symbol, width: int, loaded: set) -> bool:
    storage = group.storage.get(array.id)
    if storage is None:
        return False
    if storage.kind == "scalar":
        return True
    offset = sp.expand(storage.offset(index))
    if offset.atoms(CheckedIndex) or offset.free_symbols & loaded:
        return False
    along_i, along_j = offset.diff(i), offset.diff(j)
    if along_i.free_symbols & {i, j} or along_j.free_symbols & {i, j}:
        return False
    return sp.simplify(along_i - width * along_j) == 0


def _substituted(a: Assign, values: dict) -> Assign:
    def index(idx) -> tuple:
        return tuple(as_expr(e).subs(values) for e in idx)

    loads = {s: _load(ld, index(ld.index)) for s, ld in a.loads.items()}
    return replace(a, index=index(a.index), loads=loads)


def _load(ld: Load, index: tuple) -> Load:
    return replace(ld, index=index)


__all__ = ["collapse_rows"]
