"""Elementwise ops: one output element from the same-index elements of broadcast inputs."""

from __future__ import annotations

import numpy as np
import sympy as sp

from fusionlang.ops.common import elementwise, fold_left
from fusionlang.ops.registry import Attr, OpDef, register
from fusionlang.ops.scalar import Sigmoid, np_erf, np_sigmoid
from fusionlang.ir.types import TensorType

# ----- unary -----------------------------------------------------------------------
_UNARY = {
    # name: (sympy formula of x, numpy function)
    "neg": (lambda x: -x, np.negative),
    "abs": (sp.Abs, np.abs),
    "exp": (sp.exp, np.exp),
    "log": (sp.log, np.log),
    "sqrt": (sp.sqrt, np.sqrt),
    "rsqrt": (lambda x: 1 / sp.sqrt(x), lambda x: 1 / np.sqrt(x)),
    "reciprocal": (lambda x: 1 / x, np.reciprocal),
    "erf": (sp.erf, np_erf),
    "tanh": (sp.tanh, np.tanh),
    "sigmoid": (Sigmoid, np_sigmoid),
    "relu": (lambda x: sp.Max(x, 0), lambda x: np.maximum(x, x.dtype.type(0))),
    "softplus": (lambda x: sp.log(1 + sp.exp(x)), lambda x: np.logaddexp(x, x.dtype.type(0))),
    "softsign": (lambda x: x / (1 + sp.Abs(x)), lambda x: x / (1 + np.abs(x))),
    "floor": (sp.floor, np.floor),
    "ceil": (sp.ceiling, np.ceil),
    "sin": (sp.sin, np.sin),
    "cos": (sp.cos, np.cos),
    "sign": (sp.sign, np.sign),
    "silu": (lambda x: x * Sigmoid(x), lambda x: x * np_sigmoid(x)),
}

for _name, (_formula, _fn) in _UNARY.items():
    elementwise(
        _name,
        lambda v, a, f=_formula: f(v[0]),
        lambda xs, a, f=_fn: f(xs[0]),
        float_only=_name not in ("neg", "abs", "sign"),
    )

elementwise(
    "identity",
    lambda v, a: v[0],
    lambda xs, a: xs[0].copy(),
    doc="Returns its input; a view (costs nothing) and removed by simplify.fuse.",
).view = True

elementwise(
    "dropout",
    lambda v, a: v[0],
    lambda xs, a: xs[0].copy(),
    attrs={"ratio": Attr("float", 0.5)},
    doc="Inference-mode dropout: the identity.",
).view = True

elementwise(
    "leaky_relu",
    lambda v, a: sp.Piecewise((v[0], v[0] >= 0), (a["alpha"] * v[0], True)),
    lambda xs, a: np.where(xs[0] >= 0, xs[0], xs[0] * xs[0].dtype.type(a["alpha"])),
    attrs={"alpha": Attr("float", 0.01)},
    float_only=True,
)
elementwise(
    "elu",
    lambda v, a: sp.Piecewise((v[0], v[0] >= 0), (a["alpha"] * (sp.exp(v[0]) - 1), True)),
    lambda xs, a: np.where(xs[0] >= 0, xs[0], xs[0].dtype.type(a["alpha"]) * np.expm1(np.minimum(xs[0], 0))),
    attrs={"alpha": Attr("float", 1.0)},
    float_only=True,
)
_SELU_ALPHA = 1.67326319217681884765625
_SELU_GAMMA = 1.05070102214813232421875
elementwise(
    "selu",
    lambda v, a: a["gamma"] * sp.Piecewise((v[0], v[0] > 0), (a["alpha"] * (sp.exp(v[0]) - 1), True)),
    lambda xs, a: xs[0].dtype.type(a["gamma"])
    * np.where(xs[0] > 0, xs[0], xs[0].dtype.type(a["alpha"]) * np.expm1(np.minimum(xs[0], 0))),
    attrs={"alpha": Attr("float", _SELU_ALPHA), "gamma": Attr("float", _SELU_GAMMA)},
    float_only=True,
)
elementwise(
    "hard_sigmoid",
    lambda v, a: sp.Max(0, sp.Min(1, a["alpha"] * v[0] + a["beta"])),
    lambda xs, a: np.clip(xs[0] * xs[0].dtype.type(a["alpha"]) + xs[0].dtype.type(a["beta"]), 0, 1),
    attrs={"alpha": Attr("float", 0.2), "beta": Attr("float", 0.5)},
    float_only=True,
)
elementwise(
    "clip",
    lambda v, a: sp.Min(sp.Max(v[0], _num(a["min"])), _num(a["max"])),
    lambda xs, a: np.minimum(np.maximum(xs[0], xs[0].dtype.type(a["min"])), xs[0].dtype.type(a["max"])),
    attrs={"min": Attr("float", float("-inf")), "max": Attr("float", float("inf"))},
)
_SQRT_2_OVER_PI = float(np.sqrt(2 / np.pi))
elementwise(
    "gelu",
    lambda v, a: (
        v[0] / 2 * (1 + sp.tanh(_SQRT_2_OVER_PI * (v[0] + sp.Float(0.044715) * v[0] ** 3)))
        if a["approximate"] == "tanh"
        else v[0] / 2 * (1 + sp.erf(v[0] / sp.sqrt(2)))
    ),
    lambda xs, a: (
        xs[0] / 2 * (1 + np.tanh(xs[0].dtype.type(_SQRT_2_OVER_PI) * (xs[0] + xs[0].dtype.type(0.044715) * xs[0] ** 3)))
        if a["approximate"] == "tanh"
        else xs[0] / 2 * (1 + np_erf(xs[0] / xs[0].dtype.type(np.sqrt(2))))
    ),
    attrs={"approximate": Attr("str", "none", "'none' (erf form) or 'tanh'")},
    float_only=True,
)


def _num(value: float):
    if value == float("inf"):
        return sp.oo
    if value == float("-inf"):
        return -sp.oo
    return sp.Float(value)


def _cast_infer(call):
    return [call.input(0).with_dtype(call.attrs["to"])]


def _cast_access(call):
    from fusionlang.ops.access import Read, Stmt, out_indices, v_sym

    out = call.out_types[0]
    return [Stmt(0, out.shape, (Read(0, out_indices(out.rank)),), v_sym(0))]


register(
    OpDef(
        name="cast",
        inputs=("x",),
        attrs={"to": Attr("dtype")},
        infer=_cast_infer,
        reference=lambda xs, a: [xs[0].astype(a["to"])],
        access=_cast_access,
        doc="Convert the element type (float to int truncates toward zero).",
    )
)

# ----- binary and n-ary ------------------------------------------------------------
_BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "div": (lambda a, b: a / b, None),
}
for _name, (_formula, _fn) in _BINARY.items():
    if _name == "div":
        _fn = lambda a, b: (np.floor_divide(a, b) if a.dtype.kind in "iu" else np.divide(a, b))  # noqa: E731
    elementwise(_name, lambda v, a, f=_formula: f(v[0], v[1]), lambda xs, a, f=_fn: f(xs[0], xs[1]), inputs=("a", "b"))

elementwise(
    "pow",
    lambda v, a: v[0] ** v[1],
    lambda xs, a: np.power(xs[0], xs[1].astype(xs[0].dtype)),
    inputs=("x", "y"),
    mixed_dtypes=True,
)
elementwise(
    "prelu",
    lambda v, a: sp.Piecewise((v[0], v[0] >= 0), (v[0] * v[1], True)),
    lambda xs, a: np.where(xs[0] >= 0, xs[0], xs[0] * xs[1]),
    inputs=("x", "slope"),
)

_COMPARE = {
    "equal": (sp.Eq, np.equal),
    "less": (sp.StrictLessThan, np.less),
    "less_equal": (sp.LessThan, np.less_equal),
    "greater": (sp.StrictGreaterThan, np.greater),
    "greater_equal": (sp.GreaterThan, np.greater_equal),
}
for _name, (_rel, _fn) in _COMPARE.items():
    elementwise(
        _name,
        lambda v, a, r=_rel: sp.Piecewise((1, r(v[0], v[1])), (0, True)),
        lambda xs, a, f=_fn: f(xs[0], xs[1]),
        inputs=("a", "b"),
        out_dtype="bool",
    )


def _where_infer(call):
    from fusionlang.ops.common import broadcast_shapes, same_dtype

    cond, x, y = call.input(0), call.input(1), call.input(2)
    if cond.dtype != "bool":
        raise call.fail(f"condition must be bool, got {cond.dtype}")
    shape = broadcast_shapes(call, [cond.shape, x.shape, y.shape])
    return [TensorType(shape, same_dtype(call, [x, y]))]


_where = elementwise(
    "where",
    lambda v, a: sp.Piecewise((v[1], sp.Ne(v[0], 0)), (v[2], True)),
    lambda xs, a: np.where(xs[0], xs[1], xs[2]),
    inputs=("cond", "x", "y"),
)
_where.infer = _where_infer
_where.reference = lambda xs, a: [np.where(xs[0], xs[1], xs[2])]

for _name, _sym, _fn in (("max", sp.Max, np.maximum), ("min", sp.Min, np.minimum)):
    elementwise(
        _name,
        lambda v, a, s=_sym: s(*v) if len(v) > 1 else v[0],
        lambda xs, a, f=_fn: fold_left(f, xs),
        inputs=("x",),
        variadic=True,
        min_inputs=1,
    )
elementwise("sum", lambda v, a: sp.Add(*v), lambda xs, a: fold_left(np.add, xs), variadic=True, min_inputs=1)
elementwise(
    "mean",
    lambda v, a: sp.Add(*v) / len(v),
    lambda xs, a: fold_left(np.add, xs) / xs[0].dtype.type(len(xs)),
    variadic=True,
    min_inputs=1,
)
