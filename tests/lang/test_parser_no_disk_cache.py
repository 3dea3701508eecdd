"""The parser never loads tables from a shared place: lark's ``cache=True`` unpickles
``$TMPDIR/.lark_cache_*`` (a predictable name), so a planted file would run code."""

from __future__ import annotations

import pickle
import tempfile
from importlib import resources

from lark import Lark

from fusionlang.lang import lint
from fusionlang.lang import parser as parser_module


class _CreatesFile:
    """Unpickling this creates ``path``: the witness that a pickle was loaded."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _plant_poisoned_caches(temp_dir, witness) -> int:
    """Let lark write its cache for our grammar into ``temp_dir``, then replace the
    pickles in every such file with one that creates ``witness`` when loaded."""
    grammar = resources.files("fusionlang.lang").joinpath("fuse.lark").read_text(encoding="utf-8")
    Lark(grammar, parser="lalr", maybe_placeholders=True, cache=True)
    planted = 0
    for path in temp_dir.glob(".lark_*"):
        first_line = path.read_bytes().split(b"\n", 1)[0]
        path.write_bytes(first_line + b"\n" + pickle.dumps(_CreatesFile(str(witness))))
        planted += 1
    return planted


def test_planted_lark_cache_is_never_unpickled(tmp_path, monkeypatch):
    temp_dir = tmp_path / "shared_tmp"
    temp_dir.mkdir()
    witness = tmp_path / "pwned"
    monkeypatch.setattr(tempfile, "tempdir", str(temp_dir))
    assert _plant_poisoned_caches(temp_dir, witness) >= 1

    grammar = resources.files("fusionlang.lang").joinpath("fuse.lark").read_text(encoding="utf-8")
    # the plant works: a parser built with lark's cache would run it (and then
    # overwrite the file with good tables, so plant again)
    Lark(grammar, parser="lalr", maybe_placeholders=True, cache=True)
    assert witness.exists()
    witness.unlink()
    assert _plant_poisoned_caches(temp_dir, witness) >= 1

    parser_module._parser.cache_clear()
    try:
        rules = tmp_path / "ok.fuse"
        rules.write_text("rewrite r: add(x, x) => mul(x, 2)\n")
        assert lint([rules]) == []
    finally:
        parser_module._parser.cache_clear()
    assert not witness.exists()


def test_parser_tables_are_built_once_per_process():
    parser_module._parser.cache_clear()
    assert parser_module._parser() is parser_module._parser()
