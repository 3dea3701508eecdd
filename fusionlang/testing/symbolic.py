"""Proofs with sympy: a rewrite (or decomposition) between elementwise ops holds for
every input when its two sides are the same scalar function.

Both sides become sympy expressions built node by node from the rule's syntax tree and
the ops' own scalar formulas (the ``body`` of each elementwise op's access spec, which
is also what code generation prints). Nothing is parsed from text: no ``sympify`` of a
string, no ``eval``. Pattern variables become real symbols, numeric literals become
numbers, and attributes the pattern does not pin become symbols too (a rule must hold
for every value it accepts). The rule is proved when ``simplify(lhs - rhs)`` is 0.

A proof is over the reals. Decimal constants in rules (``0.7071067811865476``) are read
as the simple closed form they round (``sqrt(2)/2``) when that is what makes the
difference vanish, and the proof says so. Integer arithmetic (truncating division) is not
what the reals model; the checker therefore runs instances on top of every proof.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import sympy as sp

from fusionlang.ir.types import TensorType
from fusionlang.lang import ast as A
from fusionlang.lang.patterns import PLit, POp, PVar
from fusionlang.ops.access import as_expr, v_sym
from fusionlang.ops.registry import OpCall, OpRegistry
from fusionlang.ops.scalar import Sigmoid

#: elementwise ops whose scalar formula is not a function of real numbers (cast changes
#: the type and truncates; its loop body is only the read)
NOT_REAL = frozenset({"cast"})

#: give up on expressions bigger than this (simplify can take minutes on big trees)
MAX_OPS = 400

_BINARY = {"+": "add", "-": "sub", "*": "mul", "/": "div", "**": "pow"}
_COMPARE = {"==": "equal", "<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal"}


class NotScalar(Exception):
    """This side of the rule is not a scalar formula (a reduction, a static function...)."""


@dataclass
class Proof:
    proved: bool
    #: how (or why not), in words
    note: str
    lhs: sp.Basic | None = None
    rhs: sp.Basic | None = None


def scalar_formula(registry: OpRegistry, op: str, n_inputs: int, attrs: dict | None = None) -> sp.Basic | None:
    """The scalar formula of an elementwise ``op`` over ``v0..v{n-1}`` with ``attrs``
    (values may be sympy symbols), or None when the op is not elementwise."""
    if op in NOT_REAL:
        return None
    opdef = registry.lookup(op)
    if opdef is None or opdef.access is None or opdef.compound:
        return None
    if attrs is None:
        try:
            attrs = opdef.normalize_attrs({}, op)
        except Exception:  # an op with required attributes: not elementwise in our sense
            return None
    scalar = TensorType((), "float32")
    call = OpCall(op, op, dict(attrs), [scalar] * n_inputs, [scalar])
    try:
        stmts = opdef.access(call)
    except Exception:  # the formula could not take symbolic attributes, or needs other inputs
        return None
    if len(stmts) != 1:
        return None
    stmt = stmts[0]
    if stmt.reduce is not None or stmt.write is not None or stmt.domain != ():
        return None
    if any(not isinstance(r.source, int) or r.index != () or r.cond is not None for r in stmt.reads):
        return None
    if [r.source for r in stmt.reads] != list(range(n_inputs)):
        return None
    return as_expr(stmt.body)


class _Builder:
    """Builds the sympy form of a pattern and of a replacement over shared symbols."""

    def __init__(self, registry: OpRegistry):
        self.registry = registry
        self.tensors: dict[str, sp.Symbol] = {}
        self.statics: dict[str, object] = {}
        self.rests: dict[str, dict] = {}
        self.fresh = 0
        self.notes: list[str] = []

    def symbol(self, stem: str) -> sp.Symbol:
        self.fresh += 1
        return sp.Symbol(f"{stem}_{self.fresh}", real=True)

    def op(self, op: str, operands: list, attrs: dict) -> sp.Basic:
        body = scalar_formula(self.registry, op, len(operands), attrs)
        if body is None:
            raise NotScalar(f"{op} is not an elementwise op with a scalar formula")
        return body.xreplace({v_sym(k): e for k, e in enumerate(operands)})

    def open_attrs(self, op: str, pinned: dict, rest: str | None) -> dict:
        """Every attribute of ``op``: the pinned ones, the others as fresh symbols (a
        pattern that does not pin an attribute matches every value of it)."""
        opdef = self.registry.get(op)
        attrs, spread = {}, {}
        for name, spec in opdef.attrs.items():
            if name in pinned:
                attrs[name] = pinned[name]
            elif spec.kind in ("float", "int"):
                attrs[name] = spread[name] = self.symbol(f"{op}_{name}")
            else:
                raise NotScalar(f"attribute {name!r} of {op} is not numeric")
        if rest is not None:
            self.rests[rest] = spread
        return attrs

    # ----- the pattern ----------------------------------------------------------------
    def pattern(self, p) -> sp.Basic:
        if isinstance(p, PVar):
            if p.anonymous:
                return self.symbol("any")
            if p.name not in self.tensors:
                self.tensors[p.name] = sp.Symbol(p.name, real=True)
            return self.tensors[p.name]
        if isinstance(p, PLit):
            return _number(p.value)
        if isinstance(p, POp):
            pinned = {}
            for attr in p.attrs:
                if attr.kind == "lit":
                    pinned[attr.name] = attr.value
                else:
                    if attr.value not in self.statics:
                        self.statics[attr.value] = self.symbol(attr.value)
                    pinned[attr.name] = self.statics[attr.value]
            attrs = self.open_attrs(p.op, pinned, p.rest)
            value = self.op(p.op, [self.pattern(o) for o in p.operands], attrs)
            if p.bind is not None:
                self.tensors[p.bind] = value
            return value
        raise NotScalar(f"unsupported pattern node {type(p).__name__}")

    # ----- replacements and bodies ------------------------------------------------------
    def expr(self, e, env: dict) -> sp.Basic:
        if isinstance(e, A.Num):
            return _number(e.value)
        if isinstance(e, A.Var):
            if e.name in env:
                value = env[e.name]
                if isinstance(value, (sp.Basic, int, float)):
                    return as_expr(value)
            raise NotScalar(f"{e.name!r} is not a scalar here")
        operator = infix_op(e)
        if operator is not None:
            return self.op(operator[0], [self.expr(o, env) for o in operator[1]], {})
        if isinstance(e, A.Call) and e.func.text in self.registry:
            try:
                attrs = call_attrs(self.registry.get(e.func.text), e, self.rests, lambda v: self.static(v, env))
            except LookupError as exc:
                raise NotScalar(f"{e.func.text} needs attribute {exc.args[0]!r}") from None
            return self.op(e.func.text, [self.expr(a, env) for a in e.args], attrs)
        raise NotScalar("not an elementwise expression")

    def static(self, e, env: dict):
        if isinstance(e, (A.Num, A.Str)):
            return e.value
        if isinstance(e, A.Neg) and isinstance(e.operand, A.Num):
            return -e.operand.value
        if isinstance(e, A.Var) and e.name in self.statics:
            return self.statics[e.name]
        raise NotScalar("attribute value is not a literal or a bound attribute")

    def body(self, stmts, env: dict) -> list[sp.Basic]:
        return run_body(stmts, env, self.expr, NotScalar)


def infix_op(e) -> tuple[str, tuple] | None:
    """(the op, its operands) of an operator expression (``-x``, ``a * b``, ``a < b``)."""
    if isinstance(e, A.Neg):
        return "neg", (e.operand,)
    if isinstance(e, A.BinOp) and e.op in _BINARY:
        return _BINARY[e.op], (e.left, e.right)
    if isinstance(e, A.Compare) and e.op in _COMPARE:
        return _COMPARE[e.op], (e.left, e.right)
    return None


def run_body(stmts, env: dict, evaluate, error: type[Exception]) -> list:
    """The returned values of a decomposition body: each ``let`` is ``evaluate(expr,
    env)`` in the names before it; ``error(reason)`` is raised for what is not modelled."""
    env = dict(env)
    for stmt in stmts:
        if isinstance(stmt, A.Let):
            if len(stmt.names) != 1:
                raise error("multi-output statement")
            env[stmt.names[0].text] = evaluate(stmt.value, env)
        elif isinstance(stmt, A.Return):
            return [evaluate(v, env) for v in stmt.values]
    raise error("body without return")


def call_attrs(opdef, call: A.Call, rests: dict, static) -> dict:
    """Every attribute of the op ``call`` (in a replacement) builds: those it sets
    (``static(expr)`` gives each value, ``..rest`` spreads ``rests[rest]``), the defaults
    of the others. Raises LookupError(name) for a required one it leaves out."""
    pinned: dict = {}
    for item in call.attrs or ():
        if isinstance(item, A.AttrRest):
            pinned.update(rests.get(item.name.text, {}))
        else:
            pinned[item.name.text] = static(item.value)
    attrs = {}
    for name, spec in opdef.attrs.items():
        if name in pinned:
            attrs[name] = pinned[name]
        elif not spec.required:
            attrs[name] = spec.default
        else:
            raise LookupError(name)
    return attrs


def _number(value) -> sp.Basic:
    if isinstance(value, bool):
        return sp.Integer(int(value))
    if isinstance(value, int):
        return sp.Integer(value)
    return sp.Float(value)


def _closed_forms(expr: sp.Basic) -> tuple[sp.Basic, bool]:
    """``expr`` with decimal constants replaced by the closed forms they round, if any."""
    mapping = {}
    for f in expr.atoms(sp.Float):
        simple = sp.nsimplify(f, [sp.pi], tolerance=1e-15, rational=False)
        if simple != f:
            mapping[f] = simple
    return (expr.xreplace(mapping), True) if mapping else (expr, False)


def _vanishes(diff: sp.Basic) -> tuple[bool, bool]:
    """(is the difference identically 0, were closed forms needed)."""
    diff = diff.replace(Sigmoid, lambda a: 1 / (1 + sp.exp(-a)))
    if sp.count_ops(diff) > MAX_OPS:
        return False, False
    for closed in (False, True):
        if closed:
            diff, changed = _closed_forms(diff)
            if not changed:
                break
        if diff == 0 or sp.simplify(diff) == 0:
            return True, closed
        if diff.has(sp.Piecewise, sp.Max, sp.Min, sp.Abs):
            # simplify does not compare a Piecewise with a Max (leaky_relu with alpha 0
            # against relu); as one folded Piecewise the branches cancel one by one
            if sp.simplify(sp.piecewise_fold(diff.rewrite(sp.Piecewise))) == 0:
                return True, closed
    return False, False


@lru_cache(maxsize=512)
def _decide(lhs: sp.Basic, rhs: sp.Basic) -> tuple[bool, bool]:
    return _vanishes(lhs - rhs)


def same_function(lhs: sp.Basic, rhs: sp.Basic) -> tuple[bool, bool]:
    """(are ``lhs`` and ``rhs`` the same function over the reals, were decimal constants
    read as the closed forms they round to show it)."""
    return _decide(lhs, rhs)


def _verdict(lhs, rhs) -> Proof:
    proved, closed = _decide(lhs, rhs)
    if not proved:
        return Proof(False, f"sympy could not show {lhs} == {rhs}", lhs, rhs)
    how = "proved with sympy over the reals"
    if closed:
        how += " (decimal constants read as the closed forms they round)"
    return Proof(True, how, lhs, rhs)


def prove_rewrite(rule, registry: OpRegistry) -> Proof:
    """Try to prove a rewrite whose pattern and replacement are elementwise."""
    builder = _Builder(registry)
    try:
        lhs = builder.pattern(rule.compiled)
        env = dict(builder.tensors)
        env.update({k: v for k, v in builder.statics.items()})
        rhs = builder.expr(rule.replacement, env)
    except NotScalar as exc:
        return Proof(False, f"not a scalar rule: {exc}")
    return _verdict(lhs, rhs)


def prove_decomposition(case, registry: OpRegistry) -> Proof:
    """Try to prove a decomposition case of an elementwise op (GeLU, sigmoid...)."""
    builder = _Builder(registry)
    try:
        args = [sp.Symbol(p, real=True) for p in case.params]
        pinned = dict(case.requires)
        for attr, var in case.binds:
            builder.statics[var] = builder.symbol(var)
            pinned[attr] = builder.statics[var]
        attrs = builder.open_attrs(case.op, pinned, None)
        lhs = builder.op(case.op, args, attrs)
        env = dict(zip(case.params, args))
        env.update(builder.statics)
        values = builder.body(case.body, env)
    except NotScalar as exc:
        return Proof(False, f"not a scalar decomposition: {exc}")
    if len(values) != 1:
        return Proof(False, "not a single-output decomposition")
    return _verdict(lhs, values[0])


__all__ = ["NOT_REAL", "Proof", "call_attrs", "infix_op", "prove_decomposition", "prove_rewrite", "run_body",
           "same_function", "scalar_formula"]
