"""Evaluating static expressions and guards against a graph.

Guards (`where ...` of a rewrite, `when ...` of a class) and attribute expressions
(``{axes=[axis % rank(x)]}``) are evaluated here, over bindings made by the matcher or
by a node being classified. Evaluation walks the syntax tree; nothing is ever eval'd.
Static values are Python ints, floats, strings, bools and tuples (lists become tuples).

:func:`explain_guard` returns why a guard fails, naming the first failing conjunct and
the facts behind it; ``why_not`` and test diagnostics print that text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from fusionlang.errors import BudgetError
from fusionlang.ir.graph import Graph, Node
from fusionlang.lang import ast as A
from fusionlang.lang.diagnostics import Span
from fusionlang.lang.limits import MAX_EVAL_STEPS, MAX_INT_BITS, MAX_LIST_ELEMENTS
from fusionlang.lang.printer import format_expr


class GuardError(Exception):
    """A static expression cannot be evaluated here (bad index, non-constant value...)."""

    def __init__(self, message: str, span: Span | None = None):
        super().__init__(message)
        self.message = message
        self.span = span


@dataclass
class Bindings:
    #: variable -> value name in the graph
    tensors: dict[str, str] = field(default_factory=dict)
    #: variable -> static value (attribute values, let-bound statics)
    statics: dict[str, object] = field(default_factory=dict)
    #: `..rest` variable -> the attributes it carries
    rests: dict[str, dict] = field(default_factory=dict)

    def copy(self) -> "Bindings":
        return Bindings(dict(self.tensors), dict(self.statics), {k: dict(v) for k, v in self.rests.items()})


class StepBudget:
    """Steps that many evaluations share (every guard of a fuse table on one graph).
    Passing it is a BudgetError, never a guard that merely fails: a decision must not
    change because the work ran out."""

    def __init__(self, steps: int, what: str):
        self.total = self.left = steps
        #: what the steps are spent on, for the error ("the guards of rule set 'x' on graph 'g'")
        self.what = what

    def spend(self, steps: int) -> None:
        self.left -= steps
        if self.left < 0:
            raise BudgetError(f"{self.what} took more than {self.total} evaluation steps together; "
                              "simplify the guards or fuse a smaller graph")


class Context:
    """A graph, bindings over it, and lazily built use-def maps."""

    def __init__(self, graph: Graph, bindings: Bindings, *, subject: Node | None = None,
                 consumers: Mapping[str, Sequence[Node]] | None = None, producers: Mapping[str, Node] | None = None,
                 budget: StepBudget | None = None):
        self.graph = graph
        self.bindings = bindings
        self.subject = subject
        self._consumers = consumers
        self._producers = producers
        #: steps the current evaluation may still take (reset by each outermost evaluate)
        self.steps_left = MAX_EVAL_STEPS
        self._evaluating = 0
        #: the steps this evaluation shares with others, if any
        self.budget = budget

    @property
    def consumers(self) -> Mapping[str, Sequence[Node]]:
        if self._consumers is None:
            self._consumers = self.graph.index.consumers
        return self._consumers

    @property
    def producers(self) -> Mapping[str, Node]:
        if self._producers is None:
            self._producers = self.graph.index.producers
        return self._producers

    def tensor(self, expr) -> str:
        """The value name a tensor argument refers to."""
        return self.tensor_var(expr)[1]

    def tensor_var(self, expr) -> tuple[A.Var, str]:
        """A tensor argument as the variable it is, and the value name it refers to."""
        if isinstance(expr, A.Var) and expr.name in self.bindings.tensors:
            return expr, self.bindings.tensors[expr.name]
        raise GuardError(f"expected a tensor variable, got {_text(expr)}", getattr(expr, "span", None))


#: predicates that, written bare in a class guard, apply to the node being classified
SUBJECT_PREDICATES = ("broadcasting",)


def as_call(var: A.Var) -> A.Call:
    """``broadcasting`` written bare: the call ``broadcasting()``."""
    return A.Call(A.Name(var.name, var.span), (), None, var.span)


def normalize(value):
    """Canonical static value: lists and arrays become tuples, numpy scalars Python ones."""
    if isinstance(value, (list, tuple)):
        return tuple(normalize(v) for v in value)
    if isinstance(value, np.ndarray):
        return normalize(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    return value


def _text(expr) -> str:

    return format_expr(expr)


# ----- evaluation ---------------------------------------------------------------------


def evaluate(expr, ctx: Context):
    """The static value of ``expr``; raises GuardError when it has none here, or when
    computing it would pass a limit of lang/limits.py (integer bits, list elements,
    steps): a rule file cannot make evaluation hang or exhaust memory."""
    if ctx._evaluating == 0:
        ctx.steps_left = MAX_EVAL_STEPS
    ctx._evaluating += 1
    try:
        value = _evaluate(expr, ctx)
    except (TypeError, ValueError, OverflowError, ZeroDivisionError, IndexError, KeyError) as exc:
        # values of unexpected kinds (a product of strings, ...): the expression has no value
        raise GuardError(f"cannot evaluate {_text(expr)}: {exc}", getattr(expr, "span", None)) from None
    finally:
        ctx._evaluating -= 1
    steps = 1 + (len(value) if isinstance(value, tuple) else 0)
    ctx.steps_left -= steps
    if ctx.budget is not None:
        ctx.budget.spend(steps)
    if ctx.steps_left < 0:
        raise GuardError(f"evaluation takes more than {MAX_EVAL_STEPS} steps", getattr(expr, "span", None))
    return value


def bounded(value, expr):
    """``value`` if it is within the limits on static values; else a GuardError at ``expr``."""
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise GuardError(f"{_text(expr)} is too large: integers have at most {MAX_INT_BITS} bits",
                         getattr(expr, "span", None))
    if isinstance(value, tuple):
        _check_elements(leaf_count(value), expr)
    return value


def leaf_count(value, cap: int = MAX_LIST_ELEMENTS) -> int:
    """Elements of ``value``, nested lists counted by their leaves; stops past ``cap``
    (a list repeated by reference can hold far more leaves than objects)."""
    count, stack = 0, [value]
    while stack and count <= cap:
        item = stack.pop()
        if isinstance(item, tuple):
            stack.extend(item)
        else:
            count += 1
    return count


def _check_elements(count: int, expr) -> None:
    if count > MAX_LIST_ELEMENTS:
        raise GuardError(f"{_text(expr)} is too long: lists have at most {MAX_LIST_ELEMENTS} elements",
                         getattr(expr, "span", None))


def _evaluate(expr, ctx: Context):
    if isinstance(expr, A.Num):
        return expr.value
    if isinstance(expr, A.Str):
        return expr.value
    if isinstance(expr, A.ListE):
        return bounded(tuple(evaluate(e, ctx) for e in expr.items), expr)
    if isinstance(expr, A.Var):
        if expr.name in ctx.bindings.statics:
            return ctx.bindings.statics[expr.name]
        if ctx.subject is not None and expr.name in SUBJECT_PREDICATES:
            return predicate_failure(as_call(expr), ctx) is None
        if expr.name in ctx.bindings.tensors:
            raise GuardError(f"tensor {expr.name!r} has no static value; use shape({expr.name}) or "
                             f"value({expr.name})", expr.span)
        raise GuardError(f"unknown name {expr.name!r}", expr.span)
    if isinstance(expr, A.Neg):
        value = evaluate(expr.operand, ctx)
        _require_number(value, expr)
        return -value
    if isinstance(expr, A.BinOp):
        return apply_binop(expr, evaluate(expr.left, ctx), evaluate(expr.right, ctx))
    if isinstance(expr, A.Compare):
        return apply_compare(expr, evaluate(expr.left, ctx), evaluate(expr.right, ctx))
    if isinstance(expr, A.BoolOp):
        if expr.op == "and":
            return all(_truth(evaluate(e, ctx), e) for e in expr.items)
        return any(_truth(evaluate(e, ctx), e) for e in expr.items)
    if isinstance(expr, A.Not):
        return not _truth(evaluate(expr.operand, ctx), expr.operand)
    if isinstance(expr, A.Index):
        base, index = evaluate(expr.base, ctx), evaluate(expr.index, ctx)
        if not isinstance(base, tuple) or not isinstance(index, int) or isinstance(index, bool):
            raise GuardError(f"cannot index {base!r} with {index!r}", expr.span)
        if not -len(base) <= index < len(base):
            raise GuardError(f"index {index} is out of range for {list(base)}", expr.span)
        return base[index]
    if isinstance(expr, A.Call):
        return _call(expr, ctx)
    raise GuardError(f"{_text(expr)} has no static value", getattr(expr, "span", None))


def _require_number(value, expr):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GuardError(f"{_text(expr)} is {_show(value)}, not a number", expr.span)


def _truth(value, expr) -> bool:
    if not isinstance(value, bool):
        raise GuardError(f"{_text(expr)} is {_show(value)}, not true or false", getattr(expr, "span", None))
    return value


def apply_binop(expr: A.BinOp, a, b):
    """``a op b`` within the limits on static values (checked before a list or a power
    is built, so an oversized one never takes memory or time)."""
    op = expr.op
    if isinstance(a, tuple) or isinstance(b, tuple):
        if op == "+" and isinstance(a, tuple) and isinstance(b, tuple):
            _check_elements(leaf_count(a) + leaf_count(b), expr)
            return a + b
        if op == "*" and isinstance(a, tuple) and isinstance(b, int) and not isinstance(b, bool):
            if b > 0:
                _check_elements(leaf_count(a) * b, expr)
            return a * max(b, 0)
        raise GuardError(f"cannot apply {op!r} to {_show_short(a)} and {_show_short(b)}", expr.span)
    _require_number(a, expr.left)
    _require_number(b, expr.right)
    if op == "**":
        _check_power(expr, a, b)
    return bounded(_arithmetic(expr, a, b), expr)


def _check_power(expr: A.BinOp, a, b) -> None:
    """Refuse an integer power whose result would pass MAX_INT_BITS, before computing it."""
    if isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1 and \
            (b > MAX_INT_BITS or (abs(a).bit_length() - 1) * b > MAX_INT_BITS):
        raise GuardError(f"{_text(expr)} is too large: integers have at most {MAX_INT_BITS} bits", expr.span)


def _show_short(value) -> str:
    text = _show(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _arithmetic(expr: A.BinOp, a, b):
    op = expr.op
    try:
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            return a / b
        if op == "//":
            return a // b
        if op == "%":
            return a % b
        if op == "**":
            result = a ** b
            if isinstance(result, complex):
                raise GuardError(f"{a!r} ** {b!r} is not real", expr.span)
            return result
    except ZeroDivisionError:
        raise GuardError(f"division by zero in {_text(expr)}", expr.span) from None
    except OverflowError:
        raise GuardError(f"{_text(expr)} overflows", expr.span) from None
    raise GuardError(f"unknown operator {op!r}", expr.span)


def apply_compare(expr: A.Compare, a, b) -> bool:
    """``a op b`` for a comparison; ordering needs numbers (or two strings or lists)."""
    op = expr.op
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    if isinstance(a, (str, tuple)) and type(a) is type(b):
        pass
    else:
        _require_number(a, expr.left)
        _require_number(b, expr.right)
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _int_arg(value, expr) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise GuardError(f"{_text(expr)} is {_show(value)}, not an integer", expr.span)
    return value


def _list_arg(value, expr) -> tuple:
    if not isinstance(value, tuple):
        raise GuardError(f"{_text(expr)} is {_show(value)}, not a list", expr.span)
    return value


def _call(expr: A.Call, ctx: Context):
    name = expr.func.text
    args = expr.args
    graph = ctx.graph
    if name in ("const", "one_use", "reduced_only", "broadcasting", "same_shape", "is_scalar", "is_float",
                "all_equal"):
        return predicate_failure(expr, ctx) is None
    if name in ("rank", "shape", "dim", "size", "dtype", "value"):
        var, value_name = ctx.tensor_var(args[0])
        ttype = graph.types[value_name]
        if name == "rank":
            return ttype.rank
        if name == "shape":
            return tuple(ttype.shape)
        if name == "size":
            return ttype.size
        if name == "dtype":
            return ttype.dtype
        if name == "dim":
            k = _int_arg(evaluate(args[1], ctx), args[1])
            if not -ttype.rank <= k < ttype.rank:
                raise GuardError(f"dim({var.name}, {k}): {var.name!r} has rank {ttype.rank}", expr.span)
            return ttype.shape[k]
        # value
        if value_name not in graph.constants:
            raise GuardError(f"value({var.name}): {var.name!r} is not a constant", expr.span)
        array = graph.constants[value_name]
        if array.size != 1:
            raise GuardError(f"value({var.name}): {var.name!r} has {array.size} elements, not 1", expr.span)
        return normalize(array.reshape(()).item())
    values = [evaluate(a, ctx) for a in args]
    if name == "len":
        return len(_list_arg(values[0], args[0]))
    if name == "range":
        lo, hi = (_int_arg(values[0], args[0]), _int_arg(values[1], args[1]))
        _check_elements(hi - lo, expr)
        return tuple(range(lo, hi))
    if name == "reversed":
        return tuple(reversed(_list_arg(values[0], args[0])))
    if name == "compose":
        p, q = _list_arg(values[0], args[0]), _list_arg(values[1], args[1])
        try:
            return tuple(p[k] for k in q)
        except (IndexError, TypeError):
            raise GuardError(f"cannot compose permutations {list(p)} and {list(q)}", expr.span) from None
    if name == "perm":
        p, rank = _list_arg(values[0], args[0]), _int_arg(values[1], args[1])
        return p if p else tuple(reversed(range(rank)))
    if name == "prod":
        product = 1
        for item in _list_arg(values[0], args[0]):
            _require_number(item, args[0])
            product = bounded(product * item, expr)
        return product
    if name in ("min", "max"):
        items = values[0] if len(values) == 1 and isinstance(values[0], tuple) else tuple(values)
        if not items:
            raise GuardError(f"{name}() of nothing", expr.span)
        for v, a in zip(items, args if len(args) == len(items) else args * len(items)):
            _require_number(v, a)
        return min(items) if name == "min" else max(items)
    if name == "abs":
        _require_number(values[0], args[0])
        return abs(values[0])
    raise GuardError(f"unknown function {name!r}", expr.func.span)


# ----- predicates ---------------------------------------------------------------------


def _subject_or(expr: A.Call, ctx: Context) -> list[tuple[str, Node | None]]:
    """(label, node) pairs a node predicate applies to."""
    if not expr.args:
        if ctx.subject is None:
            raise GuardError(f"{expr.func.text}() needs an argument here", expr.span)
        return [("the node", ctx.subject)]
    out = []
    for a in expr.args:
        var, value = ctx.tensor_var(a)
        out.append((f"{var.name!r}", ctx.producers.get(value)))
    return out


def broadcasts(graph: Graph, node: Node) -> bool:
    """True when ``node`` reads an input whose shape differs from its first output's."""
    out_shape = graph.types[node.outputs[0]].shape
    return any(graph.types[v].shape != out_shape for v in node.present_inputs())


def predicate_failure(expr: A.Call, ctx: Context) -> str | None:
    """None if the predicate holds; else the reason it does not, in words."""
    name = expr.func.text
    graph = ctx.graph
    if name == "broadcasting":
        for label, node in _subject_or(expr, ctx):
            if node is None:
                return f"{label} is not computed by a node"
            if not broadcasts(graph, node):
                return f"node {node.name!r} ({node.op}) reads no input of a different shape"
        return None
    values = [ctx.tensor_var(a) for a in (expr.args[:1] if name == "all_equal" else expr.args)]
    if name == "const":
        for a, v in values:
            if v not in graph.constants:
                return f"{a.name!r} {_origin(ctx, v)}"
        return None
    if name == "one_use":
        for a, v in values:
            users = ctx.consumers.get(v, [])
            if v in graph.outputs:
                return f"{a.name!r} is a graph output"
            if len(users) != 1:
                names = ", ".join(repr(u.name) for u in users[:4]) + (", ..." if len(users) > 4 else "")
                return f"{a.name!r} has {len(users)} users" + (f": {names}" if users else "")
        return None
    if name == "reduced_only":
        return _reduced_only_failure(ctx, values)
    if name == "same_shape":
        shapes = [(a, graph.types[v].shape) for a, v in values]
        for a, s in shapes[1:]:
            if s != shapes[0][1]:
                return (f"{shapes[0][0].name!r} has shape {list(shapes[0][1])} but {a.name!r} has shape {list(s)}")
        return None
    if name == "is_scalar":
        a, v = values[0]
        size = graph.types[v].size
        return None if size == 1 else f"{a.name!r} has {size} elements"
    if name == "is_float":
        a, v = values[0]
        dtype = graph.types[v].dtype
        return None if graph.types[v].is_float else f"{a.name!r} has dtype {dtype}"
    if name == "all_equal":
        a, v = values[0]
        target = evaluate(expr.args[1], ctx)
        if v not in graph.constants:
            return f"{a.name!r} {_origin(ctx, v)}"
        array = graph.constants[v]
        if array.size == 0 or not np.all(array == target):
            sample = normalize(array.ravel()[:4])
            return f"{a.name!r} is a constant with elements {list(sample)}{'...' if array.size > 4 else ''}"
        return None
    raise GuardError(f"unknown predicate {name!r}", expr.func.span)


def _reduced_only_failure(ctx: Context, values) -> str | None:
    """Why some value is not read by reductions only (None: each is)."""
    for a, v in values:
        if v in ctx.graph.outputs:
            return f"{a.name!r} is a graph output"
        users = ctx.consumers.get(v, [])
        others = [u for u in users if not u.op.startswith("reduce_")]
        if not users or others:
            return f"{a.name!r} is read by {', '.join(repr(u.name) + f' ({u.op})' for u in others[:4]) or 'no node'}"
    return None


def _origin(ctx: Context, value: str) -> str:
    if value in ctx.graph.inputs:
        return "is a graph input"
    producer = ctx.producers.get(value)
    if producer is not None:
        return f"is computed by node {producer.name!r} ({producer.op})"
    return "is not a constant"


def explain_guard(expr, ctx: Context) -> tuple[Span, str] | None:
    """None if the guard holds; else (span, reason) of its first failing conjunct."""
    conjuncts = expr.items if isinstance(expr, A.BoolOp) and expr.op == "and" else (expr,)
    for part in conjuncts:
        if isinstance(part, A.Var) and ctx.subject is not None and part.name in SUBJECT_PREDICATES \
                and part.name not in ctx.bindings.statics:
            part = as_call(part)
        try:
            if isinstance(part, A.Call) and part.func.text in ("const", "one_use", "reduced_only", "broadcasting",
                                                                 "same_shape", "is_scalar", "is_float", "all_equal"):
                reason = predicate_failure(part, ctx)
                if reason is not None:
                    return part.span, f"guard {_text(part)} failed: {reason}"
                continue
            value = evaluate(part, ctx)
        except GuardError as exc:
            return part.span, f"guard {_text(part)} failed: {exc.message}"
        if value is not True:
            return part.span, f"guard {_text(part)} failed: {_why_false(part, ctx)}"
    return None


def _why_false(part, ctx: Context) -> str:
    if isinstance(part, A.Compare):
        try:
            left, right = evaluate(part.left, ctx), evaluate(part.right, ctx)
        except GuardError as exc:
            return exc.message
        facts = []
        if not isinstance(part.left, (A.Num, A.Str)):
            facts.append(f"{_text(part.left)} is {_show(left)}")
        if not isinstance(part.right, (A.Num, A.Str)):
            facts.append(f"{_text(part.right)} is {_show(right)}")
        return ", ".join(facts) if facts else "it is false"
    if isinstance(part, A.Not):
        return f"{_text(part.operand)} holds"
    return "it is false"


def _show(value) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    return repr(value)


def guard_holds(expr, ctx: Context) -> bool:
    """Whether the guard holds; evaluation errors count as failure."""
    try:
        return evaluate(expr, ctx) is True
    except GuardError:
        return False
