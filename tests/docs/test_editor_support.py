"""Editor support for .fuse files: the Pygments lexer and the TextMate grammar know every
keyword of the grammar, and the lexer reads every standard rule file without an error
token."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import pytest
from lark import Lark
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.token import Error, Keyword, Name

from fusionlang.lang import rules_dir
from fusionlang.lang.pygments_lexer import KEYWORDS, FuseLexer

ROOT = Path(__file__).resolve().parents[2]
TM_GRAMMAR = ROOT / "editors" / "fuse.tmLanguage.json"
RULE_FILES = sorted(Path(rules_dir()).rglob("*.fuse"))


def grammar_keywords() -> set[str]:
    """Every literal word the grammar matches (named keyword terminals and inline ones
    such as "where", "when", "and")."""
    text = resources.files("fusionlang.lang").joinpath("fuse.lark").read_text(encoding="utf-8")
    parser = Lark(text, parser="lalr")
    words = {t.pattern.value for t in parser.terminals
             if type(t.pattern).__name__ == "PatternStr" and re.fullmatch(r"[A-Za-z_]+", t.pattern.value)}
    assert {"rewrite", "fuse", "where", "when", "shared"} <= words  # the extraction itself works
    return words


def test_lexer_keywords_match_the_grammar():
    assert set(KEYWORDS) == grammar_keywords()


def test_textmate_keywords_match_the_grammar():
    grammar = json.loads(TM_GRAMMAR.read_text())
    assert grammar["scopeName"] == "source.fuse" and grammar["fileTypes"] == ["fuse"]
    match = grammar["repository"]["keywords"]["match"]
    (alternatives,) = re.fullmatch(r"\\b\(([a-z_|]+)\)\\b", match).groups()
    assert set(alternatives.split("|")) == grammar_keywords()


def test_textmate_patterns_are_valid_regexes():
    def walk(node):
        if isinstance(node, dict):
            for key in ("match", "begin", "end"):
                if key in node:
                    yield node[key]
            for value in node.values():
                yield from walk(value)
        elif isinstance(node, list):
            for value in node:
                yield from walk(value)

    patterns = list(walk(json.loads(TM_GRAMMAR.read_text())))
    assert len(patterns) > 10
    for pattern in patterns:
        re.compile(pattern)  # the subset used is common to Oniguruma and Python


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: str(p.relative_to(rules_dir())))
def test_lexer_reads_every_rule_file(path):
    text = path.read_text()
    tokens = list(FuseLexer().get_tokens(text))
    assert [v for t, v in tokens if t in Error] == []
    assert "".join(v for _, v in tokens) == (text if text.endswith("\n") else text + "\n")


def test_rule_files_exist():
    names = {str(p.relative_to(rules_dir())) for p in RULE_FILES}
    assert {"apollo.fuse", "tvm.fuse", "dnnfusion.fuse", "std/ops.fuse"} <= names


def test_lexer_roles():
    text = ('categories elemwise < reduce\nclass relu : elemwise\n'
            'rewrite drop priority 3: identity(x) where const(x) => x\nfuse elemwise -> reduce : reduce [stitch]\n')
    tokens = [(t, v) for t, v in FuseLexer().get_tokens(text) if v.strip()]
    kinds = dict((v, t) for t, v in tokens)
    assert kinds["categories"] in Keyword and kinds["where"] in Keyword and kinds["priority"] in Keyword
    assert kinds["elemwise"] is Name.Class and kinds["reduce"] is Name.Class
    assert kinds["drop"] is Name.Function and kinds["identity"] is Name.Function
    assert kinds["stitch"] is Name.Attribute


def test_lexer_is_registered_with_pygments():
    assert isinstance(get_lexer_by_name("fuse"), FuseLexer)
    assert isinstance(get_lexer_for_filename("apollo.fuse"), FuseLexer)
