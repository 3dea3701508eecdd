"""Printing expressions as C / CUDA: exact integer index arithmetic and float32 bodies.

Index arithmetic has floor semantics (sympy's ``floor``/``Mod``, isl's ``fdiv_q``) but C's
``/`` and ``%`` truncate toward zero, so indices go through our own printer: plain ``/``
and ``%`` only when the dividend is provably non-negative, helper functions otherwise.
Float bodies use sympy's C99 printer with float32 type aliases (``expf``, ``erff``...),
plus our functions (``Sigmoid``), NaN-propagating max/min like NumPy, and literals we
print ourselves (``%.9g`` round-trips float32 exactly; inf and nan by bit pattern or macro).
Integer division and modulo never trap: C's ``/`` and ``%`` on integers go through helpers
(``fl_idiv``, ``fl_ifdiv``, ``fl_imod``) that give 0 for a zero divisor and wrap INT_MIN / -1
to INT_MIN, as NumPy and the reference do. Every integer type but uint64 fits in int64_t,
where those helpers compute; uint64 values (from 2**63 on, negative as int64_t) divide,
compare and shift through unsigned helpers (``fl_udiv``, ``fl_umax``, ``fl_ushr``...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np
import sympy as sp
from sympy.codegen.ast import float32, real
from sympy.printing.c import C99CodePrinter

from fusionlang.backend.bitcast import bitcast_c, bitcast_helpers
from fusionlang.backend.half import half_helpers
from fusionlang.backend.storage_codecs import codec_helpers
from fusionlang.errors import CodegenError
from fusionlang.ir.float8 import NARROW_FLOAT_DTYPES
from fusionlang.ir.narrow_int import NARROW_INT_DTYPES
from fusionlang.ops.access import as_expr
from fusionlang.ops.scalar import (BITCAST_DTYPES, BitCast, BitShift, Bitwise, CheckedIndex, Float32Round, Fmod, Grouped,
                                   IsInf, IsNan, NegativeZero, RoundHalfEven, Sigmoid)


@dataclass(frozen=True)
class Flavor:
    """What differs between C and CUDA source text."""

    name: str
    int_type: str
    inf_f: str
    nan_f: str
    inf_d: str
    nan_d: str
    fn_prefix: str  # qualifiers of helper functions


def _small_power(exp) -> bool:
    """Is ``exp`` an integer power printed as multiplications: an Integer up to 8 in
    magnitude, or a Float holding a whole number 0 to 8 (ONNX exports ``Pow(x, 3.0)``: GPT-2's
    tanh GELU). A product vectorizes where powf stays a call per element: the GELU GEMM's
    epilogue ran at a third of the plain GEMM's speed. Within 4 ulp (one rounding a factor),
    and pow's special values hold (NaN, +-inf, +-0 keep their signs: odd powers keep the
    base's); negative Float powers keep powf, whose subnormal results a reciprocal of an
    overflowed product would lose."""
    if isinstance(exp, sp.Integer):
        return abs(int(exp)) <= 8
    return isinstance(exp, sp.Float) and float(exp).is_integer() and 0 <= float(exp) <= 8


#: fractional powers printed with square roots (:meth:`ValuePrinter._root_power`), by magnitude
_ROOT_POWERS = (0.25, 0.75, 1.5)

C = Flavor("c", "int64_t", "INFINITY", "NAN", "((double)INFINITY)", "((double)NAN)", "static inline")
CUDA = Flavor("cuda", "long long", "__int_as_float(0x7f800000)", "__int_as_float(0x7fc00000)",
              "__longlong_as_double(0x7ff0000000000000LL)", "__longlong_as_double(0x7ff8000000000000LL)",
              "static __device__ __forceinline__")

#: C type of each dtype in memory
CTYPES = {"float32": "float", "float64": "double", "int64": None, "int32": "int", "int8": "signed char",
          "uint8": "unsigned char", "bool": "unsigned char",
          "int16": "int16_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
          "float16": "unsigned short", "bfloat16": "unsigned short",  # 16-bit floats: bit patterns (backend.half)
          # float8, float4, 4- and 2-bit integers: the stored byte; loads and stores convert
          # (backend.storage_codecs)
          **{dtype: "unsigned char" for dtype in NARROW_FLOAT_DTYPES + NARROW_INT_DTYPES}}

#: CUDA spellings of the <stdint.h> types above: NVRTC compiles without the C headers
CUDA_CTYPES = {"int16_t": "short", "uint16_t": "unsigned short", "uint32_t": "unsigned int",
               "uint64_t": "unsigned long long"}


def ctype(dtype: str, flavor: Flavor) -> str:
    t = CTYPES.get(dtype)
    if dtype == "int64":
        return flavor.int_type
    if flavor.name == "cuda" and t in CUDA_CTYPES:
        return CUDA_CTYPES[t]
    if t is None:
        raise CodegenError(f"dtype {dtype} has no C type")
    return t


#: float32 exp, erf and tanh, branch-free so that loops calling them vectorize without a
#: vector math library: C only; CUDA has fast expf/erff/tanhf of its own.
#:
#: fl_expf: exp(x) = 2^k exp(r) with k = round(x / ln 2) (the 1.5 * 2^23 shifter leaves k in
#: the low bits of t), r = x - k ln 2 in two steps (Cody-Waite), exp(r) by a degree-5
#: minimax polynomial on |r| <= ln(2)/2. 2^k is applied as two factors so that results
#: overflow to inf and underflow through the subnormals with one rounding. The input is
#: clamped to [-104, 88.8] (beyond, the result is 0 or inf anyway) on its bits, as signed
#: (x >= 0) and unsigned (x < 0) integers: integer min is one instruction, a float compare
#: and blend is two or three. Max error 2.3 ulp over every float32 (glibc's libmvec expf:
#: 2.6), subnormal results included, exact 0, inf and NaN. About 1.4x the throughput of
#: libmvec's AVX-512 expf on Zen 5, and inlined: libmvec's call spills the loop's vector
#: accumulators around every 16 elements.
#:
#: fl_erff, fl_tanhf: rational approximations (Eigen's fast erf/tanh coefficients, max
#: relative error 4.2e-7 and 4e-7 here). Measured on every 263rd float32 against the
#: correctly rounded result: erf within 5.7 ulp (x * (p / q), not x * p / q, whose x * p
#: lost the subnormals' bits: 36 ulp below 1e-4), tanh 4.6 ulp, exp 2.2 ulp; NaN stays NaN,
#: erf and tanh keep the sign of -0 and return a subnormal input's value (tanh exactly), and
#: both are exactly +-1 past the clamp (tanh from 7.9053, where tanhf is 0.99999976: 4 ulp), so
#: at +-inf too. tanh selects +-1 (copysignf) past 7.9053 rather than clamping its input: the
#: rational evaluated with FMAs is 0.99999976 at 7.9053, so the exact 1 of a clamped input was
#: the compiler's folding, which also cost the vectorized loop 4 compares and 2 blends (a
#: tanh-GELU epilogue loop over a GEMM tile: 0.41 -> 0.37 ns per element, erf-GELU's 0.37).
#: tests/backend/test_cexpr.py holds these bounds.
FAST_MATH_C = """static inline float fl_expf(float x) {
  union { float f; int32_t i; uint32_t u; } v = {x}, t, s1, s2;
  v.u = v.u < 0xC2D00000u ? v.u : 0xC2D00000u;
  v.i = v.i < 0x42B1999A ? v.i : 0x42B1999A;
  t.f = v.f * 1.44269502f + 12582912.0f;
  float k = t.f - 12582912.0f;
  float r = k * -0.693145752f + v.f;
  r = k * -1.42860677e-06f + r;
  float p = 0.00829031412f;
  p = p * r + 0.0418979302f;
  p = p * r + 0.166676357f;
  p = p * r + 0.499991506f;
  p = p * r + 0.999999702f;
  int32_t n = t.i - 0x4B400000, h = n >> 1;
  s1.i = (h + 127) << 23;
  s2.i = (n - h + 127) << 23;
  float y = (p * r * s1.f + s1.f) * s2.f;
  return x != x ? x : y;
}
static inline float fl_erff(float a) {
  float x = a > 4.0f ? 4.0f : (a < -4.0f ? -4.0f : a);
  float x2 = x * x;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 + -2.10102402082508e-06f;
  p = p * x2 + -5.69250639462346e-05f;
  p = p * x2 + -7.34990630326855e-04f;
  p = p * x2 + -2.95459980854025e-03f;
  p = p * x2 + -1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * x2 + -2.13374055278905e-04f;
  q = q * x2 + -1.68282697438203e-03f;
  q = q * x2 + -7.37332916720468e-03f;
  q = q * x2 + -1.42647390514189e-02f;
  return x * (p / q);
}
static inline float fl_tanhf(float x) {
  float x2 = x * x;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  p = p * x;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  float y = fabsf(x) > 7.90531110763549805f ? copysignf(1.0f, x) : p / q;
  return !(fabsf(x) >= 0.0004f) ? x : y;
}
"""


#: a loaded index, checked (see ops.scalar.CheckedIndex and backend.failures): one unsigned
#: compare on the normalized index; a bad one fills the error record (the first one, on the
#: GPU) and reads element 0, which is always there, so nothing reads outside the data. In a
#: C SIMD loop, fl_index_lane or-reduces a flag and min-reduces the bad value instead
#: (emit_c fills the record after the loop), which vectorizes where a store would not.
CHECKED_INDEX = {
    "c": """static inline int64_t fl_index(int64_t i, int64_t n, int64_t site, int64_t* fl_err) {
  int64_t j = i < 0 ? i + n : i;
  if (__builtin_expect((uint64_t)j >= (uint64_t)n, 0)) { fl_err[0] = 1; fl_err[1] = site; fl_err[2] = i; j = 0; }
  return j;
}
static inline int64_t fl_index_lane(int64_t i, int64_t n, int64_t* bad, int64_t* value) {
  int64_t j = i < 0 ? i + n : i;
  int64_t b = (uint64_t)j >= (uint64_t)n, v = b ? i : INT64_MAX;
  *bad |= b;
  *value = v < *value ? v : *value;
  return b ? 0 : j;
}
""",
    "cuda": """static __device__ __forceinline__ long long fl_index(long long i, long long n, long long site,
                                                          long long* fl_err) {
  long long j = i < 0 ? i + n : i;
  if ((unsigned long long)j >= (unsigned long long)n) {
    if (atomicCAS((unsigned long long*)fl_err, 0ULL, 1ULL) == 0ULL) { fl_err[1] = site; fl_err[2] = i; }
    j = 0;
  }
  return j;
}
""",
}


#: OpenMP's reduction(+) starts each lane at +0, so a sum of -0.0s came out +0 (IEEE,
#: NumPy and onnxruntime give -0): fl_add starts them at -0, the additive identity. A sum
#: vectorizes the same (2**20 floats, 500 runs: 0.076 s either way).
SIGNED_SUM_C = """#pragma omp declare reduction(fl_add : float : omp_out += omp_in) initializer(omp_priv = -0.0f)
#pragma omp declare reduction(fl_add : double : omp_out += omp_in) initializer(omp_priv = -0.0)
"""


def helpers(flavor: Flavor) -> str:
    """Helper functions every kernel file starts with."""
    q, i = flavor.fn_prefix, flavor.int_type
    u = "uint64_t" if flavor.name == "c" else "unsigned long long"
    extra = (FAST_MATH_C + SIGNED_SUM_C if flavor.name == "c" else "") + CHECKED_INDEX[flavor.name] + half_helpers(q) \
        + codec_helpers(q) + bitcast_helpers(q)
    expf = "fl_expf" if flavor.name == "c" else "expf"
    return extra + f"""{q} {i} fl_fdiv({i} a, {i} b) {{ {i} q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }}
{q} {i} fl_fmod({i} a, {i} b) {{ {i} r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }}
{q} {i} fl_imin({i} a, {i} b) {{ return a < b ? a : b; }}
{q} {i} fl_ineg({i} a) {{ return ({i})(0ULL - (unsigned long long)a); }}
{q} {i} fl_idiv({i} a, {i} b) {{ return b == 0 ? 0 : b == -1 ? fl_ineg(a) : a / b; }}
{q} {i} fl_ifdiv({i} a, {i} b) {{
  if (b == 0 || b == -1) return b ? fl_ineg(a) : 0;
  {i} q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}}
{q} {i} fl_imod({i} a, {i} b) {{
  if (b == 0 || b == -1) return 0;
  {i} r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}}
{q} {i} fl_imax({i} a, {i} b) {{ return a > b ? a : b; }}
{q} {i} fl_shl({i} a, {i} s, int bits, int is_signed) {{
  if (s < 0 || s >= bits) return 0;
  unsigned long long u = (unsigned long long)a << s, top = 64 - bits;
  /* keep `bits` bits, sign-extended for a signed type: what the narrower type would hold */
  u = (u << top) >> top;
  return is_signed && bits < 64 && (u >> (bits - 1)) ? ({i})(u | (~0ULL << (bits - 1))) : ({i})u;
}}
{q} {i} fl_shr({i} a, {i} s, int bits) {{ return (s < 0 || s >= bits) ? (a < 0 ? -1 : 0) : a >> s; }}
{q} {i} fl_iwrap({i} a, {i} n) {{ return a < 0 ? a + n : a; }}
{q} {i} fl_itmod({i} a, {i} b) {{ return (b == 0 || b == -1) ? 0 : a % b; }}
{q} {i} fl_iabs({i} a) {{ return a < 0 ? fl_ineg(a) : a; }}
{q} {u} fl_udiv({u} a, {u} b) {{ return b == 0 ? 0 : a / b; }}
{q} {u} fl_umod({u} a, {u} b) {{ return b == 0 ? 0 : a % b; }}
{q} {u} fl_umax({u} a, {u} b) {{ return a > b ? a : b; }}
{q} {u} fl_umin({u} a, {u} b) {{ return a < b ? a : b; }}
{q} {u} fl_ushr({u} a, {i} s, int bits) {{ return (s < 0 || s >= bits) ? 0 : a >> s; }}
{q} {u} fl_f2u64(double v) {{
  /* a float as uint64, defined where C leaves it undefined, as x86 (so NumPy and
     onnxruntime) convert: below 2**63 through int64 (NaN and values below -2**63 give 2**63),
     from 2**63 on as v - 2**63 with the top bit set (infinity, 2**64 and up give 0) */
  if (v >= 9223372036854775808.0) {{
    double w = v - 9223372036854775808.0;
    return w < 9223372036854775808.0 ? (({u})({i})w ^ 0x8000000000000000ULL) : 0;
  }}
  return v >= -9223372036854775808.0 ? ({u})({i})v : 0x8000000000000000ULL;
}}
{q} unsigned int fl_f2u32(double v) {{
  /* the same at 32 bits, as onnxruntime and NumPy convert a float32 or float64 (x86's
     unsigned conversion through int32): NaN and values below -2**31 give 2**31, from 2**31
     on v - 2**31 with the top bit set (infinity, 2**32 and up give 0) */
  if (v >= 2147483648.0) {{
    double w = v - 2147483648.0;
    return w < 2147483648.0 ? ((unsigned int)(int)w ^ 0x80000000u) : 0u;
  }}
  return v > -2147483649.0 ? (unsigned int)(int)v : 0x80000000u;
}}
{q} float fl_maxf(float a, float b) {{ return (a > b || a != a) ? a : b; }}
{q} float fl_minf(float a, float b) {{ return (a < b || a != a) ? a : b; }}
{q} double fl_maxd(double a, double b) {{ return (a > b || a != a) ? a : b; }}
{q} double fl_mind(double a, double b) {{ return (a < b || a != a) ? a : b; }}
{q} float fl_sigmoidf(float x) {{ float e = {expf}(-fabsf(x)); return x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e); }}
{q} double fl_sigmoidd(double x) {{ double e = exp(-fabs(x)); return x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e); }}
{q} float fl_fmodf(float a, float b) {{ return a - b * floorf(a / b); }}
{q} double fl_fmodd(double a, double b) {{ return a - b * floor(a / b); }}
"""


def sanitize(name: str, limit: int = 40) -> str:
    """A graph name made safe for a C comment or identifier suffix: [A-Za-z0-9_] only."""
    out = "".join(ch if (ch.isascii() and (ch.isalnum() or ch == "_")) else "_" for ch in str(name))
    return out[:limit] or "_"


def integer_literal(value: int) -> str:
    """An exact C literal of an int64 or uint64 value: a uint64 past INT64_MAX takes ULL (an
    LL literal that large does not exist), and INT64_MIN is written as an expression."""
    if value >= 1 << 63:
        return f"{value}ULL"
    if value == -(1 << 63):
        return "(-9223372036854775807LL - 1)"
    text = f"{value}LL" if abs(value) >= 1 << 31 else str(value)
    return f"({text})" if value < 0 else text


def float_literal(value: float, dtype: str, flavor: Flavor) -> str:
    """An exact literal of ``value`` rounded to ``dtype`` (float32 or float64)."""
    single = dtype == "float32"
    v = float(np.float32(value)) if single else float(value)
    if math.isnan(v):
        return flavor.nan_f if single else flavor.nan_d
    if math.isinf(v):
        lit = flavor.inf_f if single else flavor.inf_d
        return f"(-{lit})" if v < 0 else lit
    text = f"{v:.9g}" if single else f"{v:.17g}"
    if not any(ch in text for ch in ".en"):
        text += ".0"
    return f"{text}f" if single else text


#: past this a folded constant is infinite in any float type generated code uses
_FLOAT_MAX = sp.Float("1.8e308")


def _fold_numbers(expr: sp.Basic) -> sp.Basic:
    """Replace constant sub-expressions (pi, sqrt(2), 1/3...) by Floats, keep integers.

    Folding goes bottom up: a node is evaluated once its arguments are numbers, so each
    evaluation is one operation on Floats, and a value beyond the float range is infinity
    (what the generated code computes), which stops folding there. Evaluating a constant
    tower such as exp(exp(...exp(0)...)) whole made sympy work with numbers of
    astronomically many digits, and never finish."""
    if isinstance(expr, (sp.Integer, sp.Float, NegativeZero)) or expr in (sp.oo, -sp.oo, sp.nan, sp.zoo):
        return expr
    if isinstance(expr, sp.Rational):
        return sp.Float(expr, 30)
    if isinstance(expr, sp.Symbol) or isinstance(expr, (sp.logic.boolalg.BooleanAtom,)):
        return expr
    if not expr.args:
        if expr.is_number:
            return sp.Float(expr.evalf(30), 30)
        return expr
    args = [_fold_numbers(a) for a in expr.args]  # once: each level's arguments are folded once
    if _inexact_reciprocal(expr, args):
        # x / c stays a division: x * (1 / c) rounds twice and can miss the quotient by an ulp
        return sp.Pow(args[0], -1, evaluate=False)
    if expr.is_number and not isinstance(expr, (sp.Piecewise,)) and not expr.is_Relational:
        if all(isinstance(a, (sp.Integer, sp.Float)) for a in args):
            try:
                value = expr.func(*args).evalf(30)
            except (ArithmeticError, ValueError, TypeError):  # 0.0 ** -1: left for C to divide, IEEE style
                value = sp.nan
            if value.is_real and value.is_finite:
                if abs(value) > _FLOAT_MAX:
                    return sp.oo if value > 0 else -sp.oo
                return sp.Float(value, 30)
    if isinstance(expr, sp.Pow) and isinstance(expr.args[1], (sp.Integer, sp.Rational)):
        return sp.Pow(args[0], expr.args[1], evaluate=False)
    if isinstance(expr, sp.Piecewise):
        return sp.Piecewise(*[(_fold_numbers(v), c if isinstance(c, sp.logic.boolalg.BooleanAtom)
                               else _fold_numbers(c)) for v, c in expr.args])
    if expr.is_Relational and any(a.is_number and a.has(sp.nan) for a in args):
        # a comparison with NaN is false, != true (IEEE); sympy refuses to build one
        return sp.true if isinstance(expr, sp.Ne) else sp.false
    try:
        return expr.func(*args, evaluate=False)
    except TypeError:
        return expr.func(*args)


def _inexact_reciprocal(expr: sp.Basic, args: list) -> bool:
    """Is ``expr`` 1 / c for a finite nonzero number c whose reciprocal is no power of two?"""
    if not (isinstance(expr, sp.Pow) and expr.args[1] == -1 and isinstance(args[0], (sp.Integer, sp.Float))):
        return False
    value = float(args[0])
    if value == 0 or not math.isfinite(value):
        return False
    return math.frexp(abs(value))[0] != 0.5


class IndexPrinter:
    """Integer expressions over loop variables with exact floor/mod semantics.

    A loaded index (:class:`CheckedIndex`) goes to ``checked(expr, printed index)``, which
    prints its check; without one it is only normalized (``fl_iwrap``), unchecked."""

    def __init__(self, symbol: Callable[[sp.Symbol], str] | None = None,
                 checked: Callable[[CheckedIndex, str], str] | None = None):
        self.symbol = symbol
        self.checked = checked

    def __call__(self, e) -> str:
        return self.p(as_expr(e))

    def p(self, e) -> str:
        if e is sp.true or e == sp.true:
            return "1"
        if e is sp.false or e == sp.false:
            return "0"
        if isinstance(e, sp.Integer):
            v = int(e)
            return f"{v}LL" if abs(v) >= 2**31 else str(v) if v >= 0 else f"({v})"
        if isinstance(e, sp.Symbol):
            return self.symbol(e) if self.symbol else e.name
        if isinstance(e, sp.Add):
            terms = [self.p(a) for a in e.as_ordered_terms()]
            return "(" + " + ".join(terms) + ")"
        if isinstance(e, sp.Mul):
            coeff, rest = e.as_coeff_Mul()
            if not coeff.is_Integer:
                raise CodegenError(f"index expression {e} is not integral")
            factors = [self.p(f) for f in sp.Mul.make_args(rest)]
            if coeff != 1:
                factors.insert(0, self.p(coeff))
            return "(" + " * ".join(factors) + ")"
        if isinstance(e, sp.floor):
            num, den = sp.fraction(sp.together(e.args[0]))
            num = sp.expand(num)
            if not den.is_Integer or den <= 0:
                raise CodegenError(f"index expression {e} divides by a non-constant")
            if den == 1:
                return self.p(num)
            if num.is_nonnegative:
                return f"({self.p(num)} / {int(den)})"
            return f"fl_fdiv({self.p(num)}, {int(den)})"
        if isinstance(e, sp.ceiling):
            return f"(-{self.p(sp.floor(-e.args[0]))})"
        if isinstance(e, sp.Mod):
            a, m = e.args
            if not m.is_Integer or m <= 0:
                raise CodegenError(f"index expression {e} takes a non-constant modulus")
            if a.is_nonnegative:
                return f"({self.p(a)} % {int(m)})"
            return f"fl_fmod({self.p(a)}, {int(m)})"
        if isinstance(e, (sp.Min, sp.Max)):
            fn = "fl_imin" if isinstance(e, sp.Min) else "fl_imax"
            parts = [self.p(a) for a in e.args]
            out = parts[0]
            for q in parts[1:]:
                out = f"{fn}({out}, {q})"
            return out
        if isinstance(e, sp.Piecewise):
            return self.piecewise(e)
        if isinstance(e, CheckedIndex):
            value = self.p(e.args[0])
            if self.checked is not None:
                return self.checked(e, value)
            return f"fl_iwrap({value}, {self.p(e.args[1])})"
        rel = {sp.Eq: "==", sp.Ne: "!=", sp.Lt: "<", sp.Le: "<=", sp.Gt: ">", sp.Ge: ">="}
        for kind, op in rel.items():
            if isinstance(e, kind):
                return f"({self.p(e.args[0])} {op} {self.p(e.args[1])})"
        if isinstance(e, sp.And):
            return "(" + " && ".join(self.p(a) for a in e.args) + ")"
        if isinstance(e, sp.Or):
            return "(" + " || ".join(self.p(a) for a in e.args) + ")"
        if isinstance(e, sp.Not):
            return f"(!{self.p(e.args[0])})"
        raise CodegenError(f"cannot print index expression {e}")

    def loop_cond(self, e) -> str:
        """A loop test in OpenMP's canonical form (``var <= bound``, no outer parentheses)."""
        rel = {sp.Lt: "<", sp.Le: "<=", sp.Gt: ">", sp.Ge: ">="}
        for kind, op in rel.items():
            if isinstance(e, kind):
                return f"{self.p(e.args[0])} {op} {self.p(e.args[1])}"
        return self.p(e)

    def piecewise(self, e) -> str:
        out = "0"  # a Piecewise has at least one piece
        for value, cond in reversed(e.args):
            if cond is sp.true or cond == sp.true:
                out = self.p(value)
            else:
                out = f"({self.p(cond)} ? {self.p(value)} : {out})"
        return out


def _integral(e) -> bool:
    """A finite number with an integer value (clip's bounds come as floats)."""
    return isinstance(e, (sp.Integer, sp.Float)) and e.is_finite and float(e).is_integer()


def _clamped(value: int, unsigned64: bool) -> int:
    """``value`` within the range of the 64-bit type an integer max or min computes in
    (a bound of 2**64 - 1 arrives as the float 2**64)."""
    low, high = (0, (1 << 64) - 1) if unsigned64 else (-(1 << 63), (1 << 63) - 1)
    return min(max(value, low), high)


def _is_reciprocal(e) -> bool:
    return isinstance(e, sp.Pow) and isinstance(e.exp, sp.Integer) and int(e.exp) < 0


class SymbolText(Protocol):
    """The C text of a symbol (a load, a local). A Protocol rather than a Callable, so that
    mypy accepts a lambda with defaults (``lambda sym, loads=loads: ...``)."""

    def __call__(self, sym: sp.Symbol, /) -> str: ...


class ValuePrinter(C99CodePrinter):
    """Float bodies: sympy's C99 printer with float32 aliases and our own literals."""

    def __init__(self, dtype: str, flavor: Flavor, symbol: SymbolText,
                 integer: Callable[[sp.Symbol], bool] | None = None,
                 unsigned64: Callable[[sp.Symbol], bool] | None = None):
        settings = {"type_aliases": {real: float32}} if dtype == "float32" else {}
        super().__init__(settings)
        self.fdtype = "float32" if dtype == "float32" else "float64"
        self.flavor = flavor
        self.symbol_fn = symbol
        #: does a symbol print as a C integer (a load of an integer array, a loop index)?
        self.integer_symbol = integer or (lambda s: False)
        #: does a symbol load uint64 (beyond int64_t, so divided, compared and shifted unsigned)?
        self.unsigned64_symbol = unsigned64 or (lambda s: False)
        self.index = IndexPrinter(symbol)

    def doprint(self, expr, assign_to=None):
        return super().doprint(_fold_numbers(as_expr(expr)), assign_to)

    @property
    def _single(self) -> bool:
        return self.fdtype == "float32"

    def _print(self, expr, **kwargs):
        if isinstance(expr, sp.Basic) and not isinstance(expr, (sp.Symbol, sp.Number)) and expr.free_symbols \
                and not expr.is_Relational and not isinstance(expr, sp.logic.boolalg.Boolean) \
                and expr.is_integer and all(s.name[0] == "c" for s in expr.free_symbols):
            return self.index(expr)  # integer index arithmetic inside a value
        return super()._print(expr, **kwargs)

    def _print_Symbol(self, expr):
        return self.symbol_fn(expr)

    def _print_Integer(self, expr):
        return float_literal(int(expr), self.fdtype, self.flavor)

    def _print_Float(self, expr):
        return float_literal(float(expr), self.fdtype, self.flavor)

    def _print_Rational(self, expr):
        return float_literal(float(expr), self.fdtype, self.flavor)

    def _print_Infinity(self, expr):
        return float_literal(float("inf"), self.fdtype, self.flavor)

    def _print_NegativeInfinity(self, expr):
        return float_literal(float("-inf"), self.fdtype, self.flavor)

    def _print_NaN(self, expr):
        return float_literal(float("nan"), self.fdtype, self.flavor)

    def _print_NumberSymbol(self, expr):
        return float_literal(float(expr), self.fdtype, self.flavor)

    _print_Pi = _print_NumberSymbol
    _print_Exp1 = _print_NumberSymbol

    def _print_Pow(self, expr):
        base, exp = expr.args
        b = self.parenthesize(base, 50)
        one = float_literal(1.0, self.fdtype, self.flavor)
        sqrt = "sqrtf" if self._single else "sqrt"
        if exp == sp.Rational(1, 2):
            return f"{sqrt}({self._print(base)})"
        if exp == sp.Rational(-1, 2):
            return f"({one} / {sqrt}({self._print(base)}))"
        if isinstance(exp, sp.Float) and float(exp) == 0.5:
            # pow(x, 0.5) is sqrt(x) but at -inf (+inf, not NaN) and -0 (+0: the "+ 0");
            # GCC's vectorizer rewrites powf(x, 0.5f) as sqrtf(x) and loses that, so print it ourselves
            x = f"({self._print(base)})"
            inf = float_literal(math.inf, self.fdtype, self.flavor)
            return f"({x} == -{inf} ? {inf} : {sqrt}{x} + 0)"
        if isinstance(exp, sp.Float) and abs(float(exp)) in _ROOT_POWERS:
            return self._root_power(base, float(exp), sqrt, one)
        if _small_power(exp):
            n = abs(int(exp))
            if n == 0:
                return one
            prod = "*".join([b] * n)
            return f"({prod})" if exp > 0 else f"({one} / ({prod}))"
        pow_fn = "powf" if self._single else "pow"
        return f"{pow_fn}({self._print(base)}, {self._print(exp)})"

    def _root_power(self, base, exp: float, sqrt: str, one: str) -> str:
        # x**0.75 as sqrt(x) * sqrt(sqrt(x)), which vectorizes where powf stays a call per
        # element (LRN's (bias + alpha/size * sum) ** -beta: zfnet512's first LRN ran
        # 3.6-3.9 ms with powf); within 2 ulp. pow's special values kept: -inf gives +inf
        # (or +0 for a negative power), -0 gives +0 (the "+ 0" turns a root's -0 into +0)
        x = f"({self._print(base)})"
        rq = f"{sqrt}({sqrt}{x})"
        magnitude = {0.25: f"({rq} + 0)", 0.75: f"({sqrt}{x} * {rq})", 1.5: f"({x} * {sqrt}{x})"}[abs(exp)]
        value = magnitude if exp > 0 else f"({one} / {magnitude})"
        if exp == -1.5:  # x * sqrt(x) overflows where x ** -1.5 is still a subnormal
            value = f"(({one} / {x}) * ({one} / {sqrt}{x}))"
        inf = float_literal(math.inf, self.fdtype, self.flavor)
        at_minus_inf = inf if exp > 0 else float_literal(0.0, self.fdtype, self.flavor)
        return f"({x} == -{inf} ? {at_minus_inf} : {value})"

    def _minmax(self, expr, which):
        fn = f"fl_{which}{'f' if self._single else 'd'}"
        parts = [self._print(a) for a in expr.args]
        if self.c_integer(expr):  # exact: a double holds no int64 or uint64 beyond 2**53
            unsigned = self.unsigned64(expr)
            fn = f"fl_{'u' if unsigned else 'i'}{which}"
            parts = [self._print(a) if self.c_integer(a) else integer_literal(_clamped(int(a), unsigned))
                     for a in expr.args]
        out = parts[0]
        for q in parts[1:]:
            out = f"{fn}({out}, {q})"
        return out

    def _print_Max(self, expr):
        return self._minmax(expr, "max")

    def _print_Min(self, expr):
        return self._minmax(expr, "min")

    # ----- integer arithmetic: C's / and % trap on a zero divisor and on INT_MIN / -1 ----------
    def c_integer(self, e) -> bool:
        """Is ``e`` printed as a C integer expression? Numbers print as float literals, and
        functions return floats, so only integer loads and loop indices combined by +, -, *
        (and the integer helpers below) stay integers."""
        if isinstance(e, sp.Symbol):
            return self.integer_symbol(e)
        if isinstance(e, sp.Add):
            return all(self.c_integer(a) for a in e.args)
        if isinstance(e, sp.Mul):
            coeff, rest = e.as_coeff_Mul()
            return coeff in (1, -1) and all(self.c_integer(f) and not _is_reciprocal(f) for f in sp.Mul.make_args(rest))
        if isinstance(e, sp.Pow):
            return isinstance(e.exp, sp.Integer) and 0 < int(e.exp) <= 8 and self.c_integer(e.base)
        if isinstance(e, sp.Piecewise):  # clip's bounds: integer literals there
            values = [v for v, _ in e.args]
            return any(c is sp.true or c == sp.true for _, c in e.args) and any(self.c_integer(v) for v in values) \
                and all(self.c_integer(v) or _integral(v) for v in values)
        if isinstance(e, sp.floor):
            return self.integer_quotient(e.args[0]) is not None
        if isinstance(e, sp.Mod):
            return self.c_integer(e.args[0]) and self.c_integer(e.args[1])
        if isinstance(e, sp.sign):
            return self.c_integer(e.args[0])
        if isinstance(e, (sp.Max, sp.Min)):  # relu's 0 and clip's bounds: integer literals there
            return any(self.c_integer(a) for a in e.args) and all(self.c_integer(a) or _integral(a) for a in e.args)
        if isinstance(e, (Fmod, sp.Abs)):
            return all(self.c_integer(a) for a in e.args)
        return False

    def unsigned64(self, e) -> bool:
        """Does C integer expression ``e`` compute in uint64 (C's usual conversions: any
        uint64 operand makes the operation unsigned 64-bit)?"""
        return any(self.unsigned64_symbol(s) for s in as_expr(e).free_symbols)

    def integer_quotient(self, e):
        """(numerator, denominator) of ``e`` when C would divide integers, else None."""
        if not isinstance(e, sp.Mul):
            return None
        num, den = [], []
        for f in sp.Mul.make_args(e):
            (den if _is_reciprocal(f) else num).append(f)
        if not den:
            return None
        den = [sp.Pow(f.base, -f.exp) for f in den]
        numerator, denominator = sp.Mul(*num), sp.Mul(*den)
        if self.c_integer(numerator) and self.c_integer(denominator):
            return numerator, denominator
        return None

    def _print_Mul(self, expr):
        if any(f.is_number and f.has(sp.nan) for f in sp.Mul.make_args(expr)):
            return self._print_NaN(None)  # x * NaN and x / NaN are NaN (sympy cannot order NaN to print it)
        quotient = self.integer_quotient(expr)
        if quotient is not None:  # truncating, like C, but 0 for a zero divisor
            fn = "fl_udiv" if self.unsigned64(expr) else "fl_idiv"
            return f"{fn}({self._print(quotient[0])}, {self._print(quotient[1])})"
        return super()._print_Mul(expr)

    def _print_floor(self, expr):
        quotient = self.integer_quotient(expr.args[0])
        if quotient is not None:  # unsigned: the floor is the truncation
            fn = "fl_udiv" if self.unsigned64(expr) else "fl_ifdiv"
            return f"{fn}({self._print(quotient[0])}, {self._print(quotient[1])})"
        return self._print_Function(expr)

    def _print_Mod(self, expr):
        if self.c_integer(expr):
            fn = "fl_umod" if self.unsigned64(expr) else "fl_imod"
            return f"{fn}({self._print(expr.args[0])}, {self._print(expr.args[1])})"
        fn = "fl_fmodf" if self._single else "fl_fmodd"
        return f"{fn}({self._print(expr.args[0])}, {self._print(expr.args[1])})"

    def _print_Piecewise(self, expr):
        out = None
        exact = self.c_integer(expr)  # exact: a double holds no int64 or uint64 beyond 2**53
        for value, cond in reversed(expr.args):
            text = integer_literal(_clamped(int(value), self.unsigned64(expr))) \
                if exact and not self.c_integer(value) else self._print(value)
            if cond is sp.true or cond == sp.true:
                out = f"({text})"
            else:
                fallback = out if out is not None else self._print_NaN(None)
                out = f"(({self._print(cond)}) ? ({text}) : {fallback})"
        return out

    def _print_Relational(self, expr):
        if expr.lhs.is_integer and expr.rhs.is_integer:  # a bounds test on loop indices: exact in integers
            return self.index(expr)
        lhs, rhs = (self._compared(a, b) for a, b in ((expr.lhs, expr.rhs), (expr.rhs, expr.lhs)))
        return f"({lhs} {expr.rel_op} {rhs})"

    def _compared(self, side, other) -> str:
        """``side`` of a comparison: an integral number compared with a C integer as an
        exact integer literal where the 64-bit type holds it (as a double, 2**62 - 1 is 2**62)."""
        if _integral(side) and self.c_integer(other):
            value = int(side)
            if value == _clamped(value, self.unsigned64(other)):
                return integer_literal(value)
        return self._print(side)

    def _print_BooleanTrue(self, expr):
        return "1"

    def _print_BooleanFalse(self, expr):
        return "0"

    def _print_Function(self, expr):
        if isinstance(expr, Sigmoid):
            return f"fl_sigmoid{'f' if self._single else 'd'}({self._print(expr.args[0])})"
        if isinstance(expr, IsNan):  # only NaN differs from itself (no -ffast-math); C++ lacks a global isnan
            x = self._print(expr.args[0])
            return f"(({x}) != ({x}))"
        if isinstance(expr, IsInf):
            inf = float_literal(float("inf"), self.fdtype, self.flavor)
            return f"({'fabsf' if self._single else 'fabs'}({self._print(expr.args[0])}) == {inf})"
        if isinstance(expr, BitShift):
            a, s, bits, signed, left = expr.args
            if not left and not signed:  # logical: a uint64 from 2**63 on is negative as int64_t
                u = "uint64_t" if self.flavor.name == "c" else "unsigned long long"
                return f"fl_ushr((({u})({self._as_int(a)})), {self._as_int(s)}, {int(bits)})"
            a, s = self._as_int(a), self._as_int(s)
            if left:
                return f"fl_shl({a}, {s}, {int(bits)}, {int(bool(signed))})"
            return f"fl_shr({a}, {s}, {int(bits)})"
        if isinstance(expr, Bitwise):
            a, b = self._as_int(expr.args[0]), self._as_int(expr.args[1])
            return f"({a} {'&|^'[int(expr.args[2])]} {b})"
        if isinstance(expr, BitCast):
            source, target = (BITCAST_DTYPES[int(a)] for a in expr.args[1:])
            # an integer constant folded in prints exactly (a double literal rounds past 2**53)
            value = self._as_int(expr.args[0]) if isinstance(expr.args[0], sp.Integer) else self._print(expr.args[0])
            return bitcast_c(value, source, target, np.dtype(source).itemsize,
                             lambda dtype: ctype(dtype, self.flavor))
        if isinstance(expr, RoundHalfEven):  # rint rounds ties to even in the default rounding mode
            return f"{'rintf' if self._single else 'rint'}({self._print(expr.args[0])})"
        if isinstance(expr, Fmod):
            if self.c_integer(expr):  # truncated, like C's %, but 0 for a zero divisor
                fn = "fl_umod" if self.unsigned64(expr) else "fl_itmod"
                return f"{fn}({self._print(expr.args[0])}, {self._print(expr.args[1])})"
            a, b = (self._print(arg) for arg in expr.args)
            return f"{'fmodf' if self._single else 'fmod'}({a}, {b})"
        if isinstance(expr, Grouped):
            return f"({self._print(expr.args[0])})"
        if isinstance(expr, NegativeZero):
            return f"(-{float_literal(0.0, self.fdtype, self.flavor)})"
        if isinstance(expr, Float32Round):
            x = self._print(expr.args[0])
            return f"({x})" if self._single else f"((double)(float)({x}))"
        return super()._print_Function(expr)

    def _as_int(self, e) -> str:
        """``e`` as a C integer: an integer constant printed exactly (not as a double literal,
        which rounds beyond 2**53)."""
        i = self.flavor.int_type
        if isinstance(e, sp.Integer):
            v = int(e)
            if v >= 1 << 63:  # a uint64 literal: as int64_t its bits, which is what fl_shl shifts
                return f"(({i}){v}ULL)"
            return f"(({i}){v + 1}LL - 1)" if v == -(1 << 63) else f"(({i}){v}LL)"
        return f"(({i})({self._print(e)}))"

    def _fast(self, expr, name):
        if self._single and self.flavor.name == "c":
            return f"fl_{name}f({self._print(expr.args[0])})"
        return getattr(super(), f"_print_{name}")(expr)

    def _print_exp(self, expr):
        return self._fast(expr, "exp")

    def _print_erf(self, expr):
        return self._fast(expr, "erf")

    def _print_tanh(self, expr):
        return self._fast(expr, "tanh")

    def _print_Abs(self, expr):
        if self.c_integer(expr):  # exact, and |INT_MIN| wraps to INT_MIN as in NumPy
            x = self._print(expr.args[0])
            return x if self.unsigned64(expr) else f"fl_iabs({x})"
        return self._print_Function(expr)

    def _print_sign(self, expr):
        z = float_literal(0.0, self.fdtype, self.flavor)
        a = self._print(expr.args[0])
        if self.c_integer(expr.args[0]):
            return f"(({a} > {z}) - ({a} < {z}))"
        # NaN stays NaN (and -0 becomes +0), as in NumPy and ONNX
        one = float_literal(1.0, self.fdtype, self.flavor)
        return f"({a} > {z} ? {one} : ({a} < {z} ? -{one} : {a} + {z}))"

    def _print_ComplexInfinity(self, expr):
        raise CodegenError("a formula divides by a literal zero (sympy's zoo); IEEE division keeps the sign, "
                           "write the zero as a tensor instead")

    def _print_not_supported(self, expr):
        raise CodegenError(f"cannot print {type(expr).__name__} in generated code")

    def emptyPrinter(self, expr):
        raise CodegenError(f"cannot print {type(expr).__name__} in generated code")


__all__ = ["C", "CHECKED_INDEX", "CTYPES", "CUDA", "Flavor", "IndexPrinter", "ValuePrinter", "ctype", "float_literal",
           "helpers", "integer_literal", "sanitize"]
