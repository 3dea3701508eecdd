"""The report's "Limited by" list: read from the plan's recorded merge decisions, it names
the limit that cut a group apart from its neighbour, on both groups' pages."""

from __future__ import annotations

import fusionlang
from fusionlang.ops import GraphBuilder
from fusionlang.report import render_report


def elementwise_chain(length: int):
    b = GraphBuilder("chain")
    v = b.input("x", (4, 4))
    for k in range(length):
        v = (b.relu if k % 2 == 0 else b.exp)(v, name=f"e{k}")
    b.output(v)
    return b.build()


def detail(text: str, gid: int) -> str:
    section = text[text.index(f'<section class="gdetail" data-gid="{gid}"'):]
    return section[: section.index("</section>")]


def test_cut_groups_name_the_cap_that_split_them():
    plan = fusionlang.fuse(elementwise_chain(6), "apollo", options={"max_ops": 4}, feedback=False)
    assert [len(g.nodes) for g in plan.groups] == [4, 2]
    text = render_report(plan, layout="layered")
    for gid in (0, 1):
        assert "<h3>Limited by</h3>" in detail(text, gid)
        assert "max_ops = 4 kept e3 (group 0) and e4 (group 1) apart (apollo.fuse:" in detail(text, gid)


def test_groups_no_limit_touched_have_no_such_list():
    plan = fusionlang.fuse(elementwise_chain(6), "apollo", feedback=False)
    assert len(plan.groups) == 1
    assert "Limited by" not in render_report(plan, layout="layered")
