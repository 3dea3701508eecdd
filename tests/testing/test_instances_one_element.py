"""Instances of a rule whose guard reads a constant as one number (``value(c) == 2``,
``size(eps) == 1``) are drawn with that constant a one-element tensor holding the number,
not rejected until a draw happens to make one: an RMSNorm recognizer in the pow/rsqrt
form T5 and Llama exports write got no instance at default settings (issue 36)."""

from __future__ import annotations

from fusionlang.lang import parse_text
from fusionlang.testing.checker import check_rewrite

RMS = """\
import "std/ops.fuse"

rewrite rms_pow:
    r @ mul(mul(x, rsqrt(add(reduce_mean(pow(x, c)) {axes=[-1], keepdims=1}, eps))), g)
    where value(c) == 2 and size(eps) == 1 and value(eps) > 0 and rank(x) >= 1
          and shape(g) == [dim(x, -1)] and shape(r) == shape(x)
    => rms_norm(x, g) {axis=-1, epsilon=value(eps)}

rewrite rms_pow_wrong_axis:
    r @ mul(mul(x, rsqrt(add(reduce_mean(pow(x, c)) {axes=[0], keepdims=1}, eps))), g)
    where value(c) == 2 and size(eps) == 1 and value(eps) > 0 and rank(x) >= 1
          and shape(g) == [dim(x, -1)] and shape(r) == shape(x)
    => rms_norm(x, g) {axis=-1, epsilon=value(eps)}
"""


def _check(name):
    rules = parse_text(RMS, "rms.fuse")
    return check_rewrite(next(r for r in rules.rewrites if r.name == name), rules)  # default settings


def test_an_rms_norm_recognizer_in_pow_form_is_checked_at_default_settings():
    check = _check("rms_pow")
    assert check.status == "checked" and check.instances >= 60, str(check)


def test_the_same_recognizer_reducing_the_wrong_axis_fails_with_a_counterexample():
    check = _check("rms_pow_wrong_axis")
    assert check.status == "failed" and "c = const f32[] 2." in str(check), str(check)
