"""A planted set of wrong rules (issue 36), each beside a correct twin: every wrong one
makes `fusionlang check FILE --rule NAME` fail at default settings with a
counterexample, every twin passes, so each test can fail both ways."""

from __future__ import annotations

import pytest

from fusionlang.cli import main
from fusionlang.lang import parse_text
from fusionlang.testing.checker import check_rewrite

PLANTED = """\
import "std/ops.fuse"

# axis off by one: the sum runs over the last axis, the softmax over the one before
rewrite softmax_axis_wrong: div(e @ exp(x), reduce_sum(e) {axes=[-1], keepdims=1}) => softmax(x) {axis=-2}
rewrite softmax_axis_right: div(e @ exp(x), reduce_sum(e) {axes=[-1], keepdims=1}) => softmax(x) {axis=-1}

# keepdims=0 with the bound value reused: the sums broadcast along the wrong axis
rewrite softmax_keepdims_wrong:
    r @ div(e @ exp(x), reduce_sum(e) {axes=[-1], keepdims=0}) where same_shape(r, x) => softmax(x) {axis=-1}
rewrite softmax_keepdims_right:
    r @ div(e @ exp(x), reduce_sum(e) {axes=[-1], keepdims=1}) where same_shape(r, x) => softmax(x) {axis=-1}

# broadcasting asymmetry: add broadcasts both ways, gemm's bias only into the product
rewrite matmul_bias_wrong:
    add(m @ matmul(a, b), c) where rank(a) == 2 and rank(b) == 2 and rank(c) <= 2 => gemm(a, b, c)
rewrite matmul_bias_right:
    r @ add(m @ matmul(a, b), c) where rank(a) == 2 and rank(b) == 2 and rank(c) <= 2 and same_shape(r, m)
    => gemm(a, b, c)

# epsilon inside the sqrt on one side, outside on the other
rewrite eps_sqrt_wrong: div(x, add(sqrt(v), eps)) => mul(x, rsqrt(add(v, eps)))
rewrite eps_sqrt_right: div(x, sqrt(add(v, eps))) => mul(x, rsqrt(add(v, eps)))

# a scale moves through relu only when it is positive
rewrite relu_scale_wrong: relu(mul(x, s)) where is_scalar(s) => mul(relu(x), s)
rewrite relu_scale_right: relu(mul(x, s)) where const(s) and is_scalar(s) and value(s) > 0 => mul(relu(x), s)

# hoisting a scale out of a sum: the unscaled sum can pass float32's largest value
rewrite hoist_scale_wrong:
    reduce_sum(mul(x, c)) {axes=a, keepdims=k, noop_with_empty_axes=n} where rank(c) == 0
    => mul(reduce_sum(x) {axes=a, keepdims=k, noop_with_empty_axes=n}, c)

# identities of positives only
rewrite sqrt_product_wrong: mul(sqrt(x), sqrt(y)) => sqrt(mul(x, y))
rewrite sqrt_square_right: sqrt(mul(x, x)) => abs(x)
rewrite log_sum_wrong: add(log(x), log(y)) => log(mul(x, y))
rewrite log_product_right: log(mul(exp(x), exp(y))) => x + y
"""

#: the twin of hoist_scale_wrong, in a file of its own (the two together loop): scaling each
#: element before the sum never overflows where the scaled sum did not
SINK = """\
import "std/ops.fuse"

rewrite sink_scale_right:
    mul(reduce_sum(x) {axes=a, keepdims=k, noop_with_empty_axes=n}, c) where rank(c) == 0
    => reduce_sum(mul(x, c)) {axes=a, keepdims=k, noop_with_empty_axes=n}
"""

WRONG = ["softmax_axis_wrong", "softmax_keepdims_wrong", "matmul_bias_wrong", "eps_sqrt_wrong", "relu_scale_wrong",
         "hoist_scale_wrong", "sqrt_product_wrong", "log_sum_wrong"]
RIGHT = ["softmax_axis_right", "softmax_keepdims_right", "matmul_bias_right", "eps_sqrt_right", "relu_scale_right",
         "sink_scale_right", "sqrt_square_right", "log_product_right"]


@pytest.fixture(scope="module")
def rules():
    return [parse_text(PLANTED, "planted.fuse"), parse_text(SINK, "sink.fuse")]


def _check(rule_sets, name):
    rules = next(rules for rules in rule_sets if any(r.name == name for r in rules.rewrites))
    rule = next(r for r in rules.rewrites if r.name == name)
    return check_rewrite(rule, rules)  # default settings: 60 examples, seed 0


@pytest.mark.parametrize("name", WRONG)
def test_a_planted_wrong_rule_fails_with_a_counterexample(rules, name):
    check = _check(rules, name)
    assert check.status == "failed", str(check)
    shown = str(check)
    assert " at " in shown or "x = input" in shown or "a = input" in shown, shown


@pytest.mark.parametrize("name", RIGHT)
def test_its_correct_twin_passes(rules, name):
    check = _check(rules, name)
    assert check.status in ("proved", "checked"), str(check)


def test_the_cli_exits_1_on_a_planted_rule_and_0_on_its_twin(tmp_path, capsys):
    path = tmp_path / "planted.fuse"
    path.write_text(PLANTED)
    assert main(["check", str(path), "--rule", "softmax_keepdims_wrong"]) == 1
    out = capsys.readouterr().out
    assert f"{path}:8: rewrite softmax_keepdims_wrong: failed" in out and "x = input f32[" in out
    assert main(["check", str(path), "--rule", "softmax_keepdims_right"]) == 0
