"""The HTML report: one box per group in each view, every name escaped, pages that
partition the groups, loop nests when compiled, and the summary numbers."""

from __future__ import annotations

import re

import pytest

import fusionlang
from fusionlang.report import render_report, write_report
from fusionlang.report.pages import build_pages, split_pages

from report_helpers import HOSTILE, Elements, light_model, report_data, small_plan


@pytest.fixture(scope="module")
def resnet_plan():
    return fusionlang.fuse(fusionlang.from_onnx(light_model("resnet50")), "apollo")


@pytest.mark.parametrize("layout", ["layered", "dot"])
def test_one_box_per_group_in_each_view(layout):
    if layout == "dot" and not fusionlang.report.dot_available():
        pytest.skip("Graphviz dot is not installed")
    plan = small_plan()
    page = Elements(render_report(plan, layout=layout))
    assert len(plan.groups) >= 3
    for view in ("ops", "groups"):
        boxes = page.with_class("rect", "group-box", view)
        assert len(boxes) == len(plan.groups), view
        gids = sorted(int(a["data-gid"]) for a in page.with_class("g", "group", view))
        assert gids == sorted(g.id for g in plan.groups)
    # every op is drawn once, inside the ops view, tagged with its group
    ops = page.with_class("g", "node", "ops")
    owner = plan.group_of()
    names = {f"o{k}": n.name for k, n in enumerate(plan.graph.nodes)}
    assert sorted(a["id"] for a in ops) == sorted(names)
    assert all(int(a["data-gid"]) == owner[names[a["id"]]] for a in ops)


def test_layout_engine_is_named_in_the_footer():
    plan = small_plan()
    assert "layout layered" in render_report(plan, layout="layered")
    if fusionlang.report.dot_available():
        assert "layout dot" in render_report(plan, layout="dot")


def test_group_tables_name_the_rules_that_formed_each_group():
    plan = small_plan()
    text = render_report(plan, layout="layered")
    fused = [g for g in plan.groups if len(g.nodes) > 1]
    assert fused and all(g.rules for g in fused)
    for g in fused:
        section = text[text.index(f'<section class="gdetail" data-gid="{g.id}"'):]
        section = section[: section.index("</section>")]
        for rule in g.rules:
            location, _, entry = rule.partition(": ")
            assert re.fullmatch(r"apollo\.fuse:\d+:\d+", location)
            assert f'<code class=loc>{location}</code> {entry.replace(">", "&gt;")}' in section
        for name in g.nodes:
            assert f'<tr data-node="{name}">' in section


def test_summary_shows_before_and_after(resnet_plan):
    text = render_report(resnet_plan, layout="layered")
    s = resnet_plan.stats
    assert f'<div class="after">{s.kernels_after}</div><div class="before">before fusion: ' \
           f'{s.kernels_before}</div>' in text
    assert f"before fusion: {s.bytes_before / 2**20:.2f} MiB" in text
    assert f"{s.bytes_after / 2**20:.2f} MiB" in text
    assert "rewrite" in text and "partition" in text


def test_every_name_is_escaped():
    plan = small_plan(HOSTILE)
    text = render_report(plan, layout="layered")
    page = Elements(text)
    # nothing from a name became an element: only the page's own tags exist
    tags = {t for t, _ in page.tags}
    assert tags <= {"html", "head", "meta", "title", "style", "body", "pre", "script", "header", "h1", "p", "b",
                    "div", "span", "details", "summary", "ul", "li", "code", "input", "ol", "button", "main",
                    "svg", "defs", "marker", "path", "g", "rect", "text", "section", "h2", "h3", "table",
                    "thead", "tbody", "tr", "th", "td", "dl", "dt", "dd", "aside", "footer"}
    assert "img" not in tags
    assert len(page.scripts) == 3  # the error catcher, the data block, the page script
    # <b> only where the page puts it (the strategy and rules in the header)
    assert sum(1 for t, _ in page.tags if t == "b") == 2
    # names reach the page as text, unchanged
    visible = "".join(page.text)
    for name in HOSTILE.values():
        assert name in visible, name
    # and reach the script only through the JSON block, intact
    data = report_data(text)
    names = {entry[0] for entry in data["nodes"]}
    assert {HOSTILE["conv"], HOSTILE["pool"]} <= names
    block = text[text.index('id="report-data">'):]
    block = block[: block.index("</script>")]
    assert "<" not in block[len('id="report-data">'):]


def test_rule_file_names_are_escaped(tmp_path):
    path = tmp_path / "<em>odd & rules.fuse"
    path.write_text('import "apollo.fuse"\n')
    plan = small_plan(rules=str(path))
    assert "<em>" in plan.rules
    page = Elements(render_report(plan, layout="layered"))
    assert "em" not in {t for t, _ in page.tags}
    assert plan.rules in "".join(page.text)


def test_pages_partition_the_groups_and_link_across(resnet_plan):
    runs = split_pages(resnet_plan, page_ops=40)
    assert len(runs) > 2
    assert [g.id for run in runs for g in run] == [g.id for g in resnet_plan.groups]
    assert all(sum(len(g.nodes) for g in run) <= 40 or len(run) == 1 for run in runs)
    pages = build_pages(resnet_plan, page_ops=40, engine="layered")
    page_of = {g.id: p.index for p in pages for g in p.groups}
    for page in pages:
        for node in page.nodes:
            if node.kind == "port" and node.goto_group is not None:
                assert node.goto_page == page_of[node.goto_group] != page.index
    # a value crossing from page k to page m shows as a port on both
    first, second = pages[0], pages[1]
    assert any(n.kind == "port" and n.goto_page == 1 for n in first.nodes)
    assert any(n.kind == "port" and n.goto_page == 0 for n in second.nodes)
    text = render_report(resnet_plan, layout="layered", page_ops=40)
    page = Elements(text)
    for view in ("ops", "groups"):
        assert len(page.with_class("rect", "group-box", view)) == len(resnet_plan.groups)
    assert report_data(text)["pages"] == len(pages)
    # the first page is shown, the others are hidden until chosen
    shown = [a for t, a in page.tags if t == "svg" and "graph" in a.get("class", "") and "hidden" not in a]
    assert [(a["data-page"], a["data-view"]) for a in shown] == [("0", "groups")]


def test_search_index_lists_every_op_with_its_group_and_page(resnet_plan):
    data = report_data(render_report(resnet_plan, layout="layered", page_ops=60))
    owner = resnet_plan.group_of()
    assert sorted(e[0] for e in data["nodes"]) == sorted(owner)
    for name, op, gid, page, element, origin in data["nodes"]:
        assert gid == owner[name] and data["groupPage"][str(gid)] == page
        assert all(f"onnx:{o}" in resnet_plan.graph.node(name).provenance for o in origin)


def test_loop_nests_when_compiled(tmp_path):
    plan = small_plan()
    compiled = fusionlang.compile(plan, "c")
    path = write_report(plan, tmp_path / "r.html", compiled=compiled, layout="layered")
    text = path.read_text()
    assert "Loop nests after loop fusion" in text
    for info in compiled.kernels:
        assert f"<code>{info.name}</code>" in text
        first_loop = next(line for line in info.source.splitlines() if line.strip().startswith("for ("))
        assert first_loop.replace("<", "&lt;").replace(">", "&gt;") in text
    assert "Loop nests" not in render_report(plan, layout="layered")


def test_report_is_self_contained(resnet_plan, tmp_path):
    text = write_report(resnet_plan, tmp_path / "r.html", layout="layered").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", text)
    assert "@import" not in text and "url(http" not in text
    page = Elements(text)
    assert not [a for t, a in page.tags if t in ("link", "img", "iframe", "object")]
    assert all("src" not in a for t, a in page.tags if t == "script")


@pytest.mark.parametrize("layout", ["layered", "dot"])
def test_plans_without_stats_or_nodes(layout):
    if layout == "dot" and not fusionlang.report.dot_available():
        pytest.skip("Graphviz dot is not installed")
    from fusionlang.engine.plan import FusionPlan, per_node_plan
    from fusionlang.ir import Graph

    graph = small_plan().original
    bare = per_node_plan(graph)  # no categories, no rules, no statistics
    page = Elements(render_report(bare, layout=layout))
    assert len(page.with_class("rect", "group-box", "ops")) == len(graph.nodes)
    assert "before fusion" not in "".join(page.text)
    empty = Elements(render_report(FusionPlan(Graph("empty"), []), layout=layout))
    assert page.with_class("rect", "group-box") and not empty.with_class("rect", "group-box")
    assert report_data(render_report(FusionPlan(Graph("empty"), []), layout=layout))["nodes"] == []
