"""The standard library's rule files, parsed once by a developer and shipped as literals.

Parsing the ten files ``apollo.fuse`` loads costs about 0.09 s of every process that loads
them (lark's LALR parser in Python over 44 KB). ``tools/gen_parse_tables.py`` therefore also
writes ``std_modules.py``: each standard rule file's syntax tree as nested tuples of
literals, with the SHA-256 of the text it was parsed from. Importing its compiled form and
rebuilding the trees costs about 12 ms.

The loader takes a file's tree from there only when the file's text still has that hash
and the module's stamp (the grammar, the tree's classes and the parser that builds them,
by hash) still holds; otherwise it parses. A stale entry costs time, never correctness.
Rebuilding makes only the dataclasses of :mod:`fusionlang.lang.ast` and spans: the module
is data, read by importing it, like ``fuse_tables.py``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from functools import lru_cache
from pathlib import Path

from fusionlang.lang import ast as A
from fusionlang.lang.diagnostics import Span

STD_MODULES = "std_modules.py"
_HERE = Path(__file__).resolve().parent
#: what a tree's shape depends on: the grammar, the classes, the transformer, the spans
_SOURCES = ("fuse.lark", "ast.py", "parser.py", "diagnostics.py")
_SPAN, _TUPLE = "@span", "@tuple"
_CLASSES = {name: cls for name, cls in vars(A).items()
            if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == A.__name__}


def stamp() -> str:
    digest = hashlib.sha256()
    for name in _SOURCES:
        digest.update((_HERE / name).read_bytes())
    return digest.hexdigest()


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def encode(value, file: str):
    """A tree of file ``file`` as nested tuples of literals: (class name, field values...);
    a span of ``file`` as its four numbers, any other as (file, numbers)."""
    if isinstance(value, Span):
        numbers = (value.line, value.col, value.end_line, value.end_col)
        return numbers if value.file == file else (_SPAN, value.file, *numbers)
    if dataclasses.is_dataclass(value) and type(value).__name__ in _CLASSES:
        return (type(value).__name__, *(encode(getattr(value, f.name), file) for f in dataclasses.fields(value)))
    if isinstance(value, tuple):
        return (_TUPLE, *(encode(item, file) for item in value))
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    raise TypeError(f"a syntax tree holds a {type(value).__name__}, which has no literal form")


def decode(value, file: str):
    """The tree :func:`encode` wrote for ``file`` (KeyError on a name that is not one of
    the tree's classes)."""
    if not isinstance(value, tuple):
        return value
    tag = value[0]
    if not isinstance(tag, str):
        return Span(file, *value)
    if tag == _SPAN:
        return Span(*value[1:])
    parts = [decode(item, file) for item in value[1:]]
    return tuple(parts) if tag == _TUPLE else _CLASSES[tag](*parts)


@lru_cache(maxsize=1)
def _shipped() -> dict:
    """display path -> (text hash, encoded tree), or {} when the module is missing or stale."""
    try:  # here, not at the top: only a process that loads rule files pays for it
        from fusionlang.lang import std_modules
    except ImportError:
        return {}
    if std_modules.STAMP != stamp():
        return {}
    return {path: (digest, _tuples(tree)) for path, (digest, tree) in json.loads(std_modules.JSON).items()}


def _tuples(value):
    """JSON's lists back as the tuples :func:`encode` wrote."""
    return tuple(_tuples(item) for item in value) if isinstance(value, list) else value


def shipped_module(display: str, text: str) -> A.Module | None:
    """The shipped tree of the standard file named ``display`` if it was parsed from
    ``text`` with today's parser, else None (the caller parses)."""
    entry = _shipped().get(display)
    if entry is None or entry[0] != text_hash(text):
        return None
    module = decode(entry[1], display)
    return module if isinstance(module, A.Module) and module.path == display else None


def std_modules_text(modules: dict[str, tuple[str, A.Module]]) -> str:
    """The text of std_modules.py for ``modules``: display path -> (its text, its tree).

    The trees are one JSON string (read back as nested tuples by :func:`_shipped`), not a
    Python literal of tuples: compiling a 350 KB literal took 0.4 s of every process that
    runs with no bytecode cache (PYTHONDONTWRITEBYTECODE), reading the JSON takes
    milliseconds. The module holds literals only: importing it runs nothing."""
    entries = {path: (text_hash(text), encode(tree, path)) for path, (text, tree) in sorted(modules.items())}
    data = json.dumps(entries, separators=(",", ":"))
    chunks = "\n".join(f"    {data[i:i + 100]!r}" for i in range(0, len(data), 100))
    return ('"""The standard rule files\' syntax trees (see shipped.py).\n\n'
            'Written by tools/gen_parse_tables.py; do not edit."""\n\n'
            f"STAMP = {stamp()!r}\n\n"
            f"JSON = (\n{chunks}\n)\n")

__all__ = ["STD_MODULES", "decode", "encode", "shipped_module", "stamp", "std_modules_text", "text_hash"]
