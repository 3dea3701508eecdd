"""rule_report: where a rewrite fired in a graph, and why not elsewhere."""

from __future__ import annotations

import pytest

from fusionlang.engine.rule_report import rule_report
from fusionlang.errors import FuseError
from fusionlang.lang import parse_text
from fusionlang.ops import GraphBuilder

RULES = "rewrite abs_twice: abs(abs(x)) => abs(x)\n"


def graph_of(n: int, once: int = 0):
    b = GraphBuilder()
    for k in range(n):
        x = b.input(f"x{k}", (4,))
        b.output(b.abs(b.abs(x), name=f"a{k}"))
    for k in range(once):
        b.output(b.abs(b.input(f"y{k}", (4,)), name=f"single{k}"))
    return b.build()


def test_many_firings_are_summarized():
    report = rule_report(graph_of(25), parse_text(RULES, "r.fuse"), "abs_twice")
    assert report.fired_at == tuple(f"a{k}" for k in range(25))
    lines = report.lines()
    assert lines[0] == "rewrite abs_twice (r.fuse:1) fired 25 time(s):"
    assert lines[1:21] == [f"  at a{k}" for k in range(20)]
    assert lines[21] == "  ... and 5 more"


def test_where_it_did_not_fire():
    report = rule_report(graph_of(0, once=12), parse_text(RULES, "r.fuse"), "abs_twice")
    lines = report.lines()
    assert lines[:3] == ["rewrite abs_twice (r.fuse:1) did not fire:", "  at 12 'abs' node(s):",
                         "    single0: r.fuse:1:24: expected op 'abs', but 'y0' is a graph input"]
    assert lines[-1] == "    ... and 2 more"


def test_unknown_rule_suggests():
    with pytest.raises(FuseError, match=r"^rule set 'r' has no rewrite named 'abs_twise'; did you mean 'abs_twice'\?$"):
        rule_report(graph_of(1), parse_text(RULES, "r.fuse"), "abs_twise")
