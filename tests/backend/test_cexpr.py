"""Expression printing: exact literals, floor semantics for indices, float bodies, names."""

from __future__ import annotations

import ctypes
import functools
import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from fusionlang.backend.ccompile import build_library, load_library
from fusionlang.backend.cexpr import C, CUDA, IndexPrinter, ValuePrinter, _fold_numbers, float_literal, helpers, sanitize
from fusionlang.ops.scalar import Sigmoid, evaluate


@settings(max_examples=300)
@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_float32_literals_round_trip_exactly(value):
    text = float_literal(value, "float32", C)
    assert text.endswith("f")
    assert np.float32(float(text[:-1])) == np.float32(value)


@settings(max_examples=100)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float64_literals_round_trip_exactly(value):
    assert float(float_literal(value, "float64", C)) == value


def test_inf_and_nan_literals():
    assert float_literal(math.inf, "float32", C) == "INFINITY"
    assert float_literal(-math.inf, "float32", C) == "(-INFINITY)"
    assert float_literal(math.nan, "float32", C) == "NAN"
    assert float_literal(math.inf, "float32", CUDA) == "__int_as_float(0x7f800000)"
    assert "0x7ff0000000000000" in float_literal(math.inf, "float64", CUDA)


def test_sanitize_keeps_only_identifier_characters():
    assert sanitize('a*/ "b"\n') == "a____b__"
    assert sanitize("") == "_"
    assert sanitize("ünïcode") == "_n_code"


A = sp.Symbol("c0", integer=True)
N = sp.Symbol("c1", integer=True, nonnegative=True)
INDEX_EXPRS = [
    sp.floor((A - 7) / 3),
    sp.Mod(A - 5, 4),
    sp.floor(N / 2) + sp.Mod(N, 3),
    sp.floor((2 * A + 1) / 3) * 5 - sp.Mod(-A, 7),
    sp.Max(A, 3) - sp.Min(A, -2),
    sp.ceiling(A / 4),
    sp.Piecewise((A + 1, A > 0), (-A, True)),
]


def test_index_printer_has_floor_semantics_in_c():
    printer = IndexPrinter()
    body = "\n".join(f"int64_t e{k}(int64_t c0, int64_t c1) {{ return {printer(e)}; }}"
                     for k, e in enumerate(INDEX_EXPRS))
    lib = load_library(build_library(["#include <stdint.h>\n" + helpers(C) + body]))
    for k, e in enumerate(INDEX_EXPRS):
        fn = getattr(lib, f"e{k}")
        fn.restype = ctypes.c_int64
        fn.argtypes = [ctypes.c_int64, ctypes.c_int64]
        for a in range(-13, 14):
            n = abs(a)
            want = int(e.subs({A: a, N: n}))
            assert fn(a, n) == want, (e, a)


def test_index_printer_uses_plain_division_only_when_non_negative():
    printer = IndexPrinter()
    assert printer(sp.floor(N / 2)) == "(c1 / 2)"
    assert "fl_fdiv" in printer(sp.floor(A / 2))
    assert "fl_fmod" in printer(sp.Mod(A, 2))


X = sp.Symbol("x")
VALUE_EXPRS = [
    Sigmoid(X),
    sp.Piecewise((X, X >= 0), (sp.Float(0.01) * X, True)),
    X ** 3 - 1 / sp.sqrt(sp.Abs(X) + 1) + X ** -2,
    sp.erf(X / sp.sqrt(2)) * sp.pi,
    sp.Max(X, 0) + sp.Min(X, sp.Rational(1, 3)),
    sp.tanh(X) * sp.exp(-X) + sp.sign(X),
    sp.Mod(X, sp.Float(0.75)),
    sp.log(1 + sp.exp(X)) + sp.floor(X) + sp.ceiling(X),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_value_printer_computes_what_the_formula_means(dtype):
    t = "float" if dtype == "float32" else "double"
    fns = []
    for k, e in enumerate(VALUE_EXPRS):
        printer = ValuePrinter(dtype, C, lambda s: s.name)
        fns.append(f"{t} v{k}({t} x) {{ return {printer.doprint(e)}; }}")
    src = "#include <stdint.h>\n#include <math.h>\n" + helpers(C) + "\n".join(fns)
    lib = load_library(build_library([src]))
    xs = np.array([-3.5, -1.0, -0.25, 0.0, 0.3, 1.0, 2.75], dtype=dtype)
    ctype_ = ctypes.c_float if dtype == "float32" else ctypes.c_double
    for k, e in enumerate(VALUE_EXPRS):
        fn = getattr(lib, f"v{k}")
        fn.restype = ctype_
        fn.argtypes = [ctype_]
        got = np.array([fn(float(x)) for x in xs], dtype=dtype)
        with np.errstate(all="ignore"):
            want = np.asarray(evaluate(e, {"x": xs}, np.dtype(dtype)), dtype=dtype)
        np.testing.assert_allclose(got, want, rtol=2e-5 if dtype == "float32" else 1e-12, atol=1e-6, err_msg=str(e))


def test_max_propagates_nan_like_numpy():
    src = "#include <stdint.h>\n#include <math.h>\n" + helpers(C) + \
        "float m(float a, float b) { return fl_maxf(a, b); }"
    lib = load_library(build_library([src]))
    lib.m.restype = ctypes.c_float
    lib.m.argtypes = [ctypes.c_float, ctypes.c_float]
    assert math.isnan(lib.m(math.nan, 1.0)) and math.isnan(lib.m(1.0, math.nan))
    assert lib.m(-1.0, 2.0) == 2.0


def test_fast_float32_erf_and_tanh_are_accurate():
    src = "#include <stdint.h>\n#include <math.h>\n" + helpers(C) + """
void both(const float* x, float* e, float* t, long n) { for (long i = 0; i < n; i++) { e[i] = fl_erff(x[i]); t[i] = fl_tanhf(x[i]); } }
"""
    lib = load_library(build_library([src]))
    x = np.concatenate([np.linspace(-9, 9, 200001, dtype=np.float32), np.float32([0, -0.0, 1e-30, 3e-4, 50, -50])])
    e, t = np.empty_like(x), np.empty_like(x)
    lib.both(*(ctypes.c_void_p(a.ctypes.data) for a in (x, e, t)), ctypes.c_long(x.size))
    want_e = np.array([math.erf(v) for v in x.astype(np.float64)])
    want_t = np.tanh(x.astype(np.float64))
    nz = want_e != 0
    assert np.max(np.abs(e[nz] - want_e[nz]) / np.abs(want_e[nz])) < 1e-6
    nz = want_t != 0
    assert np.max(np.abs(t[nz] - want_t[nz]) / np.abs(want_t[nz])) < 1e-6


def test_inline_float32_exp_is_within_three_ulp_with_exact_specials():
    src = "#include <stdint.h>\n#include <math.h>\n" + helpers(C) + """
void ex(const float* x, float* y, long n) { for (long i = 0; i < n; i++) y[i] = fl_expf(x[i]); }
"""
    lib = load_library(build_library([src]))
    bits = np.arange(0, 2**32, 997, dtype=np.uint64).astype(np.uint32)
    sampled = bits.view(np.float32)
    edges = np.float32([88.7228317, 88.7228394, 88.72, 88.38, -87.3365479, -87.34, -103.97, -103.98, -104.5,
                        1e-30, -1e-30, 0.5 * np.log(2), -0.5 * np.log(2), 1.0, -1.0])
    x = np.concatenate([sampled[np.isfinite(sampled) & (np.abs(sampled) < 120)], edges])
    y = np.empty_like(x)
    lib.ex(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data), ctypes.c_long(x.size))
    exact = np.exp(x.astype(np.float64))
    with np.errstate(over="ignore"):
        rounded = exact.astype(np.float32)
    finite = np.isfinite(rounded) & (rounded > 0)
    ulp = np.spacing(rounded[finite]).astype(np.float64)
    assert np.max(np.abs(y[finite] - exact[finite]) / ulp) < 3
    assert np.all(y[np.isinf(rounded)] == np.inf) and np.all(y[rounded == 0] == 0)
    specials = np.float32([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 200, -200, 3e38, -3e38])
    out = np.empty_like(specials)
    lib.ex(ctypes.c_void_p(specials.ctypes.data), ctypes.c_void_p(out.ctypes.data), ctypes.c_long(specials.size))
    np.testing.assert_array_equal(out, np.float32([np.inf, 0, np.nan, np.nan, 1, 1, np.inf, 0, np.inf, 0]))


def test_a_tower_of_constant_exponentials_folds_to_infinity_at_once():
    # whole-expression evaluation worked with numbers of astronomically many digits
    tower = sp.Integer(0)
    for _ in range(30):
        tower = sp.exp(tower, evaluate=False)
    folded = _fold_numbers(tower)
    assert sp.oo in folded.atoms() or folded == sp.oo
    assert float(_fold_numbers(sp.exp(sp.exp(sp.Integer(1), evaluate=False), evaluate=False))) == \
        pytest.approx(math.exp(math.e), rel=1e-15)


WHOLE_FLOAT_POWERS = (2.0, 3.0, 4.0, 8.0)
POWER_SPECIALS = np.float32([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 3e38, -3e38, 1e13, -1e13, 1e-40, -1e-40,
                             1e-15, -1e-15, 1.0, -1.0])


@functools.cache
def _compiled_powers():
    printer = ValuePrinter("float32", C, lambda s: s.name)
    bodies = [printer.doprint(X ** sp.Float(e)) for e in WHOLE_FLOAT_POWERS]
    fns = "".join(f"void p{k}(const float* xs, float* y, long n) {{ for (long i = 0; i < n; i++) {{ const float x = xs[i]; "
                  f"y[i] = {body}; }} }}\n" for k, body in enumerate(bodies))
    lib = load_library(build_library(["#include <stdint.h>\n#include <math.h>\n" + helpers(C) + fns]))
    return bodies, lib


@settings(max_examples=40)
@given(st.lists(st.floats(width=32), min_size=1, max_size=64))
def test_whole_float_powers_are_products_with_pows_values(values):
    # ONNX's Pow(x, 3.0) (GPT-2's tanh GELU): printed as products (a powf call per element
    # kept the GELU GEMM's epilogue from vectorizing), within 4 ulp of float32 pow, with
    # pow's NaN, infinities and signed zeros
    bodies, lib = _compiled_powers()
    assert not any("pow" in body for body in bodies), bodies
    x = np.concatenate([np.float32(values), POWER_SPECIALS])
    for k, e in enumerate(WHOLE_FLOAT_POWERS):
        y = np.empty_like(x)
        getattr(lib, f"p{k}")(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data), ctypes.c_long(x.size))
        with np.errstate(all="ignore"):
            exact = np.power(x.astype(np.float64), e)
            want = exact.astype(np.float32)
        np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
        np.testing.assert_array_equal(np.signbit(y), np.signbit(want))
        assert np.array_equal(y[np.isinf(want)], want[np.isinf(want)])
        finite = np.isfinite(want)
        assert np.all(np.abs(y[finite] - exact[finite]) <= 4 * np.spacing(np.abs(want[finite])).astype(np.float64))


#: the inline float32 functions' documented accuracy (cexpr.FAST_MATH_C), in ulps of the
#: correctly rounded result
FAST_ULPS = {"erf": 7.0, "tanh": 6.0, "exp": 3.0}
FAST_SPECIALS = np.float32([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 3e38, -3e38, 1e10, -1e10, 9.0109129,
                            9.02, -9.02, 7.9053111, 4.0, -4.0, 1e-45, -1e-45, 1e-40, -1e-40, 1.2e-38, -1.2e-38, 3e-4])


@functools.cache
def _fast_math_library():
    src = "#include <stdint.h>\n#include <math.h>\n" + helpers(C) + "".join(
        f"void {name}s(const float* x, float* y, long n) {{ for (long i = 0; i < n; i++) y[i] = fl_{name}f(x[i]); }}\n"
        for name in FAST_ULPS)
    return load_library(build_library([src]))


def _reference(name: str, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):  # signalling NaNs among the sampled bits
        xd = x.astype(np.float64)
        if name == "erf":
            return np.array([math.erf(v) if not math.isnan(v) else v for v in xd])
        return np.tanh(xd) if name == "tanh" else np.exp(xd)


def _assert_fast_math_accurate(x: np.ndarray) -> None:
    lib = _fast_math_library()
    for name, ulps in FAST_ULPS.items():
        y = np.empty_like(x)
        getattr(lib, f"{name}s")(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data), ctypes.c_long(x.size))
        exact = _reference(name, x)
        with np.errstate(over="ignore"):
            want = exact.astype(np.float32)
        np.testing.assert_array_equal(np.isnan(y), np.isnan(want), err_msg=name)
        number = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(y[number]), np.signbit(want[number]), err_msg=name)
        np.testing.assert_array_equal(y[np.isinf(want)], want[np.isinf(want)], err_msg=name)
        if name != "exp":  # past 9.0109 both round to +-1, and so do the clamped rationals
            np.testing.assert_array_equal(np.abs(y[np.abs(x) > 9.011]), 1, err_msg=f"{name} saturates exactly")
        finite = np.isfinite(want)
        if not finite.any():
            continue
        error = np.abs(y[finite] - exact[finite]) / np.spacing(np.abs(want[finite])).astype(np.float64)
        assert error.max() <= ulps, (name, float(error.max()), x[finite][np.argmax(error)])


def test_fast_float32_functions_over_the_whole_float32_range():
    # every 65521st float32 (65,550 of them, subnormals, huge values, inf and NaN
    # included) and the special values: erf, tanh and exp within their ulps, NaN where
    # NumPy's is, and the same infinities, signs (erf(-0) is -0) and exactly +-1 past 9.0109
    bits = np.arange(0, 2**32, 65521, dtype=np.uint64).astype(np.uint32)
    _assert_fast_math_accurate(np.concatenate([bits.view(np.float32), FAST_SPECIALS]))


@settings(max_examples=40)
@given(st.lists(st.floats(width=32), min_size=1, max_size=64))
def test_fast_float32_functions_on_any_float32(values):
    _assert_fast_math_accurate(np.float32(values))
