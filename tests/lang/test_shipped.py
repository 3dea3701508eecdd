"""The shipped syntax trees of the standard rule files (std_modules.py) are those the
parser builds today, spans included; the loader takes them instead of parsing, and parses
when an entry is stale, the module's stamp does not hold, or the module is missing (that
the module holds literals only: tests/lang/test_parse_tables.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import fusionlang.lang
from fusionlang.lang import ast as A
from fusionlang.lang import loader, shipped
from fusionlang.lang.diagnostics import Diagnostics, Span
from fusionlang.lang.loader import display_path, rules_dir
from fusionlang.lang.parser import parse_module


def _standard_files():
    return sorted(Path(rules_dir()).rglob("*.fuse"))


def test_every_standard_file_is_shipped_as_the_parser_builds_it():
    # run python tools/gen_parse_tables.py after changing a standard file, the grammar,
    # the parser or the tree's classes
    from fusionlang.lang import std_modules

    assert std_modules.STAMP == shipped.stamp(), "run python tools/gen_parse_tables.py"
    shipped._shipped.cache_clear()
    trees = shipped._shipped()
    files = _standard_files()
    assert len(files) > 5 and set(trees) == {display_path(str(p)) for p in files}
    for path in files:
        text = path.read_text(encoding="utf-8")
        display = display_path(str(path))
        tree = parse_module(text, display, Diagnostics())
        digest, encoded = trees[display]
        assert digest == shipped.text_hash(text) and encoded == shipped.encode(tree, display), display
        assert shipped.shipped_module(display, text) == tree


def test_spans_come_back_with_their_file():
    tree = shipped.shipped_module("apollo.fuse", (Path(rules_dir()) / "apollo.fuse").read_text(encoding="utf-8"))
    spans = [item.span for item in tree.items]
    assert spans and all(s.file == "apollo.fuse" and s.line > 0 for s in spans)
    other = Span("elsewhere.fuse", 3, 4, 3, 9)
    assert shipped.decode(shipped.encode(other, "apollo.fuse"), "apollo.fuse") == other
    assert shipped.decode(shipped.encode(other, "apollo.fuse"), "apollo.fuse").file == "elsewhere.fuse"


def _fresh_load(monkeypatch) -> list:
    """Load apollo with empty caches, counting the files parsed."""
    parsed = []
    real = loader.parse_module

    def counting(text, path, diags):
        parsed.append(path)
        return real(text, path, diags)

    monkeypatch.setattr(loader, "parse_module", counting)
    monkeypatch.setattr(loader, "_MODULES", {})
    monkeypatch.setattr(loader, "_RULESETS", {})
    shipped._shipped.cache_clear()
    loader.load_rules("apollo")
    shipped._shipped.cache_clear()
    return parsed


def test_the_loader_takes_the_shipped_trees(monkeypatch):
    assert _fresh_load(monkeypatch) == []


def test_an_edited_standard_file_is_parsed(monkeypatch):
    from fusionlang.lang import std_modules

    entries = json.loads(std_modules.JSON)
    entries["apollo.fuse"][0] = "0" * 64  # the text it was made from changed
    monkeypatch.setattr(std_modules, "JSON", json.dumps(entries))
    assert _fresh_load(monkeypatch) == ["apollo.fuse"]


def test_a_stale_stamp_or_a_missing_module_means_parsing(monkeypatch):
    from fusionlang.lang import std_modules

    monkeypatch.setattr(std_modules, "STAMP", "another parser")
    assert "apollo.fuse" in _fresh_load(monkeypatch)
    monkeypatch.undo()
    monkeypatch.setitem(sys.modules, "fusionlang.lang.std_modules", None)  # import fails
    monkeypatch.delattr(fusionlang.lang, "std_modules", raising=False)
    assert "apollo.fuse" in _fresh_load(monkeypatch)


@pytest.mark.parametrize("encoded", [("Popen", "ls"), ("__class__",), ("Module", ("eval", "1"))])
def test_only_the_trees_classes_are_rebuilt(encoded):
    with pytest.raises(KeyError):
        shipped.decode(encoded, "x.fuse")


@pytest.mark.parametrize("value", [frozenset(), object(), [1]])
def test_only_literals_are_written(value):
    with pytest.raises(TypeError, match="no literal form"):
        shipped.encode(A.Num(value), "x.fuse")
