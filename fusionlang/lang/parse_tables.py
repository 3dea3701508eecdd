"""The .fuse parser's LALR tables, computed once by a developer and shipped as JSON.

Building the tables from fuse.lark costs about 0.3 s of every process that parses a rule file
(every CLI run, every cold compile). lark's own cache is a pickle in the shared temp directory,
which the project refuses (a file planted there would run code). So the tables are written
by ``tools/gen_parse_tables.py`` into ``fuse_tables.json`` next to the grammar, as plain data:
JSON, with dicts and tuples spelled out because lark's tables have integer keys and tuples.
They are used only while they belong to the grammar they were made from (a SHA-256 of
fuse.lark) and to the lark version that made them; otherwise the parser is built from the
grammar as before, so a stale file costs time, never correctness.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources

import lark
from lark import Lark
from lark.grammar import Rule
from lark.lexer import TerminalDef

GRAMMAR = "fuse.lark"
TABLES = "fuse_tables.json"
OPTIONS = {"parser": "lalr", "maybe_placeholders": True, "cache": False}


def grammar_text() -> str:
    return resources.files("fusionlang.lang").joinpath(GRAMMAR).read_text(encoding="utf-8")


def _stamp(grammar: str) -> dict:
    return {"grammar_sha256": hashlib.sha256(grammar.encode()).hexdigest(), "lark": lark.__version__}


def build_parser() -> Lark:
    """The parser, from shipped tables when they match the grammar, else built."""
    grammar = grammar_text()
    tables = resources.files("fusionlang.lang").joinpath(TABLES)
    if tables.is_file():
        stored = json.loads(tables.read_text(encoding="utf-8"))
        if stored.get("stamp") == _stamp(grammar):
            data, memo = _decode(stored["tables"])
            return Lark._load_from_dict(data, memo)  # what lark's standalone parsers load with
    return Lark(grammar, **OPTIONS)


def tables_json() -> str:
    """The text of fuse_tables.json for the current grammar and lark."""
    grammar = grammar_text()
    data, memo = Lark(grammar, **OPTIONS).memo_serialize([TerminalDef, Rule])
    return json.dumps({"stamp": _stamp(grammar), "tables": _encode((data, memo))}, separators=(",", ":")) + "\n"


def _encode(value):
    if isinstance(value, dict):
        return {"d": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if isinstance(value, tuple):
        return {"t": [_encode(item) for item in value]}
    if isinstance(value, list):
        return [_encode(item) for item in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"lark table entry of type {type(value).__name__} has no JSON form")


def _decode(value):
    if isinstance(value, dict):
        if "d" in value:
            return {_decode(k): _decode(v) for k, v in value["d"]}
        return tuple(_decode(item) for item in value["t"])
    if isinstance(value, list):
        return [_decode(item) for item in value]
    return value


__all__ = ["build_parser", "grammar_text", "tables_json"]
