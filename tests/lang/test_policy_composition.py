"""Policies that compose: an importing file's fuse/nofuse entries come first, its
strategy block overrides the imported one key by key, and entries may carry guards.
Negative cases pin the diagnostic (file:line:col and text)."""

from __future__ import annotations

import pytest

from fusionlang.errors import RuleError
from fusionlang.lang import format_ruleset, lint, load_rules, parse_text

BASE = """categories e < r
class relu, exp, neg : e
class reduce_sum : r
fuse e -> e : e
fuse r -> e : r [stitch]
strategy apollo { max_ops = 64, max_args = 96 }
"""


def _files(tmp_path, top: str):
    (tmp_path / "base.fuse").write_text(BASE)
    path = tmp_path / "top.fuse"
    path.write_text('import "base.fuse"\n' + top)
    return load_rules(str(path))


def _diagnostics(tmp_path, top: str) -> list[str]:
    with pytest.raises(RuleError) as err:
        _files(tmp_path, top)
    return [str(d).replace(str(tmp_path) + "/", "") for d in err.value.diagnostics]


def test_importing_file_strategy_overrides_imported_options_key_by_key(tmp_path):
    rules = _files(tmp_path, "strategy apollo { max_ops = 8 }\n")
    assert dict(rules.strategies["apollo"].options) == {"max_ops": 8, "max_args": 96}
    # each key keeps the span of the declaration that set it
    spans = rules.strategies["apollo"].option_spans
    assert (spans["max_ops"].file.endswith("top.fuse"), spans["max_args"].file.endswith("base.fuse")) == (True, True)


def test_a_strategy_declared_twice_in_one_file_is_still_an_error(tmp_path):
    assert _diagnostics(tmp_path, "strategy apollo { max_ops = 8 }\nstrategy apollo { max_ops = 4 }\n")[0] == (
        "top.fuse:3:10: error: strategy 'apollo' is already defined at top.fuse:2:1")


def test_importing_file_entries_come_before_imported_ones(tmp_path):
    rules = _files(tmp_path, "nofuse r -> e\nfuse e -> e : r\n")
    files = [entry.span.file.rsplit("/", 1)[-1] for entry in rules.fuse_entries]
    assert files[:2] == ["top.fuse", "top.fuse"]
    # the local `fuse e -> e : r` replaces base's `fuse e -> e : e`, which can decide nothing any more
    assert rules.fuse_result("e", "e").result == "r"
    assert all(entry.result != "e" for entry in rules.fuse_entries)
    # the deny entry decides the plain look-up and the stitch look-up alike
    assert rules.fuse_result("r", "e") is None and rules.fuse_result("r", "e", flag="stitch") is None
    assert rules.fuse_decision("r", "e", flag="stitch").deny


def test_without_the_override_the_imported_entries_decide(tmp_path):
    rules = _files(tmp_path, "")
    assert rules.fuse_result("e", "e").result == "e"
    assert rules.fuse_result("r", "e", flag="stitch").result == "r"


def test_replacing_an_imported_entry_keeps_the_imported_files_warnings(tmp_path):
    # base.fuse's `e -> e : e` is replaced; its later overlapping entry still gets its warning
    (tmp_path / "base.fuse").write_text(BASE + "fuse e|r -> e : r\n")
    path = tmp_path / "top.fuse"
    path.write_text('import "base.fuse"\nfuse e -> e : r\n')
    rules = load_rules(str(path))
    assert [e.span.line for e in rules.fuse_entries if e.result == "r" and "stitch" not in e.flags] == [2, 7]
    assert [str(d).replace(str(tmp_path) + "/", "") for d in lint([path])] == [
        "base.fuse:7:1: warning: pair e -> e is decided by the earlier entry at base.fuse:4:1 (result e, not r)"]


def test_first_match_wins_within_a_file(tmp_path):
    rules = _files(tmp_path, "fuse r -> e : r\nnofuse r -> e|r\n")
    assert rules.fuse_result("r", "e").result == "r"
    assert rules.fuse_result("r", "r") is None


def test_guarded_entries_are_passed_over_without_an_edge_and_never_shadow(tmp_path):
    rules = _files(tmp_path, "nofuse e -> e when size(consumer) > 1024\nnofuse e -> e when rank(producer) == 1\n")
    # with no edge to judge the guard, the next entry decides
    assert rules.fuse_result("e", "e").result == "e"


def test_a_composed_rule_set_prints_back_to_an_equal_one(tmp_path):
    rules = _files(tmp_path, "nofuse r -> e when dim(producer, 0) > 2 and rank(consumer) == 2\n"
                             "fuse e -> e : r\nstrategy apollo { max_ops = 8 }\n")
    assert parse_text(format_ruleset(rules)) == rules


def test_the_shipped_xla_policy_extends_apollo():
    xla, apollo = load_rules("xla"), load_rules("apollo")
    assert xla.strategies["apollo"].options["horizontal"] is False
    assert xla.strategies["apollo"].options["max_ops"] == apollo.strategies["apollo"].options["max_ops"]
    assert xla.fuse_result("reduce", "elemwise", flag="stitch") is None
    assert apollo.fuse_result("reduce", "elemwise", flag="stitch") is not None
    # apollo's test blocks state what apollo does; xla does not inherit them
    assert {t.span.file for t in apollo.tests} >= {"apollo.fuse"}
    assert "apollo.fuse" not in {t.span.file for t in xla.tests}


CASES = [
    ("nofuse_unknown_category",
     "nofuse r -> x\n",
     "top.fuse:2:13: error: unknown category 'x'"),
    ("nofuse_shadowed_in_its_file",
     "nofuse r -> e\nnofuse r -> e\n",
     "top.fuse:3:1: error: fuse entry is shadowed: every pair it covers is decided by earlier entries "
     "(top.fuse:2:1)"),
    ("fuse_shadowed_by_a_nofuse_in_its_file",
     "nofuse e -> e\nfuse e -> e : e\n",
     "top.fuse:3:1: error: fuse entry is shadowed: every pair it covers is decided by earlier entries "
     "(top.fuse:2:1)"),
    ("guard_unknown_variable",
     "fuse r -> e : r when rank(x) == 2\n",
     "top.fuse:2:27: error: unknown variable 'x'"),
    ("guard_unknown_function",
     "nofuse r -> e when rnk(producer) == 2\n",
     "top.fuse:2:20: error: unknown function 'rnk'"),
    ("guard_not_a_condition",
     "nofuse r -> e when size(producer)\n",
     "top.fuse:2:20: error: a guard must be true or false; this is an integer"),
    ("guard_syntax",
     "nofuse r -> e when\n",
     "top.fuse:2:19: error: unexpected end of input; expected a number, an integer, '(', '[', a name, '-', "
     "'not', a string"),
    ("nofuse_takes_no_result",
     "nofuse r -> e : r\n",
     "top.fuse:2:15: error: unexpected ':'"),
]


@pytest.mark.parametrize("top,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_malformed_policy_items_are_pinned(tmp_path, top, expected):
    assert _diagnostics(tmp_path, top)[0] == expected
