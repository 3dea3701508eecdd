"""Float-exactness: proofs hold over the reals; the float32 verdict says whether a rewrite
also keeps float32 results, from instances at stressing magnitudes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fusionlang.lang import parse_text
from fusionlang.testing.checker import check_rewrite
from fusionlang.testing.floatexact import _abbreviated, exact_difference, loses_all_digits

RULES = """\
import "std/algebra.fuse"

rewrite cancel_add:
    r @ sub(add(x, y), y) where same_shape(r, x) => x

rewrite exp_ratio:
    div(exp(x), exp(y)) => exp(x - y)

rewrite drop_double_neg:
    neg(neg(x)) => x
"""


@pytest.fixture(scope="module")
def rules():
    return parse_text(RULES, "floats.fuse")


def _check(rules, name, **options):
    rule = next(r for r in rules.rewrites if r.name == name)
    return check_rewrite(rule, rules, max_examples=20, seed=0, **options)


@pytest.mark.parametrize("name", ["cancel_add", "exp_ratio"])
def test_identities_over_the_reals_are_not_float_exact(rules, name):
    check = _check(rules, name)
    assert check.status == "proved" and check.verdict().startswith("proved equal over the reals")
    assert check.floats.measured and not check.floats.exact and check.floats.error > 0
    assert str(check.floats).startswith(f"not float-exact: max error {check.floats.error:.3g} at x = f32")
    assert "float32: not float-exact" in str(check)


@pytest.mark.parametrize("name", ["cancel_add", "exp_ratio"])
def test_float_exact_mode_fails_them(rules, name):
    check = _check(rules, name, float_exact=True)
    assert check.status == "failed" and check.detail.startswith("not float-exact: max error")


def test_a_float_exact_rewrite_stays_proved(rules):
    check = _check(rules, "drop_double_neg", float_exact=True)
    assert check.status == "proved" and check.floats.exact
    assert str(check.floats) == f"float-exact ({check.floats.instances} stressed float32 instances)"


def test_exp_ratio_differs_by_overflow(rules):
    # exp(x) / exp(y) is inf / inf = NaN where exp(x - y) is finite
    assert math.isinf(_check(rules, "exp_ratio").floats.error)


def test_exact_difference():
    nan, inf = float("nan"), float("inf")
    assert exact_difference(np.array([1.0, nan, inf]), np.array([1.0, nan, inf])) == 0
    assert exact_difference(np.array([1.0, 2.0]), np.array([1.0, 2.5])) == 0.5
    assert math.isinf(exact_difference(np.array([nan]), np.array([1.0])))
    assert math.isinf(exact_difference(np.array([inf]), np.array([-inf])))


# ----- lost significant digits (issue 36) ---------------------------------------------------

LOSSES = """\
import "std/ops.fuse"

# -(x * y) as y - (x + 1) * y: at x = 1e-30, x + 1 is 1 and the result 0
rewrite via_one: r @ neg(mul(x, y)) where same_shape(r, x, y) => y - (x + 1) * y
rewrite via_one_accepted accepts cancellation: r @ neg(mul(x, y)) where same_shape(r, x, y) => y - (x + 1) * y
rewrite reassociate_sum: r @ sum(x, y, z) where same_shape(r, x, y, z) => x + (y + z)
"""


def _loss_check(name):
    rules = parse_text(LOSSES, "losses.fuse")
    return check_rewrite(next(r for r in rules.rewrites if r.name == name), rules)


def test_a_rewrite_that_loses_every_significant_digit_fails_by_default():
    check = _loss_check("via_one")
    assert check.status == "failed" and check.floats.lost >= 1 and check.floats.breaks == 0
    assert check.detail.startswith("the rewrite loses every significant digit of a float32 result the pattern "
                                   "computes accurately (relative error >= 1 against float64; ")
    assert ", at x = f32" in check.detail


def test_an_author_who_accepts_cancellation_gets_a_note():
    check = _loss_check("via_one_accepted")
    assert check.status == "proved" and check.floats.lost >= 1 and check.floats.accepted_lost
    assert "(accepted: the rule says 'accepts cancellation')" in str(check)


def test_reassociating_a_sum_only_rounds_and_stays_a_note():
    check = _loss_check("reassociate_sum")
    assert check.status == "proved" and check.floats.lost == 0 and not check.floats.exact


def test_loses_all_digits():
    f32, f64 = np.float32, np.float64
    reference = np.array([1e-30 * 2.0, 5.0], f64)
    assert loses_all_digits(np.array([2e-30, 5.0], f32), np.array([0.0, 5.0], f32), reference)
    # the pattern side was no better: not the rewrite's loss
    assert not loses_all_digits(np.array([0.0, 5.0], f32), np.array([0.0, 5.0], f32), reference)
    # a rounding error, even a large one, keeps a digit
    assert not loses_all_digits(np.array([2e-30, 5.0], f32), np.array([2e-30, 5.5], f32), reference)
    # below float32's normal range the reference itself is not float32's to keep
    assert not loses_all_digits(np.array([1e-39], f32), np.array([0.0], f32), np.array([1e-39], f64))
    assert not loses_all_digits(np.array([1.0]), np.array([0.0]), None)


def test_a_float32_line_shows_a_large_leaf_by_its_range_not_its_elements():
    big = np.full((4, 4, 3), 2.0, np.float32)
    big[0, 0, 0], big[1, 2, 0] = -1.5e38, np.inf
    assert _abbreviated(big) == "48 values in [-1.5e+38, 2], 1 not finite"
    assert _abbreviated(np.array([1.0, 1e8], np.float32)) == "[1.e+00, 1.e+08]"
    assert _abbreviated(np.array(0.5, np.float32)) == "0.5"
