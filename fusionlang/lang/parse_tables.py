"""The .fuse parser's LALR tables, computed once by a developer and shipped as a Python module.

Building the tables from fuse.lark costs about 0.3 s of every process that parses a rule file
(every CLI run, every cold compile). lark's own cache is a pickle in the shared temp directory,
which the project refuses (a file planted there would run code). So ``tools/gen_parse_tables.py``
writes them into ``fuse_tables.py`` next to the grammar: a module of plain literals (dicts,
tuples, strings, numbers), part of the package like any other. A module and not JSON because
Python keeps its compiled form (``__pycache__``, written when the package is installed), so
loading the tables costs about 1 ms where decoding the JSON cost 50.
They are used only while they belong to the grammar they were made from (a SHA-256 of
fuse.lark) and to the lark version that made them; otherwise the parser is built from the
grammar as before, so a stale file costs time, never correctness.
"""

from __future__ import annotations

import hashlib
import pprint
from importlib import resources

import lark
from lark import Lark
from lark.grammar import Rule
from lark.lexer import TerminalDef

GRAMMAR = "fuse.lark"
TABLES = "fuse_tables.py"
OPTIONS = {"parser": "lalr", "maybe_placeholders": True, "cache": False}
_PLAIN = (str, int, float, bool, type(None))


def grammar_text() -> str:
    return resources.files("fusionlang.lang").joinpath(GRAMMAR).read_text(encoding="utf-8")


def _stamp(grammar: str) -> dict:
    return {"grammar_sha256": hashlib.sha256(grammar.encode()).hexdigest(), "lark": lark.__version__}


def _shipped():
    """The shipped module, or None where it is missing (a checkout that never generated it)."""
    try:  # here, not at the top: only a process that parses a rule file pays for the tables
        from fusionlang.lang import fuse_tables
    except ImportError:
        return None
    return fuse_tables


def build_parser() -> Lark:
    """The parser, from shipped tables when they match the grammar, else built."""
    grammar = grammar_text()
    shipped = _shipped()
    if shipped is not None and shipped.STAMP == _stamp(grammar):
        data, memo = shipped.TABLES
        return Lark._load_from_dict(data, memo)  # what lark's standalone parsers load with
    return Lark(grammar, **OPTIONS)


def tables_module() -> str:
    """The text of fuse_tables.py for the current grammar and lark."""
    grammar = grammar_text()
    tables = Lark(grammar, **OPTIONS).memo_serialize([TerminalDef, Rule])
    _check_plain(tables)
    return ('"""The .fuse parser\'s LALR tables for fuse.lark (see parse_tables.py).\n\n'
            'Written by tools/gen_parse_tables.py; do not edit."""\n\n'
            f"STAMP = {pprint.pformat(_stamp(grammar), width=120)}\n\n"
            f"TABLES = {pprint.pformat(tables, width=120, compact=True, sort_dicts=False)}\n")


def _check_plain(value) -> None:
    """Only literals may be written: the module is read back by importing it."""
    if isinstance(value, dict):
        for key, item in value.items():
            _check_plain(key)
            _check_plain(item)
    elif isinstance(value, (tuple, list)):
        for item in value:
            _check_plain(item)
    elif not isinstance(value, _PLAIN) or (isinstance(value, float) and value != value):
        raise TypeError(f"lark table entry of type {type(value).__name__} has no literal form")


__all__ = ["build_parser", "grammar_text", "tables_module"]
