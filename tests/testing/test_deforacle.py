"""A compound def checked against its oracles: a wrong def fails at the def itself, at
its file:line:col, naming the oracle it disagrees with."""

from __future__ import annotations

import textwrap

from fusionlang.lang import parse_text
from fusionlang.testing import check_rules
from fusionlang.testing.checker import rule_names

BODY = "    ms = {reduce}(x * x) {{axes=[-1], keepdims=1}}\n    return x / sqrt(ms + epsilon)\n"
ORACLE = textwrap.dedent("""\
    oracle {
        return x * rsqrt(reduce_mean(x * x) {axes=[-1], keepdims=1} + epsilon)
    }
    """)


def _def(reduce="reduce_mean", oracles=ORACLE):
    return "\n\ndef rms(x; epsilon=0.000001) {\n" + BODY.format(reduce=reduce) + "}\n" + oracles


def _check(text):
    return check_rules(parse_text(text, "defs.fuse"), max_examples=20, kinds=("def",)).find("rms", "def")


def test_a_def_that_agrees_with_its_oracles_is_checked():
    check = _check(_def(oracles=ORACLE + "oracle ([[3.0, 4.0]]) {epsilon=0.0} => [[0.8485281, 1.1313708]]\n"))
    assert check.status == "checked" and check.where == "defs.fuse:3:1"
    assert check.detail == "agrees with 1 oracle body, 1 test vector" and check.instances > 1


def test_a_wrong_body_fails_at_the_def_naming_the_oracle():
    check = _check(_def(reduce="reduce_sum"))
    assert check.status == "failed" and check.where == "defs.fuse:3:1"
    assert check.detail.startswith("the def differs from the oracle at defs.fuse:7:1: ")
    assert str(check).startswith("defs.fuse:3:1: def rms: failed\n")


def test_a_wrong_test_vector_fails_at_the_def_naming_the_vector():
    check = _check(_def(oracles="oracle ([[3.0, 4.0]]) {epsilon=0.0} => [[0.6, 0.8]]\n"))
    assert check.status == "failed"
    assert check.detail.startswith("the def differs from the test vector at defs.fuse:7:1: ")
    assert "expected 0.8, got 1.131371" in check.detail


def test_only_defs_with_oracles_are_checked_as_defs():
    rules = parse_text(_def() + "\ndef plain(x) {\n    return x * 2\n}\n", "defs.fuse")
    assert "rms" in rule_names(rules, ("def",)) and "plain" not in rule_names(rules, ("def",))
