"""Checking one expression in its context: operand (tensor) position, static position
(attribute values, guards), or test expectation. Reports unknown names, wrong arities,
unknown attributes and values of the wrong kind, each at its own span."""

from __future__ import annotations

import re

from fusionlang.lang import ast as A
from fusionlang.ir.graph import Graph
from fusionlang.lang.diagnostics import Diagnostics, suggest
from fusionlang.lang.guards import Bindings, Context, GuardError, evaluate
from fusionlang.lang.statictypes import (ANY, BOOL, INT, LIST, META_ARGUMENTS, RETURNS, binop_type, compare_error,
                                         describe, fits, is_number, type_of_value)
from fusionlang.lang.vocab import EXPECT_FUNCTIONS, EXPECT_NAMES, META, PREDICATES, Signature
from fusionlang.ops.registry import OpRegistry
from fusionlang.lang.instantiate import is_static_expr

_STATIC_WHEN_STATIC = ("min", "max", "abs")

#: functions whose value depends on their arguments only (a call of one on constants
#: is constant)
_PURE_FUNCTIONS = frozenset({"len", "range", "reversed", "compose", "perm", "prod", "min", "max", "abs"})
#: constants need no graph and no bindings
_CONSTANT_CONTEXT = Context(Graph("constants"), Bindings())
#: the value of an expression that is not constant
_UNKNOWN = object()


def _is_constant(e) -> bool:
    """True when ``e`` is made of literals and pure functions only (no variables)."""
    for sub in A.walk(e):
        if isinstance(sub, A.Call):
            if sub.func.text not in _PURE_FUNCTIONS or sub.attrs is not None:
                return False
        elif not isinstance(sub, (A.Num, A.Str, A.ListE, A.Neg, A.Not, A.BinOp, A.Compare, A.BoolOp, A.Index)):
            return False
    return True


def arity_text(n: int) -> str:
    return f"{n} input{'s' if n != 1 else ''}"


def describe_arity(opdef) -> str:
    low, high = opdef.min_inputs, opdef.max_inputs
    if high is None:
        return f"at least {arity_text(low)}"
    if low == high:
        return arity_text(low)
    return f"{low} to {high} inputs"


def check_arity(diags: Diagnostics, opdef, n: int, span) -> bool:
    low, high = opdef.min_inputs, opdef.max_inputs
    if n < low or (high is not None and n > high):
        diags.error(span, f"op {opdef.name!r} takes {describe_arity(opdef)}, got {n}",
                    f"{opdef.name}({', '.join(opdef.inputs)})")
        return False
    return True


def check_attr_name(diags: Diagnostics, opdef, name, span) -> bool:
    if name in opdef.attrs:
        return True
    known = ", ".join(opdef.attrs) or "none"
    hint = suggest(name, opdef.attrs)
    diags.error(span, f"op {opdef.name!r} has no attribute {name!r}",
                (hint + " " if hint else "") + f"(attributes: {known})")
    return False


class ExprChecker:
    """Checks expressions against the variables in scope.

    ``tensors``: tensor variables; ``statics``: attribute and static variables;
    ``rests``: `..rest` attribute sets; ``class_context``: a class guard, where
    ``in<k>`` names are allowed and zero-argument node predicates apply to the node.
    """

    def __init__(self, diags: Diagnostics, registry: OpRegistry, *, tensors=(), statics=(), rests=(),
                 what: str = "", class_context: bool = False, symbols=None):
        self.diags = diags
        self.registry = registry
        self.tensors = set(tensors)
        self.statics = set(statics)
        self.rests = set(rests)
        self.what = what
        self.class_context = class_context
        #: test expectations: bare names that are symbols (rules, ops, categories)
        self.symbols = symbols
        #: types of static variables bound by static lets (others are ``any``)
        self.static_types: dict[str, str] = {}

    # ----- helpers --------------------------------------------------------------------
    def _is_tensor_var(self, name: str) -> bool:
        return name in self.tensors or (self.class_context and re.fullmatch(r"in[0-9]+", name) is not None)

    def _unknown_var(self, var: A.Var) -> None:
        scope = sorted(self.tensors | self.statics)
        hint = suggest(var.name, scope)
        if not hint:
            hint = f"names in scope: {', '.join(scope)}" if scope else "nothing is bound here"
        self.diags.error(var.span, f"unknown variable {var.name!r}", hint)

    def is_static(self, e) -> bool:
        """True when ``e`` computes a static value, not a tensor (see is_static_expr)."""

        return is_static_expr(e, self._is_tensor_var, self.registry)

    # ----- operand position -----------------------------------------------------------
    def tensor(self, e) -> None:
        if isinstance(e, A.Num):
            if isinstance(e.value, bool):
                self.diags.error(e.span, f"{'true' if e.value else 'false'} is a static boolean, not a tensor "
                                         "operand", "use it in a guard, an attribute value or a formula")
            return
        if isinstance(e, A.Str):
            self.diags.error(e.span, "a string cannot be a tensor operand")
            return
        if isinstance(e, (A.ListE, A.Index)):
            self.static(e)
            return
        if isinstance(e, A.Var):
            if not (self._is_tensor_var(e.name) or e.name in self.statics):
                self._unknown_var(e)
            return
        if isinstance(e, (A.Neg, A.Not)):
            self.tensor(e.operand)
            return
        if isinstance(e, A.BinOp):
            self.tensor(e.left)
            self.tensor(e.right)
            if e.op in ("//", "%") and not (self.is_static(e.left) and self.is_static(e.right)):
                self.diags.error(e.span, f"operator {e.op!r} works on static values only")
            return
        if isinstance(e, A.Compare):
            self.tensor(e.left)
            self.tensor(e.right)
            return
        if isinstance(e, A.BoolOp):
            for item in e.items:
                self.tensor(item)
            return
        if isinstance(e, A.Call):
            name = e.func.text
            if name in META or name in PREDICATES:
                if name not in self.registry or self.is_static(e):
                    self.static(e)
                    return
            if name in self.registry:
                self.op_call(e)
                return
            self._unknown_function(e, ops=True)
            return
        if isinstance(e, A.Bind):
            self.diags.error(e.span, "'@' names a sub-pattern; it is only allowed in patterns")
            return
        self.diags.error(getattr(e, "span", None), "this form cannot build a tensor")

    def op_call(self, e: A.Call, *, n_outputs: int = 1) -> None:
        opdef = self.registry.get(e.func.text)
        check_arity(self.diags, opdef, len(e.args), e.span)
        for a in e.args:
            self.tensor(a)
        has_rest = False
        seen = set()
        for item in e.attrs or ():
            if isinstance(item, A.AttrRest):
                has_rest = True
                if item.name.text not in self.rests:
                    self.diags.error(item.span, f"unknown attribute set {item.name.text!r}",
                                     f"'..{item.name.text}' must be bound by '..{item.name.text}' in the pattern")
                continue
            if item.name.text in seen:
                self.diags.error(item.name.span, f"attribute {item.name.text!r} is given twice")
            seen.add(item.name.text)
            if check_attr_name(self.diags, opdef, item.name.text, item.name.span):
                self.static(item.value)
        if not has_rest:
            for attr_name, spec in opdef.attrs.items():
                if spec.required and attr_name not in seen:
                    self.diags.error(e.span, f"op {opdef.name!r} needs attribute {attr_name!r}",
                                     f"write {opdef.name}(...) {{{attr_name}=...}}")
        if n_outputs == 1 and opdef.num_outputs > 1:
            self.diags.error(e.span, f"op {opdef.name!r} has {opdef.num_outputs} outputs",
                             f"bind them: a, b = {opdef.name}(...)")

    # ----- static position ------------------------------------------------------------
    def static(self, e) -> str:
        """Check ``e`` in a static position; its type (statictypes), ``any`` if unknown."""
        return self._typed(e)[0]

    def guard(self, e) -> None:
        """Check a guard: a static expression that must be true or false."""
        t = self.static(e)
        if not fits(t, BOOL):
            self.diags.error(getattr(e, "span", None), f"a guard must be true or false; this is {describe(t)}")

    def _typed(self, e) -> tuple[str, object]:
        """(type, value): the value when ``e`` is constant (evaluated here, within the
        limits of guards.py, so an oversized or failing constant is reported at lint
        time), else _UNKNOWN."""
        if _is_constant(e):
            try:
                value = evaluate(e, _CONSTANT_CONTEXT)
            except GuardError as exc:
                self.diags.error(exc.span or getattr(e, "span", None), exc.message)
                return ANY, _UNKNOWN
            return type_of_value(value), value
        return self._typed_open(e), _UNKNOWN

    def _typed_open(self, e) -> str:
        if isinstance(e, A.ListE):
            for item in e.items:
                self.static(item)
            return LIST
        if isinstance(e, A.Var):
            return self._static_var(e)
        if isinstance(e, A.Neg):
            t = self.static(e.operand)
            if not is_number(t):
                self.diags.error(e.span, f"unary '-' needs a number, not {describe(t)}")
                return ANY
            return t
        if isinstance(e, A.Not):
            self._operand_of(e.operand, "not")
            return BOOL
        if isinstance(e, A.BinOp):
            return self._static_binop(e)
        if isinstance(e, A.Compare):
            if self.symbols is not None and self._symbol_compare(e):
                return BOOL
            why = compare_error(e.op, self.static(e.left), self.static(e.right))
            if why:
                self.diags.error(e.span, why)
            return BOOL
        if isinstance(e, A.BoolOp):
            for item in e.items:
                self._operand_of(item, e.op)
            return BOOL
        if isinstance(e, A.Index):
            if not fits(self.static(e.base), LIST):
                self.diags.error(e.base.span if hasattr(e.base, "span") else e.span, "only a list can be indexed")
            if not fits(self.static(e.index), INT):
                self.diags.error(getattr(e.index, "span", e.span), "a list index must be an integer")
            return ANY
        if isinstance(e, A.Call):
            return self._static_call(e)
        self.diags.error(getattr(e, "span", None), "this form has no static value")
        return ANY

    def _static_var(self, e: A.Var) -> str:
        if e.name in self.statics:
            return self.static_types.get(e.name, ANY)
        if self._is_tensor_var(e.name):
            self.diags.error(e.span, f"tensor {e.name!r} is used as a static value",
                             f"use rank({e.name}), shape({e.name}), dim({e.name}, i) or value({e.name})")
            return ANY
        if self.symbols is not None and e.name in EXPECT_NAMES:
            return BOOL if e.name == "equivalent" else INT
        if self.class_context and e.name in PREDICATES and PREDICATES[e.name].subject_default:
            return BOOL
        self._unknown_var(e)
        return ANY

    def _operand_of(self, e, op: str) -> None:
        t = self.static(e)
        if not fits(t, BOOL):
            self.diags.error(getattr(e, "span", None), f"{op!r} needs true or false, not {describe(t)}")

    def _static_binop(self, e: A.BinOp) -> str:
        (a, _), (b, right) = self._typed(e.left), self._typed(e.right)
        if e.op in ("/", "//", "%") and right == 0 and not isinstance(right, bool):
            self.diags.error(e.span, f"division by zero: {e.op!r} by a literal 0",
                             "the guard or attribute could never be evaluated")
            return ANY
        result, why = binop_type(e.op, a, b)
        if why:
            self.diags.error(e.span, why)
        return result

    def _static_call(self, e: A.Call) -> str:
        name = e.func.text
        if e.attrs is not None and (name in META or name in PREDICATES):
            self.diags.error(e.span, f"{name}() takes no attributes")
        if name in PREDICATES:
            self._vocab_call(e, PREDICATES[name])
            return BOOL
        if name in META:
            self._vocab_call(e, META[name])
            return RETURNS[META[name].returns]
        if self.symbols is not None and name in EXPECT_FUNCTIONS:
            self._vocab_call(e, EXPECT_FUNCTIONS[name])
            return RETURNS[EXPECT_FUNCTIONS[name].returns]
        if name in self.registry:
            self.diags.error(e.func.span, f"op {name!r} cannot compute a static value",
                             "ops build tensors; static positions take numbers, lists, attribute variables "
                             "and functions such as rank(x)")
            return ANY
        self._unknown_function(e, ops=False)
        return ANY

    def _vocab_call(self, e: A.Call, sig: Signature) -> None:
        name = e.func.text
        if not sig.arity_ok(len(e.args)):
            self.diags.error(e.span, f"{name}() takes {sig.describe_arity()}, got {len(e.args)}")
            return
        if not e.args and sig.subject_default and not self.class_context:
            self.diags.error(e.span, f"{name}() needs an argument here",
                             "without arguments it applies to the node a class guard classifies")
        wanted = META_ARGUMENTS.get(name, ()) if name in META else ()
        for k, arg in enumerate(e.args):
            kind = sig.kind_of(k)
            if kind == "tensor":
                if isinstance(arg, A.Var) and self._is_tensor_var(arg.name):
                    continue
                if isinstance(arg, A.Var) and arg.name not in self.statics:
                    self._unknown_var(arg)
                else:
                    self.diags.error(getattr(arg, "span", e.span), f"{name}() expects a tensor variable here")
            elif kind == "name":
                self._symbol_arg(name, arg)
            else:
                t = self.static(arg)
                want = wanted[k] if k < len(wanted) else None
                if want is not None and not fits(t, want):
                    self.diags.error(getattr(arg, "span", e.span),
                                     f"{name}() expects {describe(want)} here, not {describe(t)}")
                elif name in ("min", "max") and len(e.args) > 1 and not is_number(t):
                    self.diags.error(getattr(arg, "span", e.span), f"{name}() compares numbers, not {describe(t)}")

    def _unknown_function(self, e: A.Call, *, ops: bool) -> None:
        names = list(META) + list(PREDICATES) + (self.registry.names() if ops else [])
        if self.symbols is not None:
            names += list(EXPECT_FUNCTIONS)
        hint = suggest(e.func.text, names)
        what = "op or function" if ops else "function"
        self.diags.error(e.func.span, f"unknown {what} {e.func.text!r}", hint)

    # ----- test expectations ----------------------------------------------------------
    def _symbol_arg(self, func: str, arg) -> None:
        if not isinstance(arg, A.Var):
            self.diags.error(getattr(arg, "span", None), f"{func}() expects a name")
            return
        kinds = {"fired": "rules", "count": "ops"}
        pool = self.symbols.get(kinds.get(func, "ops"), ())
        if arg.name not in pool:
            label = "rewrite" if func == "fired" else "op"
            self.diags.error(arg.span, f"unknown {label} {arg.name!r}", suggest(arg.name, pool))

    def _symbol_compare(self, e: A.Compare) -> bool:
        """``category(v) == elemwise`` / ``op(v) == conv``: the bare name is a symbol."""
        for call, other in ((e.left, e.right), (e.right, e.left)):
            if isinstance(call, A.Call) and call.func.text in ("category", "op") and isinstance(other, A.Var):
                self.static(call)
                pool = self.symbols.get("categories" if call.func.text == "category" else "ops", ())
                if other.name not in pool:
                    label = "category" if call.func.text == "category" else "op"
                    self.diags.error(other.span, f"unknown {label} {other.name!r}", suggest(other.name, pool))
                return True
        return False
