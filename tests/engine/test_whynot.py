"""why_not names the first failing part of a pattern or guard, with its source line."""

from __future__ import annotations

import numpy as np

from fusionlang.engine.rewrite import why_not
from fusionlang.lang import load_rules
from fusionlang.ops import GraphBuilder


def near_miss(weights_from_relu: bool = True, epsilon_attr: float = 1e-5):
    """conv + batch_norm where the conv weight is computed (not a constant): planted."""
    rng = np.random.default_rng(0)
    b = GraphBuilder("near_miss")
    x = b.input("x", (1, 3, 6, 6))
    w0 = b.input("w0", (4, 3, 3, 3))
    w = b.relu(w0, name="relu_3") if weights_from_relu else b.constant(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), name="w")
    bias = b.constant(np.zeros(4, np.float32), name="bias")
    c = b.conv(x, w, bias, name="conv_1")
    params = [b.constant(np.ones(4, np.float32), name=n) for n in ("g", "beta", "mu", "var")]
    b.output(b.batch_norm(c, *params, epsilon=epsilon_attr, name="bn_2"))
    return b.build()


def guard_position(rules, rule_name):
    guard = rules.rewrite(rule_name).guard
    return f"{guard.span.file}:{guard.span.line}:{guard.span.col}"


def test_names_the_failing_guard_with_its_line():
    rules = load_rules("simplify")
    answer = why_not(near_miss(), "bn_2", rules, "fold_conv_bn")
    assert not answer.matches
    assert str(answer) == (f"{guard_position(rules, 'fold_conv_bn')}: guard const(w, b, g, beta, mu, var) failed: "
                           "'w' is computed by node 'relu_3' (relu)")


def test_names_the_failing_part_of_the_pattern():
    rules = load_rules("simplify")
    answer = why_not(near_miss(weights_from_relu=False), "bn_2", rules, "fold_conv_bn_no_bias")
    pattern = rules.rewrite("fold_conv_bn_no_bias").compiled
    conv = pattern.operands[0]
    assert str(answer.span) == str(conv.span)
    assert answer.message == "node 'conv_1' (conv) has 3 inputs; the pattern has 2"


def test_wrong_root_op():
    rules = load_rules("simplify")
    answer = why_not(near_miss(), "conv_1", rules, "fold_conv_bn")
    assert answer.message == "pattern of 'fold_conv_bn' starts with op 'batch_norm', but node 'conv_1' is 'conv'"


def test_reports_a_match():
    rules = load_rules("simplify")
    answer = why_not(near_miss(weights_from_relu=False), "bn_2", rules, "fold_conv_bn")
    assert answer.matches and answer.message == "rule 'fold_conv_bn' matches node 'bn_2'"


def test_comparison_guard_shows_the_values():
    rules = load_rules("simplify")
    b = GraphBuilder()
    a = b.input("a", (2, 3, 4))
    m = b.matmul(a, b.input("w", (4, 5)), name="mm")
    b.output(b.add(m, b.input("c", (5,)), name="plus"))
    answer = why_not(b.build(), "plus", rules, "matmul_bias")
    assert answer.message == "guard rank(a) == 2 failed: rank(a) is 3"
    assert str(answer.span).startswith("simplify.fuse:")
