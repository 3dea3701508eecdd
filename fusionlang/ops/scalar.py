"""Scalar formulas: sympy expressions, and evaluating them with NumPy.

Formulas are built from parse trees or Python code, never from text. Evaluation walks
the sympy tree and maps each node to a NumPy function; nothing is ever exec'd.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import sympy as sp

from fusionlang.errors import ShapeError
from fusionlang.ops.scalar_numpy import BITCAST_DTYPES, bit_cast, bit_shift, bitwise, np_erf, np_sigmoid


class Sigmoid(sp.Function):
    """Logistic sigmoid as one function, so generated code can print it as such."""

    nargs = 1

    def fdiff(self, argindex=1):
        s = Sigmoid(self.args[0])
        return s * (1 - s)


class CheckedIndex(sp.Function):
    """``CheckedIndex(i, n, axis)``: a loaded index ``i`` into an axis of size ``n``, legal
    in [-n, n) (a negative one counts from the end, as in ONNX), as its place in [0, n).
    Any other value is an error: generated code checks it (unless asked not to) and
    reports the op, the axis and the value; the reference refuses it before it gets here.
    ``axis`` only names the axis in that message."""

    nargs = 3

    def _eval_is_integer(self):
        return True

    def _eval_is_nonnegative(self):
        return True


class IsNan(sp.Function):
    """1 where x is NaN, else 0 (a function: sympy would fold ``x != x`` to false)."""

    nargs = 1


class IsInf(sp.Function):
    """1 where x is +inf or -inf, else 0."""

    nargs = 1


class NegativeZero(sp.Function):
    """The float -0.0 (sympy's numbers have no signed zero: Float(-0.0) is 0): the bound of
    a Clip, the start of a float sum, where IEEE and onnxruntime keep the sign."""

    nargs = 0
    is_real = True
    is_finite = True


class Grouped(sp.Function):
    """x, computed on its own before the sum around it: sympy flattens a + (b - c) to
    a + b - c, and float addition is not associative (a zero's sign, a rounding differ)."""

    nargs = 1


class Fmod(sp.Function):
    """C's fmod: the remainder of a / b truncated toward zero (sign of a); sympy's Mod floors."""

    nargs = 2


class Float32Round(sp.Function):
    """x rounded to float32: a quotient computed in a wider type rounds as float32 arithmetic
    would have (double rounding of one division is exact), as ONNX's quantization computes."""

    nargs = 1


class BitShift(sp.Function):
    """ONNX BitShift of an integer a by s bits (args: a, s, bits, signed, left): bits shifted
    out of a ``bits``-wide integer are lost, and a shift count outside [0, bits) gives 0, or
    -1 when shifting a negative value right (NumPy's results, not C's undefined ones)."""

    nargs = 5


class RoundHalfEven(sp.Function):
    """x rounded to the nearest integer, ties to the even one (ONNX Round and quantization,
    C's rint in the default rounding mode); sympy's own round is Python's and evaluates
    eagerly, and rounds ties away from zero."""

    nargs = 1


class Bitwise(sp.Function):
    """``Bitwise(a, b, kind)``: a & b (kind 0), a | b (1) or a ^ b (2) on integers, computed
    on their two's-complement bits (``~a`` is ``a ^ -1``)."""

    nargs = 3


class BitCast(sp.Function):
    """``BitCast(x, source, target)``: x's bits read as another dtype of the same width;
    source and target index :data:`BITCAST_DTYPES`."""

    nargs = 3


_UNARY = {
    sp.exp: np.exp,
    sp.log: np.log,
    sp.erf: np_erf,
    sp.tanh: np.tanh,
    sp.sin: np.sin,
    sp.cos: np.cos,
    sp.tan: np.tan,
    sp.asin: np.arcsin,
    sp.acos: np.arccos,
    sp.atan: np.arctan,
    sp.sinh: np.sinh,
    sp.cosh: np.cosh,
    sp.asinh: np.arcsinh,
    sp.acosh: np.arccosh,
    sp.atanh: np.arctanh,
    RoundHalfEven: np.rint,
    sp.Abs: np.abs,
    sp.floor: np.floor,
    sp.ceiling: np.ceil,
    sp.sign: np.sign,
    Sigmoid: np_sigmoid,
    IsNan: lambda x: np.isnan(x).astype(np.int8),
    IsInf: lambda x: np.isinf(x).astype(np.int8),
    Float32Round: lambda x: np.asarray(x, np.float32),
    Grouped: lambda x: x,
}

_RELATIONAL = {
    sp.StrictLessThan: np.less,
    sp.LessThan: np.less_equal,
    sp.StrictGreaterThan: np.greater,
    sp.GreaterThan: np.greater_equal,
    sp.Equality: np.equal,
    sp.Unequality: np.not_equal,
}


def evaluate(expr: sp.Basic, env: Mapping[str, object], dtype=np.float32):
    """Evaluate ``expr`` with symbols bound by name in ``env`` (arrays or scalars).

    Numbers become ``dtype`` scalars so float32 formulas stay float32. IEEE special
    values are results (1/0 is inf), as in the reference interpreter: no warning.
    """
    with np.errstate(all="ignore"):
        return _Evaluator(env, np.dtype(dtype)).run(expr)


class _Evaluator:
    def __init__(self, env, dtype):
        self.env = env
        self.dtype = dtype

    def run(self, e):
        if isinstance(e, sp.Symbol):
            try:
                return self.env[e.name]
            except KeyError:
                raise ShapeError(f"formula uses unbound name {e.name!r}") from None
        if e is sp.true or e == sp.true:
            return np.bool_(True)
        if e is sp.false or e == sp.false:
            return np.bool_(False)
        if isinstance(e, sp.Integer):
            return int(e)
        if isinstance(e, sp.Number):
            if e is sp.oo:
                return self.dtype.type(np.inf)
            if e is sp.S.NegativeInfinity:
                return self.dtype.type(-np.inf)
            return self.dtype.type(float(e))
        if e in (sp.pi, sp.E):
            return self.dtype.type(float(e))
        args = e.args
        if isinstance(e, sp.Add):
            out = self.run(args[0])
            for a in args[1:]:
                out = out + self.run(a)
            return out
        if isinstance(e, sp.Mul):
            out = self.run(args[0])
            for a in args[1:]:
                out = out * self.run(a)
            return out
        if isinstance(e, sp.Pow):
            base, exponent = args
            b = self.run(base)
            if exponent == -1:
                return self.dtype.type(1) / b
            if exponent == sp.Rational(1, 2):
                return np.sqrt(b)
            if exponent == sp.Rational(-1, 2):
                return self.dtype.type(1) / np.sqrt(b)
            if exponent == 2:
                return b * b
            return np.power(b, self.run(exponent))
        if isinstance(e, (sp.Max, sp.Min)):
            fn = np.maximum if isinstance(e, sp.Max) else np.minimum
            out = self.run(args[0])
            for a in args[1:]:
                out = fn(out, self.run(a))
            return out
        if isinstance(e, (sp.floor, sp.ceiling)):
            return self._rounded(e)
        if isinstance(e, sp.Mod):
            return self._mod(*args)
        if isinstance(e, sp.Piecewise):
            return self._piecewise(e)
        if isinstance(e, sp.And):
            return np.logical_and.reduce([np.asarray(self.run(a), bool) for a in args])
        if isinstance(e, sp.Or):
            return np.logical_or.reduce([np.asarray(self.run(a), bool) for a in args])
        if isinstance(e, sp.Xor):
            return np.logical_xor.reduce([np.asarray(self.run(a), bool) for a in args])
        if isinstance(e, sp.Not):
            return np.logical_not(self.run(args[0]))
        for kind, fn in _RELATIONAL.items():
            if isinstance(e, kind):
                return fn(self.run(args[0]), self.run(args[1]))
        if isinstance(e, CheckedIndex):
            i, n = self.run(args[0]), self.run(args[1])
            return np.where(np.asarray(i) < 0, np.asarray(i) + n, i)
        if isinstance(e, BitShift):
            a, shift = self.run(args[0]), self.run(args[1])
            return bit_shift(a, shift, int(args[2]), bool(args[3]), bool(args[4])).astype(self.dtype)
        if isinstance(e, Bitwise):
            return bitwise(self.run(args[0]), self.run(args[1]), int(args[2]))  # int64: every bit kept
        if isinstance(e, BitCast):
            source, target = (BITCAST_DTYPES[int(a)] for a in args[1:])
            return bit_cast(self.run(args[0]), source, target)
        if isinstance(e, NegativeZero):
            return self.dtype.type(-0.0)
        if isinstance(e, Fmod):
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.fmod(self.run(args[0]), self.run(args[1]))
        fn = _UNARY.get(type(e)) or _UNARY.get(e.func)
        if fn is not None:
            return fn(self.run(args[0]))
        raise ShapeError(f"cannot evaluate formula node {type(e).__name__}")

    def _exact_quotient(self, arg):
        """(numerator, denominator) of ``arg`` when the denominator is an integer constant."""
        num, den = sp.fraction(sp.together(arg))
        return (num, int(den)) if den.is_Integer and den != 1 else (None, 1)

    def _rounded(self, e):
        # sympy writes floor((2*i + j)/3) as floor(2*i/3 + j/3); summing those thirds in
        # floating point can land just below an integer, so divide the integer numerator
        num, den = self._exact_quotient(e.args[0])
        if num is None:
            return (np.floor if isinstance(e, sp.floor) else np.ceil)(self.run(e.args[0]))
        if isinstance(e, sp.floor):
            return np.floor_divide(self.run(num), den)
        return -np.floor_divide(-self.run(num), den)

    def _mod(self, a, n):
        num, den = self._exact_quotient(a)
        if num is None or not n.is_Integer:
            return np.mod(self.run(a), self.run(n))
        return np.mod(self.run(num), int(n) * den) / den

    def _piecewise(self, e):
        # np.select evaluates every branch; pieces are cheap scalar formulas
        conditions, values = [], []
        for value, cond in e.args:
            conditions.append(np.asarray(self.run(cond), bool))
            values.append(self.run(value))
        shape = np.broadcast_shapes(*(np.shape(c) for c in conditions), *(np.shape(v) for v in values))
        conditions = [np.broadcast_to(c, shape) for c in conditions]
        values = [np.broadcast_to(np.asarray(v), shape) for v in values]
        return np.select(conditions, values, default=np.nan if self.dtype.kind == "f" else 0)
