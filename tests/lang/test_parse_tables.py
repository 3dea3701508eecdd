"""The shipped LALR tables (fuse_tables.json) belong to today's grammar, parse exactly as a
parser built from the grammar does, and are ignored when they are stale."""

from __future__ import annotations

import json
from pathlib import Path
from importlib import resources

import pytest
from lark import Lark

from fusionlang.lang import parse_tables
from fusionlang.lang.parse_tables import OPTIONS, TABLES, build_parser, grammar_text, tables_json
from fusionlang.lang.loader import rules_dir


def _shipped() -> str:
    return resources.files("fusionlang.lang").joinpath(TABLES).read_text(encoding="utf-8")


def test_shipped_tables_are_those_of_the_current_grammar():
    # the text itself differs from run to run (lark numbers its states in set order), the
    # stamp does not
    # stamp; another lark version than the one that wrote them makes the parser build its own
    shipped, current = json.loads(_shipped())["stamp"], json.loads(tables_json())["stamp"]
    assert shipped["grammar_sha256"] == current["grammar_sha256"], "run python tools/gen_parse_tables.py"


def test_the_shipped_parser_reads_the_standard_library_as_a_built_one_does():
    shipped, built = build_parser(), Lark(grammar_text(), **OPTIONS)

    sources = sorted(Path(rules_dir()).rglob("*.fuse"))
    assert len(sources) > 5
    for path in sources:
        text = path.read_text(encoding="utf-8")
        assert shipped.parse(text) == built.parse(text), path.name


def test_stale_tables_are_ignored_and_the_parser_is_built(monkeypatch):
    built = []
    real_lark = parse_tables.Lark

    class Counting(real_lark):
        def __init__(self, *args, **kwargs):
            built.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(parse_tables, "Lark", Counting)
    build_parser()
    assert built == []  # matching tables: nothing built
    monkeypatch.setattr(parse_tables, "grammar_text", lambda: grammar_text() + "\n// changed\n")
    parser = build_parser()
    assert built == [1]
    assert parser.parse("rewrite r: add(x, x) => mul(x, 2)\n") is not None


@pytest.mark.parametrize("value", [frozenset(), object()])
def test_only_plain_data_is_written(value):
    with pytest.raises(TypeError, match="no JSON form"):
        parse_tables._encode({"x": (1, [value])})
