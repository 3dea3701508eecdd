"""Elementwise ops: one output element from the same-index elements of broadcast inputs."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import sympy as sp

    from fusionlang.ops import scalar
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import lazy_module, sp

    scalar = lazy_module("fusionlang.ops.scalar")

from fusionlang.ir.float8 import float8_max, is_float8, to_float8
from fusionlang.ir.narrow_int import convert
from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, out_indices, v_sym
from fusionlang.ops.common import accumulator, elementwise, fold_left, same_dtype
from fusionlang.ops.registry import Attr, OpCall, OpDef, register
from fusionlang.ops.scalar_numpy import np_erf, np_sigmoid



def _numeric(call: OpCall, types: list[TensorType]) -> str:
    dtype = same_dtype(call, types)
    if dtype == "bool":
        raise call.fail("arithmetic on bool tensors is not defined; cast first")
    return dtype


# ----- unary -----------------------------------------------------------------------


def stable_softplus(x):
    # log(1 + e^x) = max(x, 0) + log(1 + e^-|x|): never overflows
    return sp.Max(x, 0) + sp.log(1 + sp.exp(-sp.Abs(x)))


_UNARY = {
    # name: (sympy formula of x, numpy function, also accepts integers, doc)
    "neg": (lambda x: -x, np.negative, True, "-x"),
    "abs": (lambda x: sp.Abs(x), np.abs, True, "|x|"),
    "sign": (lambda x: sp.sign(x), np.sign, True, "-1, 0 or 1 by the sign of x"),
    # x < 0 ? 0 : x, as onnxruntime and the C: -0.0 stays -0.0 (np.maximum gave +0)
    "relu": (lambda x: sp.Max(x, 0), lambda x: np.where(x < 0, x.dtype.type(0), x), True, "max(x, 0)"),
    "exp": (lambda x: sp.exp(x), np.exp, False, "e**x"),
    "log": (lambda x: sp.log(x), np.log, False, "natural logarithm"),
    "sqrt": (lambda x: sp.sqrt(x), np.sqrt, False, "square root"),
    "rsqrt": (lambda x: 1 / sp.sqrt(x), lambda x: 1 / np.sqrt(x), False, "1 / sqrt(x)"),
    "reciprocal": (lambda x: 1 / x, np.reciprocal, False, "1 / x"),
    "erf": (lambda x: sp.erf(x), np_erf, False, "Gauss error function"),
    "tanh": (lambda x: sp.tanh(x), np.tanh, False, "hyperbolic tangent"),
    "sigmoid": (lambda x: scalar.Sigmoid(x), np_sigmoid, False, "1 / (1 + e**-x)"),
    "softplus": (stable_softplus, lambda x: np.logaddexp(x, x.dtype.type(0)), False, "log(1 + e**x)"),
    "softsign": (lambda x: x / (1 + sp.Abs(x)), lambda x: x / (1 + np.abs(x)), False, "x / (1 + |x|)"),
    "floor": (lambda x: sp.floor(x), np.floor, False, "round toward -inf"),
    "ceil": (lambda x: sp.ceiling(x), np.ceil, False, "round toward +inf"),
    "sin": (lambda x: sp.sin(x), np.sin, False, "sine"),
    "cos": (lambda x: sp.cos(x), np.cos, False, "cosine"),
    "silu": (lambda x: x * scalar.Sigmoid(x), lambda x: x * np_sigmoid(x), False, "x * sigmoid(x) (swish)"),
    "tan": (lambda x: sp.tan(x), np.tan, False, "tangent"),
    "asin": (lambda x: sp.asin(x), np.arcsin, False, "arcsine (NaN outside [-1, 1])"),
    "acos": (lambda x: sp.acos(x), np.arccos, False, "arccosine (NaN outside [-1, 1])"),
    "atan": (lambda x: sp.atan(x), np.arctan, False, "arctangent"),
    "sinh": (lambda x: sp.sinh(x), np.sinh, False, "hyperbolic sine"),
    "cosh": (lambda x: sp.cosh(x), np.cosh, False, "hyperbolic cosine"),
    "asinh": (lambda x: sp.asinh(x), np.arcsinh, False, "inverse hyperbolic sine"),
    "acosh": (lambda x: sp.acosh(x), np.arccosh, False, "inverse hyperbolic cosine (NaN below 1)"),
    "atanh": (lambda x: sp.atanh(x), np.arctanh, False, "inverse hyperbolic tangent (+-inf at +-1, NaN beyond)"),
    "round": (lambda x: scalar.RoundHalfEven(x), np.rint, False, "round to the nearest integer, ties to even"),
}

for _name, (_formula, _fn, _ints, _doc) in _UNARY.items():
    elementwise(
        _name,
        lambda v, a, f=_formula: f(v[0]),
        lambda xs, a, f=_fn: f(xs[0]),
        float_only=not _ints,
        dtype_rule=_numeric if _ints else None,
        doc=f"Elementwise {_doc}.",
    )

elementwise(
    "identity",
    lambda v, a: v[0],
    lambda xs, a: xs[0].copy(),
    view=True,
    doc="Returns its input; a view (costs nothing) and removed by simplify.fuse.",
)

elementwise(
    "dropout",
    lambda v, a: v[0],
    lambda xs, a: xs[0].copy(),
    attrs={"ratio": Attr("float", 0.5)},
    view=True,
    doc="Inference-mode dropout: the identity.",
)

elementwise(
    "leaky_relu",
    lambda v, a: sp.Piecewise((v[0], v[0] >= 0), (a["alpha"] * v[0], True)),
    lambda xs, a: np.where(xs[0] >= 0, xs[0], xs[0] * xs[0].dtype.type(a["alpha"])),
    attrs={"alpha": Attr("float", 0.01)},
    float_only=True,
    doc="x for x >= 0, alpha * x below.",
)
elementwise(
    "elu",
    lambda v, a: sp.Piecewise((v[0], v[0] >= 0), (a["alpha"] * (sp.exp(v[0]) - 1), True)),
    lambda xs, a: np.where(xs[0] >= 0, xs[0], xs[0].dtype.type(a["alpha"]) * np.expm1(np.minimum(xs[0], 0))),
    attrs={"alpha": Attr("float", 1.0)},
    float_only=True,
    doc="x for x >= 0, alpha * (e**x - 1) below.",
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
    doc="Scaled ELU: gamma * (x for x > 0, alpha * (e**x - 1) otherwise).",
)
elementwise(
    "hard_sigmoid",
    lambda v, a: sp.Max(0, sp.Min(1, a["alpha"] * v[0] + a["beta"])),
    lambda xs, a: np.clip(xs[0] * xs[0].dtype.type(a["alpha"]) + xs[0].dtype.type(a["beta"]), 0, 1),
    attrs={"alpha": Attr("float", 0.2), "beta": Attr("float", 0.5)},
    float_only=True,
    doc="max(0, min(1, alpha * x + beta)).",
)

_SQRT_2_OVER_PI = float(np.sqrt(2 / np.pi))


def _gelu_formula(v, a):
    x = v[0]
    if a["approximate"] == "tanh":
        return x / 2 * (1 + sp.tanh(_SQRT_2_OVER_PI * (x + sp.Float(0.044715) * x**3)))
    return x / 2 * (1 + sp.erf(x / sp.sqrt(2)))


def _gelu_numpy(xs, a):
    x = xs[0]
    one = x.dtype.type
    if a["approximate"] == "tanh":
        return x / 2 * (1 + np.tanh(one(_SQRT_2_OVER_PI) * (x + one(0.044715) * x**3)))
    return x / 2 * (1 + np_erf(x / one(np.sqrt(2))))


def _gelu_dtype(call: OpCall, types: list[TensorType]) -> str:
    if call.attrs["approximate"] not in ("none", "tanh"):
        raise call.fail(f"approximate={call.attrs['approximate']!r} should be 'none' or 'tanh'")
    if not types[0].is_float:
        raise call.fail(f"input must be a floating-point tensor, got {types[0].dtype}")
    return types[0].dtype


elementwise(
    "gelu",
    _gelu_formula,
    _gelu_numpy,
    attrs={"approximate": Attr("str", "none", "'none' (erf form) or 'tanh'")},
    dtype_rule=_gelu_dtype,
    doc="Gaussian error linear unit, x * Phi(x) (erf form, or the tanh approximation).",
)


# ----- clip ------------------------------------------------------------------------


def _num(value: float):
    if value == math.inf:
        return sp.oo
    if value == -math.inf:
        return -sp.oo
    if value == 0 and math.copysign(1, value) < 0:
        return scalar.NegativeZero()
    if isinstance(value, int):  # (an integer bound a float cannot hold: see registry's float attributes)
        return sp.Integer(value)
    return sp.Float(value)


def _clip_dtype(call: OpCall, types: list[TensorType]) -> str:
    x = types[0]
    if x.dtype == "bool":
        raise call.fail("clip needs a numeric input, got bool")
    if not x.is_float:
        for name in ("min", "max"):
            bound = call.attrs[name]
            if math.isfinite(bound) and not float(bound).is_integer():
                raise call.fail(f"{name}={bound} is not an integer, but the input is {x.dtype}")
            if math.isnan(bound):
                raise call.fail(f"{name} is NaN")
    return x.dtype


def _clip_formula(x, low, high):
    """min(max(x, low), high) with onnxruntime's std::max and std::min: NaN stays NaN, a
    tie keeps x, and inverted bounds give high for every other x."""
    if _value(low) > _value(high):
        return sp.Piecewise((x, sp.Ne(scalar.IsNan(x), 0)), (high, True))
    cases = []
    if low != -sp.oo:
        cases.append((low, x < _value(low)))
    if high != sp.oo:
        cases.append((high, x > _value(high)))
    return sp.Piecewise(*cases, (x, True)) if cases else x


def _value(bound):
    """A bound as a number to compare with: -0.0 compares as 0."""
    return sp.Integer(0) if isinstance(bound, scalar.NegativeZero) else bound


def _clip_numpy(xs, a):
    # x < min ? min : x, then x > max ? max : x, as onnxruntime's std::max and std::min:
    # NaN stays NaN and a tie keeps x (-0.0 clipped to [0, 0] stays -0.0)
    x = xs[0]
    # an infinite bound is absent, and integer dtypes cannot hold it anyway
    if a["min"] != -math.inf:
        low = _bound(x.dtype, a["min"])
        x = np.where(x < low, low, x)
    if a["max"] != math.inf:
        high = _bound(x.dtype, a["max"])
        x = np.where(x > high, high, x)
    return x


def _bound(dtype: np.dtype, value: float):
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        value = min(max(value, info.min), info.max)
        return dtype.type(int(value))
    return dtype.type(value)


elementwise(
    "clip",
    # as comparisons, not sympy's Min and Max: those simplify min(max(x, 5), 1) to 1 over
    # the reals, where a NaN x must stay NaN, and their C picks the bound on a tie
    lambda v, a: _clip_formula(v[0], _num(a["min"]), _num(a["max"])),
    _clip_numpy,
    attrs={"min": Attr("float", -math.inf), "max": Attr("float", math.inf)},
    dtype_rule=_clip_dtype,
    doc="min(max(x, min), max); with min > max every element becomes max (ONNX).",
)


# ----- cast ------------------------------------------------------------------------


def _cast_infer(call: OpCall) -> list[TensorType]:
    return [call.input(0).with_dtype(call.attrs["to"])]


def _cast_access(call: OpCall) -> list[Stmt]:
    out = call.out_types[0]
    value = v_sym(0)
    if is_float8(out.dtype) and call.attrs["saturate"]:
        # the store rounds to nearest even; clamping first makes overflow saturate (NaN-keeping max/min)
        limit = float8_max(out.dtype)
        value = sp.Min(sp.Max(value, -limit), limit)
    return [Stmt(0, out.shape, (Read(0, out_indices(out.rank)),), value)]


def _cast_reference(xs, a):
    if is_float8(a["to"]):
        return [to_float8(xs[0], a["to"], bool(a["saturate"]))]
    if np.dtype(a["to"]) in (np.uint64, np.uint32) and xs[0].dtype.kind == "f":
        return [_float_to_unsigned(xs[0], np.dtype(a["to"]))]
    return [convert(xs[0], a["to"])]


def _float_to_unsigned(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Floats as uint64 or uint32 where C leaves it undefined, as x86 converts (the generated
    code's fl_f2u64 and fl_f2u32, onnxruntime's float32 and float64 casts): below 2**(n-1)
    through the signed type (NaN and values below -2**(n-1) give 2**(n-1)), from 2**(n-1) on
    as x - 2**(n-1) with the top bit set (infinity, 2**n and up give 0). NumPy's own cast
    follows the instructions its loops happen to use."""
    bits = dtype.itemsize * 8
    top, signed = 2.0 ** (bits - 1), np.dtype(f"int{bits}")
    v = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        high = v >= top
        rest = np.where(high, v - top, 0.0)
        high_in_range = high & (rest < top)
        low_in_range = ~high & (v > -top - 1)  # (truncated toward zero: -2**(n-1) - 0.5 fits)
    out = np.full(v.shape, 1 << (bits - 1), dtype)
    out[high] = 0
    out[high_in_range] = rest[high_in_range].astype(signed).astype(dtype) | dtype.type(1 << (bits - 1))
    out[low_in_range] = v[low_in_range].astype(signed).astype(dtype)
    return out


register(
    OpDef(
        name="cast",
        inputs=("x",),
        attrs={"to": Attr("dtype", doc="target dtype"),
               "saturate": Attr("int", 1, doc="float8 targets: out-of-range values become the largest finite "
                                              "value (1) or NaN/inf (0)")},
        infer=_cast_infer,
        reference=_cast_reference,
        access=_cast_access,
        doc="Convert the element type (float to int truncates toward zero; a float outside uint32's or uint64's "
            "range (n bits) converts as x86 and onnxruntime's float32 and float64 casts do: below 2**(n-1) "
            "through the signed type, NaN and values below -2**(n-1) giving 2**(n-1), from 2**(n-1) on with the "
            "top bit set, infinity and 2**n up giving 0; to int4/uint4/int2/uint2 then "
            "keeps the low bits, NaN and infinities giving 0; nonzero to bool is true; to float8 rounds to "
            "nearest even).",
    )
)

# ----- binary and n-ary ------------------------------------------------------------


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind not in "iu":
        return np.divide(a, b)
    return truncated_divide(a, b)


def truncated_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero (C and ONNX), unlike numpy's floor division,
    and never undefined: a divisor of 0 gives 0 (numpy's result), and the one overflow,
    INT_MIN / -1, wraps to INT_MIN. Generated code computes the same (``fl_idiv``)."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    zero = b == 0
    divisor = np.where(zero, np.ones_like(b), b)
    with np.errstate(over="ignore"):
        q = np.floor_divide(a, divisor)
        r = a - q * divisor
    q = q + ((r != 0) & ((a < 0) != (divisor < 0)))
    return np.where(zero, np.zeros_like(q), q)


_BINARY = {
    "add": (lambda a, b: a + b, np.add, "a + b"),
    "sub": (lambda a, b: a - b, np.subtract, "a - b"),
    "mul": (lambda a, b: a * b, np.multiply, "a * b"),
    "div": (lambda a, b: a / b, _divide, "a / b (integers: truncated toward zero)"),
}
for _name, (_formula, _fn, _doc) in _BINARY.items():
    elementwise(
        _name,
        lambda v, a, f=_formula: f(v[0], v[1]),
        lambda xs, a, f=_fn: f(xs[0], xs[1]),
        inputs=("a", "b"),
        dtype_rule=_numeric,
        commutative=_name in ("add", "mul"),
        doc=f"Elementwise {_doc}, numpy broadcasting.",
    )


def _pow_numpy(xs, a):
    base, exponent = xs
    if base.dtype.kind in "iu":
        # ONNX computes integer powers through double (negative exponents truncate to 0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return np.trunc(np.power(base.astype(np.float64), exponent.astype(np.float64)))
    exponent = exponent.astype(base.dtype)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        out = np.power(base, exponent)
    # NumPy computes x ** 0.5 as sqrt(x): NaN at -inf and -0 at -0, where IEEE pow (C, ONNX
    # Runtime) gives +inf and +0
    root = exponent == 0.5
    out = np.where(np.isneginf(base) & root, base.dtype.type(np.inf), out)
    return np.where((base == 0) & root, base.dtype.type(0), out)


def _pow_dtype(call: OpCall, types: list[TensorType]) -> str:
    if any(t.dtype == "bool" for t in types):
        raise call.fail("pow needs numeric inputs, got bool")
    return types[0].dtype


elementwise(
    "pow",
    lambda v, a: v[0] ** v[1],
    _pow_numpy,
    inputs=("x", "y"),
    dtype_rule=_pow_dtype,
    doc="x ** y; the exponent may have another numeric dtype; the result has x's dtype.",
)
elementwise(
    "prelu",
    lambda v, a: sp.Piecewise((v[0], v[0] >= 0), (v[0] * v[1], True)),
    lambda xs, a: np.where(xs[0] >= 0, xs[0], xs[0] * xs[1]),
    inputs=("x", "slope"),
    unidirectional=True,
    dtype_rule=_numeric,
    doc="x for x >= 0, slope * x below; slope broadcasts to x's shape.",
)

_COMPARE = {
    "equal": (lambda a, b: sp.Eq(a, b), np.equal, "a == b"),
    "less": (lambda a, b: sp.StrictLessThan(a, b), np.less, "a < b"),
    "less_equal": (lambda a, b: sp.LessThan(a, b), np.less_equal, "a <= b"),
    "greater": (lambda a, b: sp.StrictGreaterThan(a, b), np.greater, "a > b"),
    "greater_equal": (lambda a, b: sp.GreaterThan(a, b), np.greater_equal, "a >= b"),
}
for _name, (_rel, _fn, _doc) in _COMPARE.items():
    elementwise(
        _name,
        lambda v, a, r=_rel: sp.Piecewise((1, r(v[0], v[1])), (0, True)),
        lambda xs, a, f=_fn: f(xs[0], xs[1]),
        inputs=("a", "b"),
        out_dtype="bool",
        commutative=_name == "equal",
        doc=f"Elementwise {_doc} as a bool tensor.",
    )


def _bool_only(call: OpCall, types: list[TensorType]) -> str:
    bad = [t.dtype for t in types if t.dtype != "bool"]
    if bad:
        raise call.fail(f"logical ops need bool inputs, got {bad[0]}")
    return "bool"


_LOGICAL = {
    "and": (lambda a, b: sp.And(a, b), np.logical_and, "a and b"),
    "or": (lambda a, b: sp.Or(a, b), np.logical_or, "a or b"),
    "xor": (lambda a, b: sp.Xor(a, b), np.logical_xor, "a xor b"),
}
for _name, (_logic, _fn, _doc) in _LOGICAL.items():
    elementwise(
        _name,
        lambda v, a, f=_logic: sp.Piecewise((1, f(sp.Ne(v[0], 0), sp.Ne(v[1], 0))), (0, True)),
        lambda xs, a, f=_fn: f(xs[0], xs[1]),
        inputs=("a", "b"),
        dtype_rule=_bool_only,
        commutative=True,
        doc=f"Elementwise logical {_doc} of bool tensors.",
    )
elementwise(
    "not",
    lambda v, a: sp.Piecewise((0, sp.Ne(v[0], 0)), (1, True)),
    lambda xs, a: np.logical_not(xs[0]),
    dtype_rule=_bool_only,
    doc="Elementwise logical not of a bool tensor.",
)


def _where_dtype(call: OpCall, types: list[TensorType]) -> str:
    cond = types[0]
    if cond.dtype != "bool":
        raise call.fail(f"condition must be bool, got {cond.dtype}")
    return same_dtype(call, types[1:])


elementwise(
    "where",
    lambda v, a: sp.Piecewise((v[1], sp.Ne(v[0], 0)), (v[2], True)),
    lambda xs, a: np.where(xs[0], xs[1], xs[2]),
    inputs=("cond", "x", "y"),
    dtype_rule=_where_dtype,
    dtype_from=1,
    doc="x where cond is true, else y; all three broadcast together.",
)

for _name, _sym, _fn in (("max", "Max", np.maximum), ("min", "Min", np.minimum)):
    elementwise(
        _name,
        lambda v, a, s=_sym: getattr(sp, s)(*v) if len(v) > 1 else v[0],
        lambda xs, a, f=_fn: fold_left(f, xs),
        inputs=("x",),
        variadic=True,
        min_inputs=1,
        dtype_rule=_numeric,
        commutative=True,
        doc=f"Elementwise {_name} of one or more broadcast inputs.",
    )


def _mean(xs):
    # each input divided, then added, wider: the mean of values near the largest float is
    # finite when it is representable, as in the generated code, which divides first too
    wide = accumulator(xs[0].dtype)
    return fold_left(np.add, [x.astype(wide) / len(xs) for x in xs]).astype(xs[0].dtype)


elementwise(
    "sum",
    lambda v, a: sp.Add(*v),
    lambda xs, a: fold_left(np.add, xs),
    variadic=True,
    min_inputs=1,
    dtype_rule=_numeric,
    commutative=True,
    doc="Elementwise sum of one or more broadcast inputs.",
)
elementwise(
    "mean",
    lambda v, a: sp.Add(*v) / len(v),
    lambda xs, a: _mean(xs),
    variadic=True,
    min_inputs=1,
    float_only=True,
    commutative=True,
    doc="Elementwise mean of one or more broadcast inputs.",
)
