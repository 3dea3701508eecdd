"""`fuse sibling A, B : R` entries: parsed into the fuse table with the `sibling` flag,
printed back in their own syntax, and malformed ones pinned to file:line:col (from the
library and from `fusionlang lint`, exit status 2)."""

from __future__ import annotations

import pytest

from fusionlang.cli import main
from fusionlang.errors import RuleError
from fusionlang.lang import parse_text
from fusionlang.lang.printer import format_ruleset

CAT = "categories a < b < c\n"

MALFORMED = [
    ("one_category",
     CAT + "fuse sibling a : b\n",
     "bad.fuse:2:16: error: unexpected ':'; expected ','"),
    ("arrow_instead_of_comma",
     CAT + "fuse sibling a -> b : b\n",
     "bad.fuse:2:16: error: unexpected '->'; expected ','"),
    ("layer_flag",
     CAT + "fuse sibling a, b : b [stitch]\n",
     "bad.fuse:2:24: error: flag 'stitch' does not apply to a sibling entry"),
    ("unknown_category",
     CAT + "fuse sibling a, d : b\n",
     "bad.fuse:2:17: error: unknown category 'd'"),
    ("sibling_as_a_flag",
     CAT + "fuse a -> b : b [sibling]\n",
     "bad.fuse:2:18: error: unknown fuse flag 'sibling'"),
]


@pytest.mark.parametrize("name,source,expected", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_entry_is_pinned(name, source, expected):
    with pytest.raises(RuleError) as info:
        parse_text(source, "bad.fuse")
    assert str(info.value.diagnostics[0]) == expected
    assert info.value.exit_code == 2


def test_lint_reports_it_on_one_line_with_exit_2(tmp_path, capsys):
    path = tmp_path / "bad.fuse"
    path.write_text(CAT + "fuse sibling a, b : b [horizontal]\n")
    assert main(["lint", str(path)]) == 2
    out, err = capsys.readouterr()
    assert f"{path}:2:24: error: flag 'horizontal' does not apply to a sibling entry" in out + err


def test_entry_carries_the_flag_its_options_and_span():
    rules = parse_text(CAT + "fuse a -> b : b\nfuse sibling a|b, c : c [note=1]\n", "ok.fuse")
    plain, sibling = rules.fuse_entries
    assert sibling.flags == {"sibling"} and dict(sibling.options) == {"note": 1}
    assert (sibling.producers, sibling.consumers, sibling.result) == ({"a", "b"}, {"c"}, "c")
    assert (sibling.span.line, sibling.span.col) == (3, 1)
    # sibling entries are not part of the producer -> consumer table
    assert rules.fuse_result("a", "c") is None and rules.fuse_result("a", "c", flag="sibling") == sibling


def test_printer_writes_the_sibling_syntax_back():
    rules = parse_text(CAT + "fuse sibling a|b, c : c\n", "ok.fuse")
    text = format_ruleset(rules)
    assert "fuse sibling a|b, c : c" in text
    assert parse_text(text, "again.fuse").fuse_entries == rules.fuse_entries
