"""Row loops merged into one: a loop whose whole body is a loop over a contiguous row.

isl prints an NCHW plane as a loop over its rows around a loop over each row, so a vector
loop runs 7 to 56 elements and then pays its remainder, its horizontal reduction or its
peeling again for the next row: EfficientNet's squeeze-excite means and channel scales
ran a 56-wide row at a time (a mean of 144 x 56 x 56 in 0.13 ms). When every access in
the inner loop reads or writes the two loops' elements as consecutive dims of its array,
row ``a`` element ``b`` at ``a * W + b`` (W the inner loop's extent and the array's row
length), the pair is one loop over ``a * W + b`` in the same order: the same iterations,
the same stores, one long vector loop.

Merged only where this is plainly so: both loops unit-step from 0 with constant bounds,
the outer loop's body the inner loop alone, neither variable in a value, a guard, a
condition or a checked index, the pair parallel (coincident) together or reducing the same
accumulators together (then the merged loop reduces them), nothing declared between them,
and the outer loop not one the OpenMP pass may share among threads (level "outer").
"""

from __future__ import annotations

from dataclasses import replace

import sympy as sp

from fusionlang.backend.codegen_passes import constant_span
from fusionlang.backend.loopir import Assign, For, If, Load, walk
from fusionlang.backend.lower import LoweredGroup
from fusionlang.ops.access import as_expr


def coalesce_rows(group: LoweredGroup) -> LoweredGroup:
    """``group`` with every mergeable (row loop, element loop) pair as one loop."""
    body = _coalesced(group, group.body)
    return group if body is group.body else replace(group, body=body)


def _coalesced(group: LoweredGroup, body: list) -> list:
    """``body`` with its loops' pairs merged, innermost first; the same list when none is."""
    out = []
    for node in body:
        new = node
        if isinstance(node, For):
            inner = _coalesced(group, node.body)
            new = node if inner is node.body else replace(node, body=inner)
            new = _merged(group, new) or new
        elif isinstance(node, If):
            then, orelse = _coalesced(group, node.then), _coalesced(group, node.orelse)
            if then is not node.then or orelse is not node.orelse:
                new = replace(node, then=then, orelse=orelse)
        out.append(new)
    return body if all(a is b for a, b in zip(out, body)) else out


def _merged(group: LoweredGroup, outer: For) -> For | None:
    """The loop over ``a * W + b`` (named as the inner loop's variable, carrying its
    tree loop) for ``outer`` (``a``) and its only child (``b``), or None."""
    if len(outer.body) != 1 or not isinstance(outer.body[0], For):
        return None
    inner = outer.body[0]
    rows, width = constant_span(outer), constant_span(inner)
    if rows is None or width is None or rows[0] != 0 or width[0] != 0 or not _same_kind(group, outer, inner):
        return None
    a, b, w = outer.var, inner.var, width[1] + 1
    body = _rewritten(group, inner.body, a, b, w)
    if body is None:
        return None
    return replace(inner, cond=sp.Le(b, (rows[1] + 1) * w - 1), body=body)


def _same_kind(group: LoweredGroup, outer: For, inner: For) -> bool:
    """Both loops parallel, or both reducing the same accumulators and nothing else; the
    outer one no candidate for the thread team; nothing declared in its body alone."""
    if outer.loop is None or inner.loop is None or outer.loop in group.scope.values():
        return False
    a, b = group.loops.get(outer.loop), group.loops.get(inner.loop)
    if a is None or b is None or a.level == "outer":
        return False
    if a.coincident and b.coincident:
        return True
    return not a.coincident and not b.coincident and bool(a.simd_accs) and a.simd_accs == b.simd_accs


def _rewritten(group: LoweredGroup, body: list, a: sp.Symbol, b: sp.Symbol, w: int) -> list | None:
    """``body`` with each access's (a, b) dims as (0, a * W + b), or None where some use
    of ``a`` or ``b`` is not such a pair."""
    for node in walk(body):
        if isinstance(node, If) or (isinstance(node, For) and _mentions(node.init, node.cond, a, b)):
            return None
    out = [_node(group, node, a, b, w) for node in body]
    return None if any(node is None for node in out) else out


def _node(group: LoweredGroup, node, a, b, w):
    if isinstance(node, For):
        body = _rewritten(group, node.body, a, b, w)
        return None if body is None else replace(node, body=body)
    if not isinstance(node, Assign) or _mentions(node.value, None, a, b):
        return None
    index = _paired(group, node.array, node.index, a, b, w)
    loads = {}
    for symbol, load in node.loads.items():
        new = _load(group, load, a, b, w)
        if new is None:
            return None
        loads[symbol] = new
    return None if index is None else replace(node, index=index, loads=loads)


def _load(group: LoweredGroup, load: Load, a, b, w) -> Load | None:
    if load.guard or load.cond is not None:
        return None
    index = _paired(group, load.array, load.index, a, b, w)
    return None if index is None else replace(load, index=index)


def _paired(group: LoweredGroup, array, index: tuple, a, b, w: int) -> tuple | None:
    """``index`` with ``(a, b)`` at dims ``d, d + 1`` as ``(0, b)``; unchanged when it
    names neither; None when it names them otherwise, or when the array's row is not
    ``w`` long (or only one of the two dims is kept)."""
    exprs = [as_expr(e) for e in index]
    uses = [k for k, e in enumerate(exprs) if e.free_symbols & {a, b}]
    if not uses:
        return index
    if len(uses) != 2 or exprs[uses[0]] != a or uses[1] != uses[0] + 1 or exprs[uses[1]] != b:
        return None
    d = uses[0]
    storage = group.storage.get(array.id)
    if storage is None:
        return None
    kept = storage.kept
    if kept[d] != kept[d + 1] or (kept[d + 1] and array.shape[d + 1] != w):
        return None
    return tuple(index[:d]) + (sp.Integer(0), b) + tuple(index[d + 2:])


def _mentions(first, second, a, b) -> bool:
    symbols = set()
    for e in (first, second):
        if e is not None:
            symbols |= as_expr(e).free_symbols
    return bool(symbols & {a, b})


__all__ = ["coalesce_rows"]
