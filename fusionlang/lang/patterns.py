"""Patterns: the left side of a rewrite as a tree of op, variable and literal nodes.

The syntax allows infix forms (``x * c``, ``-x``, ``a < b``); here they become the ops
they stand for, so the matcher only ever compares op names. The same compiled form
serves the static loop check: :func:`term_of` turns a replacement into a term over the
same node kinds, and :func:`may_match` asks whether a pattern could match a node built
from that term.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fusionlang.lang import ast as A
from fusionlang.lang.diagnostics import Span

_INFIX = {"+": "add", "-": "sub", "*": "mul", "/": "div", "**": "pow"}
_COMPARE = {"==": "equal", "<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal"}


class PatternError(Exception):
    def __init__(self, span: Span | None, message: str, hint: str = ""):
        super().__init__(message)
        self.span, self.message, self.hint = span, message, hint


@dataclass(frozen=True)
class PVar:
    """Matches any value and binds it (``_`` binds nothing)."""

    name: str
    span: Span

    @property
    def anonymous(self) -> bool:
        return self.name == "_"


@dataclass(frozen=True)
class PLit:
    """Matches a constant whose elements all equal ``value``."""

    value: int | float
    span: Span


@dataclass(frozen=True)
class PAttr:
    name: str
    #: "lit" (must equal ``value``) or "var" (binds, or must equal the earlier binding)
    kind: str
    value: Any  # a literal ("lit"), a variable's name ("var")
    span: Span


@dataclass(frozen=True)
class POp:
    op: str
    operands: tuple
    attrs: tuple[PAttr, ...]
    rest: str | None
    bind: str | None
    span: Span
    #: span of the op name (where "op differs" failures point)
    op_span: Span


@dataclass(frozen=True)
class PFolded:
    """In a replacement term: a sub-expression over constants, folded at rewrite time."""

    span: Span


def literal_value(expr):
    """The static literal an attribute pattern compares with, or raises PatternError."""
    if isinstance(expr, (A.Num, A.Str)):
        return expr.value
    if isinstance(expr, A.Neg) and isinstance(expr.operand, A.Num):
        return -expr.operand.value
    if isinstance(expr, A.ListE):
        return tuple(literal_value(e) for e in expr.items)
    raise PatternError(getattr(expr, "span", None), "an attribute in a pattern must be a variable, a literal "
                       "or a list of literals")


def compile_pattern(expr, *, bind: str | None = None):
    """The pattern tree of ``expr`` (the left side of a rewrite)."""
    if isinstance(expr, A.Bind):
        inner = expr.expr
        if not isinstance(inner, (A.Call, A.BinOp, A.Neg, A.Compare, A.BoolOp, A.Not)):
            raise PatternError(expr.span, f"'{expr.name.text} @' must name an op pattern")
        return compile_pattern(inner, bind=expr.name.text)
    if isinstance(expr, A.Var):
        return PVar(expr.name, expr.span)
    if isinstance(expr, A.Num):
        if isinstance(expr.value, bool):
            raise PatternError(expr.span, f"{'true' if expr.value else 'false'} is a static boolean, not a tensor "
                                          "operand")
        return PLit(expr.value, expr.span)
    if isinstance(expr, A.Neg):
        if isinstance(expr.operand, A.Num) and not isinstance(expr.operand.value, bool):
            return PLit(-expr.operand.value, expr.span)
        return _op("neg", (compile_pattern(expr.operand),), (), None, bind, expr.span, expr.span)
    if isinstance(expr, A.BinOp):
        if expr.op not in _INFIX:
            raise PatternError(expr.span, f"operator {expr.op!r} has no op to match")
        return _op(_INFIX[expr.op], (compile_pattern(expr.left), compile_pattern(expr.right)), (), None, bind,
                   expr.span, expr.span)
    if isinstance(expr, A.Compare):
        pair = (compile_pattern(expr.left), compile_pattern(expr.right))
        if expr.op == "!=":
            eq = _op("equal", pair, (), None, None, expr.span, expr.span)
            return _op("not", (eq,), (), None, bind, expr.span, expr.span)
        return _op(_COMPARE[expr.op], pair, (), None, bind, expr.span, expr.span)
    if isinstance(expr, A.BoolOp):
        out = compile_pattern(expr.items[0])
        for k, item in enumerate(expr.items[1:]):
            out = _op(expr.op, (out, compile_pattern(item)), (), None, bind if k == len(expr.items) - 2 else None,
                      expr.span, expr.span)
        return out
    if isinstance(expr, A.Not):
        return _op("not", (compile_pattern(expr.operand),), (), None, bind, expr.span, expr.span)
    if isinstance(expr, A.Call):
        attrs, rest = [], None
        for item in expr.attrs or ():
            if isinstance(item, A.AttrRest):
                if rest is not None:
                    raise PatternError(item.span, "only one '..rest' per op pattern")
                rest = item.name.text
            elif isinstance(item.value, A.Var):
                attrs.append(PAttr(item.name.text, "var", item.value.name, item.span))
            else:
                attrs.append(PAttr(item.name.text, "lit", literal_value(item.value), item.span))
        return POp(expr.func.text, tuple(compile_pattern(a) for a in expr.args), tuple(attrs), rest, bind,
                   expr.span, expr.func.span)
    raise PatternError(getattr(expr, "span", None), "this form cannot appear in a pattern",
                       "patterns are made of op calls, variables, numbers and infix arithmetic")


def _op(op, operands, attrs, rest, bind, span, op_span):
    return POp(op, operands, attrs, rest, bind, span, op_span)


def root_op(expr) -> str:
    p = compile_pattern(expr)
    return p.op if isinstance(p, POp) else ""


def ops_of(p) -> list[POp]:
    """Every op node of a pattern or term, root first."""
    out, stack = [], [p]
    while stack:
        q = stack.pop()
        if isinstance(q, POp):
            out.append(q)
            stack.extend(reversed(q.operands))
    return out


def variables_of(p) -> list[str]:
    out, stack = [], [p]
    while stack:
        q = stack.pop()
        if isinstance(q, PVar) and not q.anonymous:
            out.append(q.name)
        elif isinstance(q, POp):
            if q.bind:
                out.append(q.bind)
            stack.extend(reversed(q.operands))
    return out


# ----- terms of replacements (for the static loop check) --------------------------------


def term_of(expr, is_op, constant_vars: frozenset[str]):
    """The replacement ``expr`` as a term; static or constant-only parts become PFolded.

    ``is_op(name)`` tells ops from meta functions; ``constant_vars`` are the variables a
    `const(...)` guard pins to constants (sub-expressions over them fold away).
    """

    def walk(e):
        if isinstance(e, A.Var):
            return PFolded(e.span) if e.name in constant_vars else PVar(e.name, e.span)
        if isinstance(e, (A.Num, A.Str, A.ListE, A.Index)):
            return PFolded(e.span)
        if isinstance(e, A.Call) and not is_op(e.func.text):
            return PFolded(e.span)
        if isinstance(e, A.Call):
            attrs = []
            for item in e.attrs or ():
                if isinstance(item, A.AttrItem):
                    try:
                        attrs.append(PAttr(item.name.text, "lit", literal_value(item.value), item.span))
                    except PatternError:
                        attrs.append(PAttr(item.name.text, "var", None, item.span))
            return _fold(POp(e.func.text, tuple(walk(a) for a in e.args), tuple(attrs), None, None, e.span,
                             e.func.span))
        if isinstance(e, A.Neg):
            return _fold(POp("neg", (walk(e.operand),), (), None, None, e.span, e.span))
        if isinstance(e, A.BinOp) and e.op in _INFIX:
            return _fold(POp(_INFIX[e.op], (walk(e.left), walk(e.right)), (), None, None, e.span, e.span))
        if isinstance(e, A.Compare):
            op = _COMPARE.get(e.op, "equal")
            return _fold(POp(op, (walk(e.left), walk(e.right)), (), None, None, e.span, e.span))
        if isinstance(e, A.BoolOp):
            return _fold(POp(e.op, tuple(walk(i) for i in e.items), (), None, None, e.span, e.span))
        if isinstance(e, A.Not):
            return _fold(POp("not", (walk(e.operand),), (), None, None, e.span, e.span))
        return PFolded(getattr(e, "span", None))

    return walk(expr)


def _fold(term: POp):
    if all(isinstance(o, PFolded) for o in term.operands):
        return PFolded(term.span)
    return term


def may_match(pattern, term, commutative) -> bool:
    """Could ``pattern`` match the node a replacement builds from ``term``?

    Variables of the term stand for values that existed before the rewrite; they are
    taken never to match an op pattern (their matches were already possible), so only
    newly built structure counts.
    """
    if isinstance(pattern, PVar):
        return True
    if isinstance(pattern, PLit):
        return isinstance(term, PFolded)
    if not isinstance(term, POp) or term.op != pattern.op or len(term.operands) != len(pattern.operands):
        return False
    for attr in pattern.attrs:
        if attr.kind != "lit":
            continue
        for t_attr in term.attrs:
            if t_attr.name == attr.name and t_attr.kind == "lit" and t_attr.value != attr.value:
                return False
    orders = [term.operands]
    if commutative(pattern.op) and len(term.operands) == 2:
        orders.append(term.operands[::-1])
    return any(all(may_match(p, t, commutative) for p, t in zip(pattern.operands, operands)) for operands in orders)
