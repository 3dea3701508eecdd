"""lint does work proportional to the number of rules (it was quadratic: 3,000 rules
took 51 s). The tests count calls of the hot functions; no clocks."""

from __future__ import annotations

import itertools

from fusionlang.lang import checker as checker_module
from fusionlang.lang import lint, load_rules, standard_names
from fusionlang.lang.pattern_index import PatternIndex
from fusionlang.lang.patterns import may_match, ops_of, term_of


def _count_calls(monkeypatch, module, name):
    calls = [0]
    original = getattr(module, name)

    def counting(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return calls


def _lint_count(tmp_path, monkeypatch, text, module, name) -> int:
    path = tmp_path / "many.fuse"
    path.write_text(text)
    calls = _count_calls(monkeypatch, module, name)
    assert [d for d in lint([path]) if d.is_error] == []
    monkeypatch.undo()
    return calls[0]


def _rewrites(n: int) -> str:
    # every pattern has the root op every replacement builds: the loop check must still
    # not pair every rule with every other
    return "".join(f"rewrite r{i}: add(x, mul(y, {i})) => add(x, neg(y))\n" for i in range(n))


def test_loop_check_work_is_linear_in_rules(tmp_path, monkeypatch):
    small = _lint_count(tmp_path, monkeypatch, _rewrites(1000), checker_module, "may_match")
    large = _lint_count(tmp_path, monkeypatch, _rewrites(2000), checker_module, "may_match")
    assert large <= 2 * small + 10
    assert large <= 2000


def _fuse_entries(n: int) -> str:
    cats = " < ".join(f"c{i}" for i in range(n + 1))
    return f"categories {cats}\n" + "".join(f"fuse c{i} -> c{i + 1} : c{i + 1}\n" for i in range(n))


def test_fuse_table_check_work_is_linear_in_entries(tmp_path, monkeypatch):
    small = _lint_count(tmp_path, monkeypatch, _fuse_entries(1000), checker_module.itertools, "product")
    large = _lint_count(tmp_path, monkeypatch, _fuse_entries(2000), checker_module.itertools, "product")
    assert large <= 2 * small + 10
    assert large <= 2 * 2000


def test_index_finds_every_pattern_may_match_accepts():
    """On the standard library the index is exact where it matters: each (rule, term)
    pair may_match accepts is among the index's candidates."""
    for name in standard_names():
        rules = load_rules(name)
        commutative = {r.op for r in rules.class_rules if r.commutative}.__contains__
        index = PatternIndex()
        for rule in rules.rewrites:
            index.add(rule, rule.compiled)
        for rule in rules.rewrites:
            terms = ops_of(term_of(rule.replacement, lambda op: op in rules.registry, frozenset()))
            for term, other in itertools.product(terms, rules.rewrites):
                if may_match(other.compiled, term, commutative):
                    assert other in index.candidates(term, commutative), (name, rule.name, other.name)


def test_shadowed_and_overlapping_fuse_entries_are_still_reported(tmp_path):
    path = tmp_path / "f.fuse"
    path.write_text("categories a < b < c\n"
                    "fuse a -> b : b\n"
                    "fuse a | b -> b : c\n"
                    "fuse a -> b : b\n")
    diags = lint([path])
    assert [(d.severity, d.span.line) for d in diags] == [("warning", 3), ("error", 4)]
    assert diags[0].message == f"pair a -> b is decided by the earlier entry at {path}:2:1 (result b, not c)"
    assert diags[1].message == f"fuse entry is shadowed: every pair it covers is decided by earlier entries " \
                               f"({path}:2:1, {path}:3:1)"
