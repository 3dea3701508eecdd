"""The shipped LALR tables (fuse_tables.py) belong to today's grammar, parse exactly as a
parser built from the grammar does, and are ignored when they are stale or missing."""

from __future__ import annotations

import ast
import sys
from importlib import resources
from pathlib import Path

import pytest
from lark import Lark

import fusionlang.lang
from fusionlang.lang import parse_tables
from fusionlang.lang.loader import rules_dir
from fusionlang.lang.parse_tables import OPTIONS, TABLES, build_parser, grammar_text, tables_module
from fusionlang.lang.shipped import STD_MODULES


def _stamp(text: str) -> dict:
    """The STAMP literal of a tables module's text."""
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and node.targets[0].id == "STAMP":
            return ast.literal_eval(node.value)
    raise AssertionError("no STAMP")


def test_shipped_tables_are_those_of_the_current_grammar():
    # the text itself differs from run to run (lark numbers its states in set order), the
    # stamp does not; another lark version than the one that wrote them makes the parser
    # build its own
    shipped = resources.files("fusionlang.lang").joinpath(TABLES).read_text(encoding="utf-8")
    assert _stamp(shipped)["grammar_sha256"] == _stamp(tables_module())["grammar_sha256"], \
        "run python tools/gen_parse_tables.py"


@pytest.mark.parametrize("module", [TABLES, STD_MODULES])
def test_the_generated_modules_hold_literals_only(module):
    # read back by importing them: nothing in them may do anything but build data
    text = resources.files("fusionlang.lang").joinpath(module).read_text(encoding="utf-8")
    for node in ast.parse(text).body:
        if isinstance(node, ast.Expr):  # the docstring
            assert isinstance(node.value, ast.Constant)
            continue
        assert isinstance(node, ast.Assign), ast.dump(node)[:80]
        ast.literal_eval(node.value)


def test_the_shipped_parser_reads_the_standard_library_as_a_built_one_does():
    shipped, built = build_parser(), Lark(grammar_text(), **OPTIONS)

    sources = sorted(Path(rules_dir()).rglob("*.fuse"))
    assert len(sources) > 5
    for path in sources:
        text = path.read_text(encoding="utf-8")
        assert shipped.parse(text) == built.parse(text), path.name


def _counting_lark(monkeypatch) -> list:
    built = []
    real_lark = parse_tables.Lark

    class Counting(real_lark):
        def __init__(self, *args, **kwargs):
            built.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(parse_tables, "Lark", Counting)
    return built


def test_stale_tables_are_ignored_and_the_parser_is_built(monkeypatch):
    built = _counting_lark(monkeypatch)
    build_parser()
    assert built == []  # matching tables: nothing built
    monkeypatch.setattr(parse_tables, "grammar_text", lambda: grammar_text() + "\n// changed\n")
    parser = build_parser()
    assert built == [1]
    assert parser.parse("rewrite r: add(x, x) => mul(x, 2)\n") is not None


def test_missing_tables_mean_the_parser_is_built(monkeypatch):
    built = _counting_lark(monkeypatch)
    monkeypatch.setitem(sys.modules, "fusionlang.lang.fuse_tables", None)  # import fails
    monkeypatch.delattr(fusionlang.lang, "fuse_tables", raising=False)
    parser = build_parser()
    assert built == [1]
    assert parser.parse("rewrite r: add(x, x) => mul(x, 2)\n") is not None


@pytest.mark.parametrize("value", [frozenset(), object(), float("nan")])
def test_only_literals_are_written(value):
    with pytest.raises(TypeError, match="no literal form"):
        parse_tables._check_plain({"x": (1, [value])})
