"""The printer writes a RuleSet as .fuse text that parses back to an equal RuleSet."""

from __future__ import annotations

import pytest

from fusionlang.lang import format_ruleset, load_rules, parse_text, standard_names
from fusionlang.lang.diagnostics import Diagnostics
from fusionlang.lang.parser import parse_module
from fusionlang.lang.printer import format_expr


@pytest.mark.parametrize("name", standard_names())
def test_standard_rule_sets_round_trip(name):
    rules = load_rules(name)
    text = format_ruleset(rules)
    again = parse_text(text, "printed.fuse")
    assert again == rules
    # and printing is stable
    assert format_ruleset(again).splitlines()[1:] == text.splitlines()[1:]


def test_equality_sees_content_changes():
    base = "categories a < b\nclass relu : a\nrewrite r: relu(x) where rank(x) == 2 => x\nfuse a -> a : a\n"
    rules = parse_text(base)
    assert parse_text(base.replace("rank(x) == 2", "rank(x) == 3")) != rules
    assert parse_text(base.replace("fuse a -> a : a", "fuse a -> a : b")) != rules
    assert parse_text(base.replace("class relu : a", "class relu : b")) != rules
    assert parse_text("\n\n" + base) == rules  # positions do not count


@pytest.mark.parametrize("source", [
    "a - (b - c)", "(a - b) - c", "a / (b * c)", "-(a + b)", "-a ** 2", "(-a) ** 2", "a ** b ** c",
    "(a ** b) ** c", "not (a and b) or c", "not a and (b or c)", "f(x)[1] + [1, 2][0]", "t @ add(x, y)",
    'g(x) {k=1, s="q\\"r", ..rest}', "a < b + 1", "x % 2 == 0 and y // 3 != 1", "1e-05 * 2.5",
])
def test_expressions_print_with_the_parentheses_they_need(source):
    text = f"rewrite r: relu(x) where {source} => x\n" if "@" not in source and "{" not in source \
        else f"rewrite r: {source} => x\n"
    diags = Diagnostics()
    module = parse_module(text, "e.fuse", diags)
    assert not diags.items
    rewrite = module.items[0]
    expr = rewrite.guard if rewrite.guard is not None else rewrite.pattern
    printed = format_expr(expr)
    again = parse_module(text.replace(source, printed), "e.fuse", diags).items[0]
    assert (again.guard if again.guard is not None else again.pattern) == expr


def test_accepts_clauses_round_trip():

    text = ('import "std/ops.fuse"\n'
            'decompose softmax(x; axis) accepts overflow {\n  return x\n}\n'
            'rewrite r accepts overflow: relu(relu(x)) => relu(x)\n')
    rules = parse_text(text, "acc.fuse")
    again = parse_text(format_ruleset(rules), "again.fuse")
    assert [c.accepts for c in again.decompositions["softmax"]] == [frozenset({"overflow"})]
    assert next(r for r in again.rewrites if r.name == "r").accepts == frozenset({"overflow"})
