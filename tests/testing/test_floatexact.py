"""Float-exactness: proofs hold over the reals; the float32 verdict says whether a rewrite
also keeps float32 results, from instances at stressing magnitudes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fusionlang.lang import parse_text
from fusionlang.testing.checker import check_rewrite
from fusionlang.testing.floatexact import exact_difference

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
