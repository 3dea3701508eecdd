"""The extreme values and the comparison the extreme-value tests rest on: a comparison
that let a zero's sign or a NaN through would pass every sweep."""

from __future__ import annotations

import numpy as np
import pytest

from fusionlang.testing.extremes import all_pairs, assert_same_numbers, edges, integer_edges


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_float_edges_hold_both_zeros_and_the_specials(dtype):
    e = edges(dtype).astype(np.float32)
    zeros = e[e == 0]
    assert sorted(np.signbit(zeros).tolist()) == [False, True]  # (a set of floats keeps one of them)
    assert np.isnan(e).sum() == 1 and np.isposinf(e).any() and np.isneginf(e).any()
    assert (np.abs(e[np.isfinite(e)]) == float(np.finfo(edges(dtype).dtype).max)).sum() == 2


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int64", "uint64"])
def test_integer_edges_hold_the_limits(dtype):
    info = np.iinfo(dtype)
    assert {int(info.min), int(info.max), 0, 1} <= set(integer_edges(dtype))
    assert edges(dtype).dtype == np.dtype(dtype)


def test_all_pairs_meet_once():
    a, b = all_pairs("int8")
    pairs = set(zip(a.ravel().tolist(), b.ravel().tolist()))
    assert len(pairs) == a.size == edges("int8").size ** 2


@pytest.mark.parametrize("got, want", [([-0.0], [0.0]), ([np.nan], [1.0]), ([np.inf], [65504.0]), ([1.01], [1.0])])
def test_a_sign_a_nan_an_infinity_or_a_value_apart_is_a_difference(got, want):
    with pytest.raises(AssertionError, match="at"):
        assert_same_numbers(np.float16(got), np.float16(want), "x")


def test_equal_numbers_pass_and_integers_must_be_equal():
    assert_same_numbers(np.float16([np.nan, -0.0, 1.0, -np.inf]), np.float16([np.nan, -0.0, 1.0, -np.inf]))
    assert_same_numbers(np.float32([1.0, 2.0]), np.float32([1.0, 2.0]), dtype="bfloat16")
    with pytest.raises(AssertionError, match=r"at \(1,\)"):
        assert_same_numbers(np.int64([1, 2]), np.int64([1, 3]), "x")
