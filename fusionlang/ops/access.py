"""Access specs: the loop form of an op, which the polyhedral layer fuses.

An op's ``access(call)`` returns statements (:class:`Stmt`). A statement computes (part
of) one node output over a rectangular iteration domain:

* output indices ``i0..i{n-1}`` range over ``domain`` and are written at ``write``
  (identity when None);
* reduction indices ``r0..r{m-1}`` range over ``reduce_extents``;
* each :class:`Read` loads one element of an input at an index (sympy expressions over
  the ``i``/``r`` symbols; quasi-affine where possible: +, constant *, floor-div and mod
  by constants, min/max). An index that also mentions a loaded value ``v{k}`` is an
  indirect (data-dependent) read, e.g. Gather. A read whose index falls outside the input,
  or whose ``cond`` is false, yields ``pad``;
* ``body`` is a scalar sympy expression over ``v{k}`` (the k-th read) and the indices.
  Without ``reduce`` it is the output value. With ``reduce`` in {sum, max, min, prod},
  ``acc`` = reduction of ``body`` over the ``r`` box and the output is ``finalize``
  (an expression over ``acc``, the indices and reads that do not depend on ``r``).

Several statements may write disjoint parts of one output (Concat).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import sympy as sp
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import sp

REDUCTIONS = ("sum", "max", "min", "prod")


@lru_cache(maxsize=None)
def acc_sym() -> sp.Symbol:
    """The accumulator of a reduction, in ``finalize``."""
    return sp.Symbol("acc")


def __getattr__(name: str):
    # ``ACC``: the accumulator symbol, built with sympy on first use
    if name == "ACC":
        return acc_sym()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@lru_cache(maxsize=None)
def as_expr(value) -> sp.Basic:
    """A sympy object for a value built in code (an int, a float, an expression). Never
    parses text: nothing a rule file or a model says is ever read as an expression."""
    if isinstance(value, str):
        raise TypeError(f"as_expr takes values built in code, not text: {value!r}")
    return sp.sympify(value, strict=True)


@lru_cache(maxsize=None)
def i_sym(k: int) -> sp.Symbol:
    """Output index k."""
    return sp.Symbol(f"i{k}", integer=True, nonnegative=True)


@lru_cache(maxsize=None)
def r_sym(k: int) -> sp.Symbol:
    """Reduction index k."""
    return sp.Symbol(f"r{k}", integer=True, nonnegative=True)


@lru_cache(maxsize=None)
def v_sym(k: int) -> sp.Symbol:
    """The value of read k."""
    return sp.Symbol(f"v{k}")


def out_indices(rank: int) -> tuple[sp.Symbol, ...]:
    return tuple(i_sym(k) for k in range(rank))


def red_indices(rank: int) -> tuple[sp.Symbol, ...]:
    return tuple(r_sym(k) for k in range(rank))


def broadcast_index(in_shape: tuple[int, ...], out_rank: int) -> tuple[sp.Expr, ...]:
    """Index into an input broadcast (numpy rules, aligned right) to an output of out_rank."""
    offset = out_rank - len(in_shape)
    return tuple(sp.Integer(0) if d == 1 else i_sym(offset + k) for k, d in enumerate(in_shape))


@dataclass(frozen=True)
class Read:
    """One load of a statement: input ``source`` at ``index`` (sympy over the i/r/v
    symbols), yielding ``pad`` outside the input or where ``cond`` is false."""

    #: node input position, or the name of an entry in the statement's ``aux``
    source: int | str
    index: tuple[sp.Expr, ...]
    #: value of a read outside the source (or with ``cond`` false); None: never outside
    pad: float | None = None
    cond: sp.Basic | None = None

    def uses_reduction(self) -> bool:
        return any(s.name.startswith("r") for e in self.index for s in as_expr(e).free_symbols)

    def is_indirect(self) -> bool:
        return any(s.name.startswith("v") for e in self.index for s in as_expr(e).free_symbols)


@dataclass(frozen=True)
class Stmt:
    """One statement of an access spec: computes (part of) output ``output`` over
    ``domain`` from ``reads`` (see the module docstring)."""

    output: int
    domain: tuple[int, ...]
    reads: tuple[Read, ...]
    body: sp.Expr
    write: tuple[sp.Expr, ...] | None = None
    reduce: str | None = None
    reduce_extents: tuple[int, ...] = ()
    finalize: sp.Expr | None = None
    aux: dict[str, np.ndarray] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self):
        if self.reduce is not None and self.reduce not in REDUCTIONS:
            raise ValueError(f"unknown reduction {self.reduce!r}")
        if self.reduce is None and (self.reduce_extents or self.finalize is not None):
            raise ValueError("reduce_extents/finalize need a reduction")

    @property
    def write_index(self) -> tuple[sp.Expr, ...]:
        return self.write if self.write is not None else out_indices(len(self.domain))

    @property
    def output_expr(self) -> sp.Expr:
        """The output value in terms of ``acc`` (reductions) or the body."""
        if self.reduce is None:
            return self.body
        return acc_sym() if self.finalize is None else self.finalize


def count_ops(expr: sp.Expr | None) -> int:
    """Arithmetic operations in a scalar expression (for flop estimates)."""
    if expr is None:
        return 0
    return int(sp.count_ops(expr))
