"""Coverage by construction (issue 36): instances of rules that reuse a bound value, slice
with attribute variables, or guard a conv's attributes with `%` are built to match, not
hoped for; a wrong twin of each still fails."""

from __future__ import annotations

import pytest

from fusionlang.lang import parse_text
from fusionlang.testing.checker import check_rewrite, run_property
from fusionlang.testing.instances import rewrite_instance

RULES = """\
import "std/ops.fuse"

rewrite softmax_recognized:
    r @ div(e @ exp(x), reduce_sum(e) {axes=[-1], keepdims=1}) where same_shape(r, x) => softmax(x) {axis=-1}

rewrite halves:
    concat(slice(x) {starts=s0, ends=e0, axes=[-1], steps=[1]},
           slice(x) {starts=s1, ends=e1, axes=[-1], steps=[1]}) {axis=-1}
    where s0[0] == 0 and e0[0] == s1[0] and e1[0] >= dim(x, -1)
    => x

# the second half may stop short of the end: not the whole of x
rewrite halves_wrong:
    concat(slice(x) {starts=s0, ends=e0, axes=[-1], steps=[1]},
           slice(x) {starts=s1, ends=e1, axes=[-1], steps=[1]}) {axis=-1}
    where s0[0] == 0 and e0[0] == s1[0]
    => x

rewrite even_groups:
    r @ mul(c @ conv(x, w) {group=g, ..attrs}, 1) where g % 2 == 0 and same_shape(r, c)
    => conv(x, w) {group=g, ..attrs}

rewrite rms_recognized:
    r @ mul(div(x, sqrt(add(reduce_mean(mul(x, x)) {axes=[-1], keepdims=1}, eps))), g)
    where const(eps) and is_scalar(eps) and rank(g) == 1 and dim(g, 0) == dim(x, -1) and same_shape(r, x)
    => rms_norm(x, g) {axis=-1, epsilon=value(eps)}
"""


@pytest.fixture(scope="module")
def rules():
    return parse_text(RULES, "cover.fuse")


def _rule(rules, name):
    return next(r for r in rules.rewrites if r.name == name)


def _instances(rules, name, count=20):
    found = []

    def trial(draw):
        found.append(rewrite_instance(draw, _rule(rules, name), rules))

    run_property(trial, max_examples=count, seed=0)
    return found


def test_a_reused_bound_value_is_built_once(rules):
    instances = _instances(rules, "softmax_recognized")
    assert instances
    for instance in instances:
        ops = [n.op for n in instance.graph.nodes]
        assert ops.count("exp") == 1 and [leaf.var for leaf in instance.leaves] == ["x"]


def test_slice_attributes_are_solved_from_the_guard(rules):
    instances = _instances(rules, "halves")
    assert instances
    for instance in instances:
        first, second = [n for n in instance.graph.nodes if n.op == "slice"]
        assert first.attrs["starts"][0] == 0 and first.attrs["ends"][0] == second.attrs["starts"][0]


def test_a_modulo_guard_on_a_conv_attribute_is_met(rules):
    instances = _instances(rules, "even_groups")
    assert instances
    assert all(n.attrs["group"] % 2 == 0 for i in instances for n in i.graph.nodes if n.op == "conv")


@pytest.mark.parametrize("name", ["softmax_recognized", "halves", "even_groups", "rms_recognized"])
def test_rules_that_drew_no_instance_are_checked_at_default_settings(rules, name):
    check = check_rewrite(_rule(rules, name), rules)
    assert check.status in ("checked", "proved") and check.instances >= 60, str(check)


def test_the_wrong_slice_rule_still_fails(rules):
    check = check_rewrite(_rule(rules, "halves_wrong"), rules)
    assert check.status == "failed" and check.counterexample is not None, str(check)
