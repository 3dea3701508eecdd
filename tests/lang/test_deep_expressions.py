"""Deep expressions: up to MAX_NESTING levels every stage works (parse, check, guards,
formulas, instantiation, the printer); one level more is a located "expression too
deep" error, never a RecursionError."""

from __future__ import annotations

import pytest

from fusionlang.cli import main
from fusionlang.engine.rewrite import apply_rules
from fusionlang.errors import RuleError
from fusionlang.lang import lint, load_rules, parse_text
from fusionlang.lang.diagnostics import Diagnostics
from fusionlang.lang.limits import MAX_NESTING
from fusionlang.lang.parser import parse_module
from fusionlang.lang.printer import format_ruleset
from fusionlang.ops import GraphBuilder

#: each builds a rule file whose expressions nest with ``n``; rules match mul(x, y)
SHAPES = {
    "sum": lambda n: "rewrite r: mul(x, y) => " + " + ".join(["x"] * n),
    "calls": lambda n: "rewrite r: mul(x, y) => " + "neg(" * n + "x" + ")" * n,
    "unary minus": lambda n: "rewrite r: mul(x, y) => " + "-" * n + "x",
    "lists": lambda n: "rewrite r: mul(x, y) where len(" + "[" * n + "1" + "]" * n + ") == 1 => x",
    "guard sum": lambda n: "rewrite r: mul(x, y) where " + " + ".join(["rank(x)"] * n) + " > 1 => x",
    "nots": lambda n: "rewrite r: mul(x, y) where " + "not " * n + "rank(x) < 1 => x",
    "power": lambda n: "rewrite r: mul(x, y) => " + " ** ".join(["x"] * n),
    "formula": lambda n: "def f(x) = " + "exp(" * n + "x" + ")" * n + "\nrewrite r: mul(x, y) => f(x)",
    "formula product": lambda n: "def f(x) = " + " * ".join(["x"] * n) + "\nrewrite r: mul(x, y) => f(x)",
    "attribute": lambda n: "rewrite r: mul(x, y) => reshape(x){shape=[" + "-" * n + "1]}",
    "decomposition": lambda n: "decompose gelu(x) { return " + " + ".join(["x"] * n) + " }",
}


def _parses(text: str) -> bool:
    return parse_module(text, "<probe>", Diagnostics()) is not None


def _largest_accepted(shape) -> int:
    """The largest n whose file parses (binary search: the grammar decides, not a constant)."""
    low, high = 1, 4 * MAX_NESTING
    assert _parses(shape(low)) and not _parses(shape(high))
    while low + 1 < high:
        mid = (low + high) // 2
        low, high = (mid, high) if _parses(shape(mid)) else (low, mid)
    return low


@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_deepest_accepted_expression_goes_through_every_stage(kind, tmp_path):
    shape = SHAPES[kind]
    n = _largest_accepted(shape)
    assert n >= MAX_NESTING // 2  # the limit is about nesting, not a much lower bound
    path = tmp_path / "deep.fuse"
    path.write_text(shape(n) + "\n")
    assert [d for d in lint([path]) if d.is_error] == []
    rules = load_rules(str(path))
    # the printer's text parses back to the same rules
    printed = format_ruleset(rules)
    assert format_ruleset(parse_text(printed)).splitlines()[1:] == printed.splitlines()[1:]
    b = GraphBuilder()
    x, y = b.input("x", (4,)), b.input("y", (4,))
    b.output(b.mul(x, y, name="m"))
    apply_rules(b.build(), rules)


def test_one_level_deeper_is_a_located_error(tmp_path):
    for kind, shape in SHAPES.items():
        n = _largest_accepted(shape)
        path = tmp_path / "deep.fuse"
        path.write_text("\n" + shape(n + 1) + "\n")
        (diag,) = lint([path])
        assert diag.message == f"expression too deep: it nests more than {MAX_NESTING} levels", kind
        # the deep expression is on the shape's first line, after one blank line
        assert diag.span.file.endswith("deep.fuse") and diag.span.line == 2, kind


def test_far_too_deep_files_through_lint_load_rules_and_cli(tmp_path, capsys):
    cases = {"sum.fuse": "rewrite r: mul(x, y) => " + " + ".join(["x"] * 600),
             "calls.fuse": "rewrite r: mul(x, y) => " + "neg(" * 800 + "x" + ")" * 800,
             "minus.fuse": "rewrite r: mul(x, y) => " + "-" * 5000 + "x",
             "lists.fuse": "rewrite r: mul(x, y) where len(" + "[" * 3000 + "]" * 3000 + ") == 1 => x"}
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text + "\n")
        (diag,) = lint([path])
        assert diag.message == f"expression too deep: it nests more than {MAX_NESTING} levels"
        # it points into the expression, at the start of the level past the limit
        assert diag.span.line == 1 and diag.span.col > text.index(":") + 1 and text[diag.span.col - 1] in "xn-[", name
        with pytest.raises(RuleError) as info:
            load_rules(str(path))
        assert str(info.value).startswith(f"{diag.span}: error: expression too deep")
        assert main(["lint", str(path)]) == 2
        err = capsys.readouterr().err
        assert f"{name}:1:{diag.span.col}: error: expression too deep" in err
        assert "Traceback" not in err and "internal error" not in err


def test_formula_symbols_are_real_so_nested_functions_stay_cheap(tmp_path):
    # without real symbols sympy asked of every nested tanh whether its argument's imaginary
    # part is a multiple of pi: 12 s to lint ten of them, exponential in the depth
    from fusionlang.lang.formula import symbol

    assert symbol("x").is_real
    path = tmp_path / "deep_tanh.fuse"
    path.write_text('import "apollo.fuse"\ndef deep(x) = ' + "tanh(" * 24 + "x" + ")" * 24 + "\n")
    assert main(["lint", str(path)]) == 0
