"""A template's epilogue as statements: what to compute for one element of the product,
as values the template prints, not C text it edits.

The statements run per element of a finished tile (CPU) or per accumulator (CUDA): ``v``
holds the product's value on entry and the result on exit; ``i``, ``j`` are the element's
row and column, ``o0, o1, ...`` its outer indices. Array reads and writes keep their
index as an expression (:class:`Load`, :class:`Store`), so a template decides how each
index is printed: a shared CPU driver reads the index's numbers from its table ``S`` (see
:class:`.gemm_template.Numbers`), the CUDA template prints them as literals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import sympy as sp

from fusionlang.backend.cexpr import Flavor, IndexPrinter, ValuePrinter
from fusionlang.backend.half import narrow, rounded, widen
from fusionlang.ir.types import HALF_FLOATS, register_ml_dtypes


@dataclass(frozen=True)
class Load:
    """``array[offset]`` widened from ``dtype`` to float: ``offset`` is the flat element
    offset, an integer expression over the element's coordinates."""

    array: str
    offset: sp.Expr
    dtype: str = "float32"


@dataclass(frozen=True)
class Define:
    """``const float var = value;``: ``value`` is a float expression whose symbols are
    ``reads`` (a symbol to a :class:`Load` or to the name of a variable defined before, or
    ``v``); a 16-bit ``dtype`` rounds the value once, as the loop nest stores it."""

    var: str
    value: sp.Expr
    reads: tuple[tuple[sp.Symbol, Load | str], ...] = ()
    dtype: str = "float32"


@dataclass(frozen=True)
class Store:
    """``array[offset] = var;`` narrowed to ``dtype``: an output the epilogue writes besides
    the product's own array."""

    array: str
    offset: sp.Expr
    var: str
    dtype: str = "float32"


@dataclass(frozen=True)
class Assign:
    """``target = source;`` between variables: the epilogue's result into ``v``."""

    target: str
    source: str


@dataclass(frozen=True)
class Text:
    """A statement as written (the template's tests and hand-written epilogues): it reads
    no array through an index the template prints."""

    line: str


Statement = Define | Store | Assign | Text

#: how a template prints an index: an integer expression to C
IndexText = Callable[[sp.Expr], str]


class StatementPrinter:
    """Prints statements as C (or CUDA), indices through ``index`` in the order they appear
    in the text (one value printer for all: building one costs more than printing)."""

    def __init__(self, flavor: Flavor, index: IndexText) -> None:
        self.index = index
        self.reads: dict[sp.Symbol, Load | str] = {}
        self.loaded: dict[Load, str] = {}
        self.values = ValuePrinter("float32", flavor, self._read)
        #: the 16-bit dtype each variable defined so far holds its value in (a definition
        #: sets or clears its entry, so a printer reused across epilogues never reads a stale one)
        self.half_vars: dict[str, str] = {}

    def _read(self, sym: sp.Symbol) -> str:
        # called as the value printer reaches the symbol: indices number in the text's order
        source = self.reads.get(sym, sym.name)
        if isinstance(source, Load):
            return self._load(source)
        return source

    def _load(self, load: Load) -> str:
        # a Load read again prints its first text: a shared driver's index numbers each took
        # a slot of their own, and the compiler cannot see that S[1] * i + j and S[4] * i + j
        # are one element (GELU's backward read its saved activation four times per element)
        if load not in self.loaded:
            self.loaded[load] = widen(load.dtype, f"{load.array}[{self.index(load.offset)}]")
        return self.loaded[load]

    def __call__(self, stmt: Statement) -> str:
        if isinstance(stmt, Text):
            return stmt.line
        if isinstance(stmt, Assign):
            return f"{stmt.target} = {stmt.source};"
        if isinstance(stmt, Store):
            target = f"{stmt.array}[{self.index(stmt.offset)}]"
            return f"{target} = {narrow(stmt.dtype, stmt.var) if stmt.dtype in HALF_FLOATS else stmt.var};"
        self.reads = dict(stmt.reads)
        value = self.values.doprint(stmt.value)
        if stmt.dtype in HALF_FLOATS and not self._exact(stmt.value, stmt.dtype):
            value = rounded(stmt.dtype, value)
        if stmt.dtype in HALF_FLOATS:
            self.half_vars[stmt.var] = stmt.dtype
        else:
            self.half_vars.pop(stmt.var, None)
        return f"const float {stmt.var} = {value};"

    def _exact(self, expr: sp.Expr, dtype: str) -> bool:
        """Whether ``expr`` is already a ``dtype`` value, so rounding it changes nothing: a
        max, min, negation or absolute value of ``dtype`` values (a relu after a rounded
        add: one bf16 rounding of the three of a bias + residual + relu epilogue, each
        about a tenth of an AMX 1x1 conv's time). ``v`` (the float32 product) is not one."""
        if isinstance(expr, (sp.Max, sp.Min)):
            return all(self._exact(arg, dtype) for arg in expr.args)
        if isinstance(expr, sp.Abs):
            return self._exact(expr.args[0], dtype)
        if isinstance(expr, sp.Mul) and len(expr.args) == 2 and expr.args[0] == -1:
            return self._exact(expr.args[1], dtype)
        if isinstance(expr, sp.Symbol):
            source = self.reads.get(expr)
            if isinstance(source, Load):
                return source.dtype == dtype
            return source is not None and self.half_vars.get(source) == dtype
        return bool(expr.is_Number) and expr.is_finite is not False and _representable(float(expr), dtype)


def _representable(x: float, dtype: str) -> bool:
    """Whether the float ``x`` is exactly a ``dtype`` value."""
    register_ml_dtypes(dtype)
    return bool(np.array(x, np.float32).astype(dtype).astype(np.float64) == x)


def next_rows_prefetches(stmts: tuple[Statement, ...], index: IndexText, rows: str = "mm") -> list[str]:
    """Lines, run once per row ``i`` of a tile, that prefetch row ``i + rows`` of each array
    the statements read along the row: the next tile a blocked GEMM finishes lies below
    this one (its loops step down the rows of a column panel), so its epilogue's reads are
    rows of another 4 KiB page each, which the hardware prefetcher does not follow. GELU's
    backward over a 256 x 1024 GEMM reading the saved activation, caches cold: 1.93 -> 1.60
    ms (the epilogue alone 0.44 -> 0.24). Its stores, prefetched for writing, gained nothing
    measurable. The address is integer arithmetic (the compiler's own uintptr_t: a template
    unit need not include stdint.h): a prefetch never faults, and no pointer leaves its array."""
    i, j, below = sp.Symbol("i", integer=True), sp.Symbol("j", integer=True), sp.Symbol(rows, integer=True)
    lines, seen = [], set()
    for load in _row_loads(stmts):
        names = {sym.name: sym for sym in load.offset.free_symbols}
        if not {"i", "j"} <= set(names) or (load.array, load.offset) in seen:
            continue  # the same element for every row, or one per row: in cache already
        seen.add((load.array, load.offset))
        ahead = load.offset.subs({names["i"]: i + below, names["j"]: j})
        lines.append(f"for (long j = j0; j < j0 + nn; j += {64 // np.dtype(load.dtype).itemsize}) "
                     f"__builtin_prefetch((const void *)((__UINTPTR_TYPE__){load.array} + sizeof(*{load.array}) "
                     f"* (__UINTPTR_TYPE__)({index(ahead)})));")
    return lines


def _row_loads(stmts: tuple[Statement, ...]) -> list[Load]:
    return [source for stmt in stmts if isinstance(stmt, Define) for _, source in stmt.reads if isinstance(source, Load)]


def statements_text(stmts: tuple[Statement, ...], flavor: Flavor, index: IndexText | None = None) -> list[str]:
    """The statements' lines, indices printed as literals unless ``index`` says otherwise."""
    printer = StatementPrinter(flavor, index or IndexPrinter())
    return [line.strip() for stmt in stmts for line in printer(stmt).strip().splitlines()]


__all__ = ["Assign", "Define", "IndexText", "Load", "Statement", "StatementPrinter", "Store", "Text", "next_rows_prefetches",
           "statements_text"]
