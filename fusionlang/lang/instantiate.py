"""Instantiation: build the nodes an expression or a body describes into a graph.

Replacements of rewrites, bodies of decompositions and compound defs, and the graphs of
test blocks all go through :class:`Instantiator`. In an operand position a name that is
an op builds that op, infix arithmetic builds add/sub/mul/div/pow, comparisons build
equal/less/..., and anything static (numbers, attribute variables, ``size(x)``...) stays
a :class:`Scalar` until an op needs it as a tensor, when it becomes a constant of the
op's dtype. Types come from the registry's inference as nodes are created.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fusionlang.errors import FuseError
from fusionlang.ir.graph import Graph, Node
from fusionlang.lang import ast as A
from fusionlang.lang.diagnostics import Span
from fusionlang.lang.guards import Bindings, Context, GuardError, apply_binop, apply_compare, evaluate, normalize
from fusionlang.lang.vocab import META, PREDICATES
from fusionlang.ops.registry import OpRegistry

_INFIX_OPS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "**": "pow"}
_COMPARE_OPS = {"==": "equal", "<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal"}
#: names that are both ops and meta functions: with only static arguments, the function
_STATIC_WHEN_STATIC = ("min", "max", "abs")
#: meta functions whose names are also ops (``shape``): in rule files, the function
_META_NAMES = ("shape",)


def is_static_expr(e, is_tensor, registry) -> bool:
    """True when ``e`` computes a static value rather than a tensor: no tensor variable
    outside the arguments of a meta function, and no op. Names that are both an op and a
    meta function (``shape``, and ``min``/``max``/``abs`` with static arguments) are the
    meta function."""
    if isinstance(e, A.Var):
        return not is_tensor(e.name)
    if isinstance(e, (A.Num, A.Str)):
        return True
    if isinstance(e, A.ListE):
        return all(is_static_expr(i, is_tensor, registry) for i in e.items)
    if isinstance(e, A.Call):
        name = e.func.text
        if name in _STATIC_WHEN_STATIC:
            return all(is_static_expr(a, is_tensor, registry) for a in e.args)
        if name in META or name in PREDICATES:
            return True
        return name not in registry
    if isinstance(e, (A.Neg, A.Not)):
        return is_static_expr(e.operand, is_tensor, registry)
    if isinstance(e, (A.BinOp, A.Compare)):
        return is_static_expr(e.left, is_tensor, registry) and is_static_expr(e.right, is_tensor, registry)
    if isinstance(e, A.BoolOp):
        return all(is_static_expr(i, is_tensor, registry) for i in e.items)
    if isinstance(e, A.Index):
        return True
    return False


class InstantiateError(Exception):
    def __init__(self, span: Span | None, message: str):
        super().__init__(message)
        self.span = span
        self.message = message


@dataclass(frozen=True)
class Scalar:
    """A static value in an operand position, not yet turned into a constant."""

    value: object


class Instantiator:
    def __init__(self, graph: Graph, registry: OpRegistry, bindings: Bindings, *,
                 provenance: tuple[str, ...] = (), stem: str = "", namer=None,
                 widen: dict[str, str] | None = None):
        self.graph = graph
        self.registry = registry
        self.bindings = bindings
        self.provenance = provenance
        self.stem = stem
        #: makes unused names; the rewriter passes an O(1) one (Graph.fresh_name scans)
        self.fresh_name = namer or graph.fresh_name
        self.created: list[Node] = []
        #: constants this instantiation added
        self.new_constants: set[str] = set()
        self.ctx = Context(graph, bindings)
        #: dtype -> the dtype the body computes in instead: a bound tensor of that dtype is
        #: cast once, where the body first reads it (16-bit floats -> float32, so a composite
        #: op rounds once, at the end, not at each of its steps)
        self.widen = widen or {}
        #: bound value -> its widened copy, made so far
        self._widened: dict[str, str] = {}

    # ----- public ---------------------------------------------------------------------
    def body(self, stmts) -> list[str | Scalar]:
        """Run let statements; return the values of the `return` statement."""
        for stmt in stmts:
            if isinstance(stmt, A.Return):
                return [self.value(e) for e in stmt.values]
            self.let(stmt)
        raise InstantiateError(None, "body has no return statement")

    def let(self, stmt: A.Let) -> None:
        names = [n.text for n in stmt.names]
        if len(names) == 1:
            if is_static_expr(stmt.value, self.bindings.tensors.__contains__, self.registry):
                self._bind(names[0], Scalar(self.static(stmt.value)))
            else:
                self._bind(names[0], self.value(stmt.value, hint=names[0]))
            return
        if not isinstance(stmt.value, A.Call) or stmt.value.func.text not in self.registry:
            raise InstantiateError(stmt.span, f"{len(names)} names need an op with {len(names)} outputs")
        outputs = self._op(stmt.value, hint="_".join(names), n_outputs=len(names))
        for name, out in zip(names, outputs):
            self._bind(name, out)

    def static(self, expr):
        try:
            return normalize(evaluate(expr, self.ctx))
        except GuardError as exc:
            raise InstantiateError(exc.span or getattr(expr, "span", None), exc.message) from None

    def tensor(self, expr, dtype: str = "float32", hint: str | None = None) -> str:
        """The value name of ``expr``, making a constant of it when it is static."""
        return self.materialize(self.value(expr, hint), dtype)

    def cast(self, value: str, dtype: str) -> str:
        """``value`` as ``dtype``: itself when it has that dtype, else a new cast node."""
        if self.graph.types[value].dtype == dtype:
            return value
        return self._node("cast", [value], {"to": dtype}, f"{value}_{dtype}", None)[0]

    def _bound(self, value: str) -> str:
        target = self.widen.get(self.graph.types[value].dtype)
        if target is None:
            return value
        if value not in self._widened:
            self._widened[value] = self.cast(value, target)
        return self._widened[value]

    def materialize(self, value, dtype: str, shape: tuple[int, ...] | None = None) -> str:
        if not isinstance(value, Scalar):
            return value
        array = _array_of(value.value, dtype)
        if shape is not None:
            array = np.broadcast_to(array, shape).copy()
        name = self.graph.add_constant(self.fresh_name(f"{self.stem}c" if self.stem else "c"), array)
        self.new_constants.add(name)
        return name

    # ----- expressions ----------------------------------------------------------------
    def value(self, expr, hint: str | None = None) -> str | Scalar:
        if isinstance(expr, (A.Num, A.Str)):
            return Scalar(expr.value)
        if isinstance(expr, A.ListE):
            return Scalar(self.static(expr))
        if isinstance(expr, A.Var):
            if expr.name in self.bindings.tensors:
                return self._bound(self.bindings.tensors[expr.name])
            if expr.name in self.bindings.statics:
                return Scalar(self.bindings.statics[expr.name])
            raise InstantiateError(expr.span, f"unknown name {expr.name!r}")
        if isinstance(expr, A.Neg):
            operand = self.value(expr.operand)
            if isinstance(operand, Scalar):
                return Scalar(self.static(expr))
            return self._node("neg", [operand], {}, hint, expr.span)[0]
        if isinstance(expr, A.BinOp):
            left, right = self.value(expr.left), self.value(expr.right)
            if isinstance(left, Scalar) and isinstance(right, Scalar):
                return Scalar(self._static_binop(expr, left.value, right.value))
            if expr.op not in _INFIX_OPS:
                raise InstantiateError(expr.span, f"operator {expr.op!r} has no tensor op")
            return self._node(_INFIX_OPS[expr.op], [left, right], {}, hint, expr.span)[0]
        if isinstance(expr, A.Compare):
            left, right = self.value(expr.left), self.value(expr.right)
            if isinstance(left, Scalar) and isinstance(right, Scalar):
                return Scalar(self._static_compare(expr, left.value, right.value))
            if expr.op == "!=":
                eq = self._node("equal", [left, right], {}, None, expr.span)[0]
                return self._node("not", [eq], {}, hint, expr.span)[0]
            return self._node(_COMPARE_OPS[expr.op], [left, right], {}, hint, expr.span)[0]
        if isinstance(expr, A.BoolOp):
            values = [self.value(e) for e in expr.items]
            if all(isinstance(v, Scalar) for v in values):
                return Scalar(self.static(expr))
            out = values[0]
            for k, v in enumerate(values[1:]):
                out = self._node(expr.op, [out, v], {}, hint if k == len(values) - 2 else None, expr.span)[0]
            return out
        if isinstance(expr, A.Not):
            operand = self.value(expr.operand)
            if isinstance(operand, Scalar):
                return Scalar(self.static(expr))
            return self._node("not", [operand], {}, hint, expr.span)[0]
        if isinstance(expr, A.Index):
            return Scalar(self.static(expr))
        if isinstance(expr, A.Call):
            name = expr.func.text
            if name not in self.registry or (name not in _STATIC_WHEN_STATIC and name in _META_NAMES):
                return Scalar(self.static(expr))
            operands = [self.value(a) for a in expr.args]
            if name in _STATIC_WHEN_STATIC and all(isinstance(v, Scalar) for v in operands):
                return Scalar(self.static(expr))
            return self._op(expr, hint, 1, operands)[0]
        raise InstantiateError(getattr(expr, "span", None), "this form cannot build a value")

    def _static_binop(self, expr, a, b):
        try:
            return apply_binop(expr, a, b)
        except GuardError as exc:
            raise InstantiateError(expr.span, exc.message) from None

    def _static_compare(self, expr, a, b):
        try:
            return apply_compare(expr, a, b)
        except GuardError as exc:
            raise InstantiateError(expr.span, exc.message) from None

    def _op(self, call: A.Call, hint: str | None, n_outputs: int, operands=None) -> list[str]:
        if operands is None:
            operands = [self.value(a) for a in call.args]
        attrs: dict[str, object] = {}
        explicit: dict[str, object] = {}
        for item in call.attrs or ():
            if isinstance(item, A.AttrRest):
                rest = self.bindings.rests.get(item.name.text)
                if rest is None:
                    raise InstantiateError(item.span, f"unknown attribute set {item.name.text!r}")
                attrs.update(rest)
            else:
                explicit[item.name.text] = self.static(item.value)
        attrs.update(explicit)
        return self._node(call.func.text, operands, attrs, hint, call.span, n_outputs)

    def _node(self, op: str, operands, attrs: dict, hint: str | None, span, n_outputs: int = 1) -> list[str]:
        dtype = _context_dtype(self.graph, operands)
        inputs = [self.materialize(v, dtype) for v in operands]
        stem = f"{self.stem}{hint or op}"
        name = self.fresh_name(stem)
        in_types = [self.graph.types[v] for v in inputs]
        in_values = [self.graph.constants.get(v) for v in inputs]
        try:
            types = self.registry.infer(op, name, attrs, in_types, in_values)
            opdef = self.registry.get(op)
            normalized = opdef.normalize_attrs(attrs, f"node {name!r}")
        except FuseError as exc:
            raise InstantiateError(span, str(exc)) from None
        if len(types) < n_outputs:
            raise InstantiateError(span, f"op {op!r} makes {len(types)} outputs here, not {n_outputs}")
        if n_outputs == 1 and opdef.num_outputs > 1:
            raise InstantiateError(span, f"op {op!r} has {opdef.num_outputs} outputs; bind them with "
                                         f"'a, b = {op}(...)'")
        types = types[:n_outputs]
        outputs = [name] if n_outputs == 1 else [self.fresh_name(f"{name}_out") for _ in range(n_outputs)]
        node = Node(name, op, inputs, outputs, normalized, self.provenance)
        self.graph.add_node(node, types)
        self.created.append(node)
        return outputs

    def _bind(self, name: str, value) -> None:
        if isinstance(value, Scalar):
            self.bindings.statics[name] = value.value
            self.bindings.tensors.pop(name, None)
        else:
            self.bindings.tensors[name] = value
            self.bindings.statics.pop(name, None)


def _context_dtype(graph: Graph, operands) -> str:
    """The dtype static operands take: the first non-bool tensor operand's, else float32."""
    tensors = [graph.types[v].dtype for v in operands if not isinstance(v, Scalar)]
    for dtype in tensors:
        if dtype != "bool":
            return dtype
    return tensors[0] if tensors else "float32"


def _array_of(value, dtype: str) -> np.ndarray:
    if isinstance(value, str):
        raise InstantiateError(None, f"string {value!r} cannot be a tensor")
    if isinstance(value, bool):
        return np.array(value, dtype="bool")
    array = np.asarray(value, dtype=np.float64 if np.dtype(dtype).kind == "f" else None)
    if np.dtype(dtype).kind in "iu" and array.dtype.kind == "f" and not np.all(np.mod(array, 1) == 0):
        raise InstantiateError(None, f"value {value!r} is not an integer, but the operand is {dtype}")
    return array.astype(dtype)
