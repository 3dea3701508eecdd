"""lint type-checks static expressions (guards, attribute values, static lets) and
evaluates their constant parts within the limits: a guard that could never be evaluated
is an error at its span, not a rule that silently never fires."""

from __future__ import annotations

import pytest

from fusionlang.cli import main
from fusionlang.errors import RuleError
from fusionlang.lang import lint, load_rules
from fusionlang.lang.limits import MAX_INT_BITS, MAX_LIST_ELEMENTS


def _errors(tmp_path, text: str):
    path = tmp_path / "t.fuse"
    path.write_text(text)
    return [(d.span.line, d.span.col, d.message) for d in lint([path]) if d.is_error]


@pytest.mark.parametrize("guard, col, message", [
    ('rank(x) + "a" > 1', 28, "operator '+' cannot combine an integer and a string"),
    ("rank(x) // 0 > 1", 28, "division by zero: '//' by a literal 0"),
    ("rank(x) % (1 - 1) > 1", 28, "division by zero: '%' by a literal 0"),
    ("dim(x, 0) / 0.0 > 1", 28, "division by zero: '/' by a literal 0"),
    ("shape(x) - 1 == 2", 28, "operator '-' cannot combine a list and an integer"),
    ("shape(x) * shape(y) == [1]", 28, "operator '*' cannot combine a list and a list"),
    ('rank(x) < "4"', 28, "'<' cannot order an integer against a string"),
    ("rank(x) and rank(y) == 1", 28, "'and' needs true or false, not an integer"),
    ("not dtype(x)", 32, "'not' needs true or false, not a string"),
    ("-dtype(x) == 1", 28, "unary '-' needs a number, not a string"),
    ("rank(x)", 28, "a guard must be true or false; this is an integer"),
    ("len(rank(x)) == 1", 32, "len() expects a list here, not an integer"),
    ("range(0, dtype(x)) == [0]", 37, "range() expects an integer here, not a string"),
    ("max(rank(x), shape(x)) == 1", 41, "max() compares numbers, not a list"),
    ("rank(x)[0] == 1", 28, "only a list can be indexed"),
    ('shape(x)["a"] == 1', 37, "a list index must be an integer"),
    ("10 ** 10 ** 10 ** 10 > 1", 34, f"10 ** 10 ** 10 is too large: integers have at most {MAX_INT_BITS} bits"),
    ("len([1] * 100000000000) == 1", 32,
     f"[1] * 100000000000 is too long: lists have at most {MAX_LIST_ELEMENTS} elements"),
    ("1 // 0 == rank(x)", 28, "division by zero in 1 // 0"),
])
def test_ill_typed_guards_are_located_errors(tmp_path, guard, col, message):
    assert _errors(tmp_path, f"\nrewrite r: add(x, y) where {guard} => mul(x, y)\n") == [(2, col, message)]


def test_well_typed_guards_pass(tmp_path):
    guards = ["rank(x) + 1 == len(shape(y) + [1])", "dim(x, -1) / 2 > 0.5 and not is_float(x)",
              "shape(x) == [1] * rank(x)", 'dtype(x) == "float32" or dtype(x) < "int"',
              "prod(shape(x)) % 2 == 0", "rank(x) // 1 >= 0", "max(rank(x), 1) == min(dim(x, 0), 4)",
              "range(0, rank(x))[0] == 0", "abs(-rank(x)) > 0"]
    text = "".join(f"rewrite r{k}: add(x, y) where {g} => mul(x, y)\n" for k, g in enumerate(guards))
    assert _errors(tmp_path, text) == []


def test_attribute_values_and_static_lets_are_typed(tmp_path):
    text = ('\ndecompose gelu(x) {\n    n = rank(x) + "a"\n    return x\n}\n'
            'rewrite r: add(x, y) => reshape(x) {shape=[1] * 100000000000}\n')
    assert _errors(tmp_path, text) == [
        (3, 9, "operator '+' cannot combine an integer and a string"),
        (6, 43, f"[1] * 100000000000 is too long: lists have at most {MAX_LIST_ELEMENTS} elements")]


def test_class_guards_and_test_expectations_must_be_true_or_false(tmp_path):
    text = ("categories a < b\nclass relu : a when rank(out)\n"
            "test t {\n    input x: float32[4]\n    y = relu(x)\n    output y\n    expect nodes + 1\n}\n")
    assert _errors(tmp_path, text) == [(2, 21, "a guard must be true or false; this is an integer"),
                                       (7, 12, "a guard must be true or false; this is an integer")]


def test_typed_guard_errors_through_load_rules_and_cli(tmp_path, capsys):
    path = tmp_path / "t.fuse"
    path.write_text('rewrite r: add(x, y) where rank(x) + "a" > 1 => mul(x, y)\n')
    with pytest.raises(RuleError) as info:
        load_rules(str(path))
    assert str(info.value) == f"{path}:1:28: error: operator '+' cannot combine an integer and a string"
    assert main(["lint", str(path)]) == 2
    assert "t.fuse:1:28: error: operator '+' cannot combine an integer and a string" in capsys.readouterr().err
