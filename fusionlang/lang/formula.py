"""`def NAME(x, y; attr=default) = FORMULA`: scalar formulas as sympy, and the elementwise
ops they define.

The sympy expression is built node by node from the syntax tree (never by sympify or
eval of text), and its symbols are the parameter and attribute names; the op's access
spec and its NumPy reference both come from that one expression, through the same
``elementwise`` factory the built-in ops use.
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from fusionlang.errors import ShapeError
from fusionlang.lang import ast as A
from fusionlang.ops.registry import Attr, OpDef, OpRegistry
from fusionlang.ops.common import elementwise
from fusionlang.ops.scalar import Sigmoid, evaluate

_UNARY = {
    "exp": sp.exp,
    "log": sp.log,
    "sqrt": sp.sqrt,
    "rsqrt": lambda x: 1 / sp.sqrt(x),
    "erf": sp.erf,
    "tanh": sp.tanh,
    "sigmoid": Sigmoid,
    "abs": sp.Abs,
    "sin": sp.sin,
    "cos": sp.cos,
    "floor": sp.floor,
    "ceil": sp.ceiling,
}
_RELATIONS = {
    "<": sp.StrictLessThan,
    "<=": sp.LessThan,
    ">": sp.StrictGreaterThan,
    ">=": sp.GreaterThan,
    "==": sp.Eq,
    "!=": sp.Ne,
}


class FormulaError(Exception):
    def __init__(self, span, message: str):
        super().__init__(message)
        self.span = span
        self.message = message


def symbol(name: str) -> sp.Symbol:
    # a prefix keeps user names apart from sympy's own (and from the v/i/r symbols of
    # access specs); the symbols never reach generated code, only their substitutes do.
    # Real: tensors hold real numbers, and without it sympy asks of every nested tanh
    # whether its argument's imaginary part is a multiple of pi, which took 12 s at depth 10
    return sp.Symbol(f"u_{name}", real=True)


def to_sympy(expr: A.Expr, names: set[str]) -> sp.Basic:
    """The sympy form of a formula over ``names`` (parameters and attributes)."""
    if isinstance(expr, A.Num):
        if isinstance(expr.value, bool):
            return sp.true if expr.value else sp.false
        return sp.Integer(expr.value) if isinstance(expr.value, int) else sp.Float(expr.value)
    if isinstance(expr, A.Var):
        if expr.name in names:
            return symbol(expr.name)
        if expr.name == "pi":
            return sp.pi
        raise FormulaError(expr.span, f"unknown name {expr.name!r} in formula")
    if isinstance(expr, A.Neg):
        return -_number(expr.operand, names)
    if isinstance(expr, A.BinOp):
        a, b = _number(expr.left, names), _number(expr.right, names)
        if expr.op == "+":
            return a + b
        if expr.op == "-":
            return a - b
        if expr.op == "*":
            return a * b
        if expr.op == "/":
            return a / b
        if expr.op == "**":
            return a ** b
        if expr.op == "//":
            return sp.floor(a / b)
        if expr.op == "%":
            return sp.Mod(a, b)
    if isinstance(expr, A.Compare):
        return _RELATIONS[expr.op](to_sympy(expr.left, names), to_sympy(expr.right, names))
    if isinstance(expr, A.BoolOp):
        parts = [to_sympy(e, names) for e in expr.items]
        return sp.And(*parts) if expr.op == "and" else sp.Or(*parts)
    if isinstance(expr, A.Not):
        return sp.Not(to_sympy(expr.operand, names))
    if isinstance(expr, A.Call) and expr.attrs is None:
        name, args = expr.func.text, [to_sympy(a, names) for a in expr.args]
        if name in _UNARY and len(args) == 1:
            return _UNARY[name](args[0])
        if name in ("min", "max") and len(args) == 2:
            return (sp.Min if name == "min" else sp.Max)(*args)
        if name == "pow" and len(args) == 2:
            return args[0] ** args[1]
        if name == "select" and len(args) == 3:
            return sp.Piecewise((args[1], args[0]), (args[2], True))
        raise FormulaError(expr.func.span, f"unknown formula function {name!r} with {len(args)} arguments")
    raise FormulaError(getattr(expr, "span", None), "this form is not allowed in a formula")


def _number(expr: A.Expr, names: set[str]) -> sp.Basic:
    """The sympy form of an operand of arithmetic, which must not be a boolean."""
    value = to_sympy(expr, names)
    if is_boolean(value):
        raise FormulaError(getattr(expr, "span", None), "a boolean is not a number in a formula; "
                                                        "write select(COND, 1, 0)")
    return value


def is_boolean(expr: sp.Basic) -> bool:
    return isinstance(expr, (sp.core.relational.Relational, sp.And, sp.Or, sp.Not)) or expr in (sp.true, sp.false)


def attr_of_default(value) -> Attr:
    """An attribute spec whose kind follows its default value."""
    if isinstance(value, bool):
        return Attr("int", int(value))
    if isinstance(value, int):
        return Attr("int", value)
    if isinstance(value, float):
        return Attr("float", value)
    if isinstance(value, str):
        return Attr("str", value)
    if isinstance(value, tuple):
        if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return Attr("ints", value)
        return Attr("floats", tuple(float(v) for v in value))
    raise ValueError(f"no attribute kind for {value!r}")


def define_elementwise(name: str, params: list[str], attrs: dict[str, Attr], body: sp.Basic,
                       registry: OpRegistry, doc: str) -> OpDef:
    """Register the elementwise op ``name`` computing ``body`` into ``registry``."""
    boolean = is_boolean(body)
    # a boolean formula yields 1/0 in loops and bool tensors, like the built-in comparisons
    value_body = sp.Piecewise((1, body), (0, True)) if boolean else body
    param_syms = [symbol(p) for p in params]

    def substitute(values, attr_values):
        mapping = {s: v for s, v in zip(param_syms, values)}
        for attr_name, attr_value in attr_values.items():
            if attr_name in attrs:
                mapping[symbol(attr_name)] = _sympy_number(attr_value)
        return value_body.xreplace(mapping)

    def numpy_fn(arrays, attr_values):
        env = {p.name: a for p, a in zip(param_syms, arrays)}
        for attr_name in attrs:
            env[symbol(attr_name).name] = attr_values[attr_name]
        result = evaluate(value_body, env, dtype=arrays[0].dtype if arrays[0].dtype.kind == "f" else np.float32)
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        return np.broadcast_to(np.asarray(result), shape).copy()

    return elementwise(
        name,
        lambda values, attr_values: substitute(values, attr_values),
        numpy_fn,
        inputs=tuple(params),
        attrs=dict(attrs),
        out_dtype="bool" if boolean else None,
        doc=doc,
        registry=registry,
    )


def _sympy_number(value):
    if isinstance(value, bool):
        return sp.Integer(int(value))
    if isinstance(value, int):
        return sp.Integer(value)
    if isinstance(value, float):
        return sp.Float(value)
    raise ShapeError(f"attribute value {value!r} cannot appear in a formula")
