"""Scalar formula evaluation: the vectorized erf, and exact integer index arithmetic."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from fusionlang.ops.access import i_sym
from fusionlang.ops.scalar import evaluate, np_erf


def test_erf_matches_math_erf_in_double():
    x = np.concatenate([np.linspace(-7, 7, 20001), [0.0, -0.0, 1e-300, 0.99999, 1.0, 3.9999, 4.0, 6.0]])
    want = np.array([math.erf(v) for v in x])
    got = np_erf(x)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=4e-15, atol=0)


def test_erf_in_single_is_within_one_ulp():
    x = np.linspace(-6, 6, 40001).astype(np.float32)
    want = np.array([math.erf(v) for v in x.astype(np.float64)]).astype(np.float32)
    got = np_erf(x)
    assert got.dtype == np.float32
    assert np.max(np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32))) <= 1


def test_erf_special_values_and_shapes():
    got = np_erf(np.array([np.inf, -np.inf, np.nan, -0.0]))
    assert got[0] == 1 and got[1] == -1 and np.isnan(got[2]) and math.copysign(1, got[3]) == -1
    assert np_erf(np.float32(0.5)).shape == ()
    assert np_erf(np.array([1, 2])).dtype == np.float64


@given(st.integers(0, 200), st.integers(0, 200), st.integers(2, 13))
def test_floor_of_rational_sums_is_exact(a, b, d):
    # sympy writes floor((2*i0 + i1)/d) as floor(2*i0/d + i1/d)
    expr = sp.floor((2 * i_sym(0) + i_sym(1)) / d)
    env = {"i0": np.array([a]), "i1": np.array([b])}
    assert int(evaluate(expr, env, np.float64)[0]) == (2 * a + b) // d
    assert int(evaluate(sp.ceiling((2 * i_sym(0) + i_sym(1)) / d), env, np.float64)[0]) == -(-(2 * a + b) // d)
    assert int(evaluate(sp.Mod(i_sym(0) + sp.floor(i_sym(1) / d), 7), env, np.float64)[0]) == (a + b // d) % 7


@pytest.mark.parametrize("value", [-7.5, -0.5, 0.0, 2.25])
def test_floor_of_non_integer_values_still_works(value):
    x = sp.Symbol("x")
    assert evaluate(sp.floor(x / 2), {"x": np.array(value)}, np.float64) == math.floor(value / 2)
