"""The syntax tree of a .fuse file: what the parser produces and the checker reads.

Every node keeps its source span, but spans never take part in equality: two trees
that say the same thing compare equal wherever they were written (the printer's
round-trip test relies on this). Nodes are frozen dataclasses, so a RuleSet built from
them is immutable all the way down.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from fusionlang.lang.diagnostics import NO_SPAN, Span


def _span():
    return field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True)
class Name:
    """An identifier together with where it was written."""

    text: str
    span: Span = _span()

    def __str__(self) -> str:
        return self.text


# ----- expressions --------------------------------------------------------------------
# One expression language serves patterns, replacements, bodies, formulas, guards and
# attribute values; the checker decides what each form means in its context.


@dataclass(frozen=True)
class Num:
    value: int | float
    span: Span = _span()


@dataclass(frozen=True)
class Str:
    value: str
    span: Span = _span()


@dataclass(frozen=True)
class Var:
    name: str
    span: Span = _span()


@dataclass(frozen=True)
class ListE:
    items: tuple["Expr", ...]
    span: Span = _span()


@dataclass(frozen=True)
class AttrItem:
    name: Name
    value: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class AttrRest:
    """``..rest``: in a pattern, the attributes not named; in a replacement, spread them."""

    name: Name
    span: Span = _span()


@dataclass(frozen=True)
class Call:
    func: Name
    args: tuple["Expr", ...]
    #: None when the call has no ``{...}``; an empty tuple for ``{}``
    attrs: tuple[AttrItem | AttrRest, ...] | None = None
    span: Span = _span()


@dataclass(frozen=True)
class Bind:
    """``name @ pattern``: names the value a sub-pattern matches."""

    name: Name
    expr: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class BinOp:
    op: str  # + - * / // % **
    left: "Expr"
    right: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class Neg:
    operand: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class Compare:
    op: str  # == != < <= > >=
    left: "Expr"
    right: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class BoolOp:
    op: str  # and, or
    items: tuple["Expr", ...]
    span: Span = _span()


@dataclass(frozen=True)
class Not:
    operand: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class Index:
    base: "Expr"
    index: "Expr"
    span: Span = _span()


Expr = Union[Num, Str, Var, ListE, Call, Bind, BinOp, Neg, Compare, BoolOp, Not, Index]


# ----- items --------------------------------------------------------------------------


@dataclass(frozen=True)
class Import:
    path: str
    span: Span = _span()
    #: ``import "x.fuse" for lowering``: the file is its own rule set, whose decompositions
    #: open the compound ops partitioning kept whole (nothing else of it joins the importer)
    lowering: bool = False
    #: ``import "x.fuse" without decompose OP, ...``: ops the importer keeps whole while it
    #: rewrites (the decompositions stay, to open them inside their groups after partitioning)
    without: tuple[Name, ...] = ()


@dataclass(frozen=True)
class Categories:
    names: tuple[Name, ...]
    span: Span = _span()


@dataclass(frozen=True)
class ClassDecl:
    #: op names; the name ``def`` stands for every op introduced by a `def` formula
    ops: tuple[Name, ...]
    category: Name | None
    flags: tuple[Name, ...]
    guard: Expr | None = None
    span: Span = _span()


@dataclass(frozen=True)
class AttrParam:
    name: Name
    default: Expr | None = None
    span: Span = _span()


@dataclass(frozen=True)
class Let:
    names: tuple[Name, ...]
    value: Expr
    span: Span = _span()


@dataclass(frozen=True)
class Return:
    values: tuple[Expr, ...]
    span: Span = _span()


Stmt = Union[Let, Return]


@dataclass(frozen=True)
class Oracle:
    """What a def is checked against: a second body computing its outputs
    (``oracle { ... }``), or a test vector (``oracle (inputs) {attrs} => output``)."""

    body: tuple[Stmt, ...] | None = None
    inputs: tuple[Expr, ...] = ()
    attrs: tuple[AttrItem, ...] = ()
    expected: Expr | None = None
    span: Span = _span()


@dataclass(frozen=True)
class DefDecl:
    name: Name
    params: tuple[Name, ...]
    attrs: tuple[AttrParam, ...]
    #: exactly one of formula (elementwise def) and body (compound def)
    formula: Expr | None = None
    body: tuple[Stmt, ...] | None = None
    span: Span = _span()
    oracles: tuple[Oracle, ...] = ()


@dataclass(frozen=True)
class Decompose:
    op: Name
    params: tuple[Name, ...]
    #: ``axis`` binds the attribute; ``approximate="tanh"`` restricts the case to it
    attrs: tuple[AttrParam, ...]
    body: tuple[Stmt, ...]
    span: Span = _span()
    #: what ``check`` would fail the case for and its author accepts (``accepts overflow``)
    accepts: tuple[Name, ...] = ()


@dataclass(frozen=True)
class Rewrite:
    name: Name
    priority: int
    shared: bool
    pattern: Expr
    guard: Expr | None
    replacement: Expr
    span: Span = _span()
    #: what ``check`` would fail the rule for and its author accepts (``accepts overflow``)
    accepts: tuple[Name, ...] = ()


@dataclass(frozen=True)
class FuseOpt:
    name: Name
    #: None for a bare flag (``stitch``); else an int, float or str
    value: int | float | str | None = None
    span: Span = _span()


@dataclass(frozen=True)
class FuseDecl:
    producers: tuple[Name, ...]
    consumers: tuple[Name, ...]
    result: Name
    options: tuple[FuseOpt, ...]
    span: Span = _span()
    #: ``fuse sibling A, B : R``: producers and consumers are then the two siblings' categories
    sibling: bool = False
    #: ``when GUARD``: the entry applies to an edge only where the guard holds
    guard: "Expr | None" = None


@dataclass(frozen=True)
class NoFuseDecl:
    """``nofuse PRODUCERS -> CONSUMERS [when GUARD]``: a deny entry of the fuse table."""

    producers: tuple[Name, ...]
    consumers: tuple[Name, ...]
    span: Span = _span()
    guard: "Expr | None" = None


@dataclass(frozen=True)
class FusePattern:
    """``fuse pattern NAME: PATTERN [where GUARD] [as RESULT]``: every subgraph the pattern
    matches becomes one group, before the category pairs are consulted."""

    name: Name
    pattern: Expr
    guard: Expr | None = None
    #: the group's category; None: the highest category among the matched nodes
    result: Name | None = None
    span: Span = _span()


@dataclass(frozen=True)
class Option:
    name: Name
    value: Expr
    span: Span = _span()


@dataclass(frozen=True)
class StrategyDecl:
    name: Name
    options: tuple[Option, ...]
    span: Span = _span()


@dataclass(frozen=True)
class TType:
    dtype: Name
    shape: tuple[int, ...]
    span: Span = _span()


@dataclass(frozen=True)
class TInput:
    name: Name
    ttype: TType
    span: Span = _span()


@dataclass(frozen=True)
class TConst:
    name: Name
    ttype: TType
    init: Expr | None = None
    span: Span = _span()


@dataclass(frozen=True)
class TOutput:
    names: tuple[Name, ...]
    span: Span = _span()


@dataclass(frozen=True)
class TExpect:
    expr: Expr
    span: Span = _span()


TestStmt = Union[TInput, TConst, Let, TOutput, TExpect]


@dataclass(frozen=True)
class TestDecl:
    name: Name
    strategy: Name | None
    stmts: tuple[TestStmt, ...]
    span: Span = _span()


Item = Union[Import, Categories, ClassDecl, DefDecl, Decompose, Rewrite, FuseDecl, NoFuseDecl, FusePattern,
             StrategyDecl, TestDecl]


@dataclass(frozen=True)
class Module:
    path: str
    items: tuple[Item, ...]


def walk(expr):
    """Yield ``expr`` and every expression nested in it, parents first."""
    stack = [expr]
    while stack:
        e = stack.pop()
        if e is None:
            continue
        yield e
        if isinstance(e, (ListE,)):
            stack.extend(reversed(e.items))
        elif isinstance(e, Call):
            for a in reversed(e.attrs or ()):
                if isinstance(a, AttrItem):
                    stack.append(a.value)
            stack.extend(reversed(e.args))
        elif isinstance(e, Bind):
            stack.append(e.expr)
        elif isinstance(e, (BinOp, Compare)):
            stack.extend((e.right, e.left))
        elif isinstance(e, (Neg, Not)):
            stack.append(e.operand)
        elif isinstance(e, BoolOp):
            stack.extend(reversed(e.items))
        elif isinstance(e, Index):
            stack.extend((e.index, e.base))
