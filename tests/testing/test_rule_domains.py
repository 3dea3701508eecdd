"""Rules checked beyond the ops' domains, and float32 breaks failing by default (issue 36):
an identity that holds for positives only, or a rewrite that makes a finite float32 result
infinite, fails `check` at default settings with a counterexample."""

from __future__ import annotations

import numpy as np
import pytest

from fusionlang.lang import parse_text
from fusionlang.testing.checker import check_rewrite
from fusionlang.testing.floatexact import breaks_finite

RULES = """\
import "std/ops.fuse"

rewrite sqrt_product: mul(sqrt(x), sqrt(y)) => sqrt(mul(x, y))
rewrite log_sum: add(log(x), log(y)) => log(mul(x, y))
rewrite exp_log: exp(log(x)) => x
rewrite div_back: r @ mul(div(x, y), y) where same_shape(r, x) => x
rewrite sqrt_square: sqrt(mul(x, x)) => abs(x)
rewrite hoist_scale:
    reduce_sum(mul(x, c)) {axes=a, keepdims=k, noop_with_empty_axes=n}
    where rank(c) == 0
    => mul(reduce_sum(x) {axes=a, keepdims=k, noop_with_empty_axes=n}, c)
"""

#: the inverse of hoist_scale, in a file of its own (the two together loop)
SINK = """\
import "std/ops.fuse"

rewrite sink_scale:
    mul(reduce_sum(x) {axes=a, keepdims=k, noop_with_empty_axes=n}, c)
    where rank(c) == 0
    => reduce_sum(mul(x, c)) {axes=a, keepdims=k, noop_with_empty_axes=n}
"""


@pytest.fixture(scope="module")
def rules():
    return parse_text(RULES, "domains.fuse")


def _check(rules, name):
    rule = next(r for r in rules.rewrites if r.name == name)
    return check_rewrite(rule, rules, seed=0)  # default settings


@pytest.mark.parametrize("name", ["sqrt_product", "log_sum", "exp_log", "div_back"])
def test_an_identity_of_positives_or_nonzeros_only_fails_with_a_counterexample(rules, name):
    check = _check(rules, name)
    assert check.status == "failed", check
    example = check.counterexample
    assert example is not None and "pattern side" in example.details()
    # the counterexample lies outside the domain the pattern's ops would have been drawn in
    drawn = np.concatenate([np.ravel(array) for _, array in example.leaves])
    assert np.any(drawn <= 0)


def test_a_rule_true_for_every_real_still_passes(rules):
    assert _check(rules, "sqrt_square").status in ("proved", "checked")


def test_a_rewrite_that_makes_a_finite_result_overflow_fails_by_default(rules):
    check = _check(rules, "hoist_scale")
    assert check.status == "failed"
    assert check.floats.breaks >= 1
    assert check.detail.startswith("the rewrite makes a finite float32 result infinite or NaN (")
    assert ", at x = f32" in check.detail


def test_its_inverse_only_loses_rounding_and_is_a_note():
    """Scaling each element before the sum never overflows where the scaled sum did not."""
    check = _check(parse_text(SINK, "sink.fuse"), "sink_scale")
    assert check.status in ("proved", "checked") and check.floats.breaks == 0
    assert "float32: not float-exact" in str(check) or check.floats.exact


def test_breaks_finite():
    inf, nan = np.inf, np.nan
    assert breaks_finite(np.array([1.0, 2.0]), np.array([1.0, inf]))
    assert breaks_finite(np.array([1.0]), np.array([nan]))
    assert not breaks_finite(np.array([inf, 2.0]), np.array([inf, 2.5]))  # rounding is not a break
    assert not breaks_finite(np.array([nan]), np.array([1.0]))  # finite where the pattern was not: better
    assert not breaks_finite(np.array([1, 2]), np.array([1, 2]))  # integers never break


ACCEPTED = """\
import "std/ops.fuse"

rewrite hoist_scale accepts overflow:
    reduce_sum(mul(x, c)) {axes=a, keepdims=k, noop_with_empty_axes=n}
    where rank(c) == 0
    => mul(reduce_sum(x) {axes=a, keepdims=k, noop_with_empty_axes=n}, c)
"""


def test_an_author_who_accepts_overflow_gets_a_note_not_a_failure():
    check = _check(parse_text(ACCEPTED, "accepted.fuse"), "hoist_scale")
    assert check.status in ("proved", "checked") and check.floats.breaks >= 1 and check.floats.accepted
    assert "(accepted: the rule says 'accepts overflow')" in str(check)


def test_the_shipped_folds_say_they_accept_overflow():
    from fusionlang.lang import load_rules

    simplify = load_rules("simplify")
    folds = {r.name: r.accepts for r in simplify.rewrites if r.name.startswith("fold_conv")}
    assert folds["fold_conv_bn"] == folds["fold_conv_scale"] == frozenset({"overflow"})
    assert folds["fold_conv_shift"] == frozenset()  # a shift adds, and accepts nothing
