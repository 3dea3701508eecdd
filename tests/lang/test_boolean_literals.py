"""`true` and `false` are expressions: in guards, attribute values, formulas and test
expectations, and the printer writes them back; as a tensor operand, or as a number in
a formula, they are errors at their span."""

from __future__ import annotations

import pytest

from fusionlang.engine.rewrite import apply_rules, why_not
from fusionlang.errors import RuleError
from fusionlang.lang import ast as A
from fusionlang.lang import format_ruleset, parse_text
from fusionlang.ops import GraphBuilder


def relu_graph():
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    b.output(b.relu(x, name="r"))
    return b.build()


@pytest.mark.parametrize("guard, fires", [("true", True), ("false", False), ("rank(x) == 2 and true", True),
                                          ("false or rank(x) == 3", False), ("not false", True),
                                          ("(rank(x) == 2) == true", True)])
def test_guards(guard, fires):
    rules = parse_text(f"rewrite r: relu(x) where {guard} => exp(x)\n", "b.fuse")
    assert apply_rules(relu_graph(), rules).fired["r"] == (1 if fires else 0)


def test_why_not_shows_the_false_guard():
    rules = parse_text("rewrite r: relu(x) where false => exp(x)\n", "b.fuse")
    answer = why_not(relu_graph(), "r", rules, "r")
    assert not answer.matches
    assert str(answer).startswith("b.fuse:1:26: ")


def test_they_parse_to_boolean_values():
    guard = parse_text("rewrite r: relu(x) where true and not false => x\n", "b.fuse").rewrite("r").guard
    assert [n.value for n in A.walk(guard) if isinstance(n, A.Num)] == [True, False]


def test_printer_writes_them_back():
    text = "rewrite r: relu(x) where true and not false => x\n"
    printed = format_ruleset(parse_text(text, "b.fuse"))
    assert "where true and not false" in printed


def test_formula_select_on_true():
    rules = parse_text("def f(x) = select(true, x, 0 - x)\n"
                       "test t {\n  input x: f32[4]\n  y = f(x)\n  output y\n  expect true\n}\n", "b.fuse")
    b = GraphBuilder(registry=rules.registry)
    x = b.input("x", (4,))
    b.output(b.op("f", x, name="y"))
    import numpy as np

    from fusionlang.ops.interpreter import run as interpret

    data = np.array([-1, 2, -3, 4], np.float32)
    (out,) = interpret(b.build(), {"x": data}, rules.registry).values()
    assert np.array_equal(out, data)


@pytest.mark.parametrize("text, where, message", [
    ("rewrite r: relu(true) => x\n", "b.fuse:1:17", "true is a static boolean, not a tensor operand"),
    ("rewrite r: relu(x) => add(x, false)\n", "b.fuse:1:30", "false is a static boolean, not a tensor operand"),
    ("def f(x) = x + true\n", "b.fuse:1:16", "a boolean is not a number in a formula; write select(COND, 1, 0)"),
    ("def f(x) = x * (x > 0)\n", "b.fuse:1:17", "a boolean is not a number in a formula; write select(COND, 1, 0)"),
])
def test_misuse_is_an_error_at_its_span(text, where, message):
    with pytest.raises(RuleError) as err:
        parse_text(text, "b.fuse")
    assert f"{where}: error: {message}" in str(err.value)
