"""The loop IR both emitters print: loops, guards, stores, loads, and where arrays live.

Index expressions are sympy integer expressions over loop variables; values are sympy
expressions whose loads appear as placeholder symbols (``Assign.loads``). Nothing here
is target specific: ``emit_c`` and ``emit_cuda`` print the same tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


@dataclass(eq=False)
class For:
    var: sp.Symbol
    init: sp.Expr
    cond: sp.Basic
    step: int
    body: list
    #: the fused-tree loop this is (None for loops isl added on its own)
    loop: int | None = None


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


__all__ = ["Assign", "For", "If", "Load", "Storage", "assigns", "walk"]
