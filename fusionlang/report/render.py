"""The report as one self-contained HTML file: inline CSS, inline JS, inline SVG.

Every string that comes from a model or a rule file (graph, node, value, op, category and
rule names, file names) is arbitrary text: it reaches the page only through
:func:`html.escape`, in text and in attribute values alike, and the data the script
searches is JSON inside a ``<script type="application/json">`` block whose ``<``, ``>``
and ``&`` are escaped, read with ``JSON.parse``. Element ids are generated (``o12``,
``g5``), never names.
"""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from pathlib import Path
from typing import cast

from fusionlang.engine.plan import FusionPlan, Group
from fusionlang.report.layout import Layout
from fusionlang.report.limits import limit_notes
from fusionlang.report.pages import PAGE_OPS, Page, PageNode, build_pages, group_ops_line, group_title
from fusionlang.stages import stage_line, stage_times

#: categories of the standard rule files, in the order the legend lists them
KNOWN_CATEGORIES = ("elemwise", "broadcast", "injective", "reduce", "complex", "opaque")
PALETTE = ("#4e79a7", "#59a14f", "#d4a106", "#f28e2b", "#e15759", "#9c755f",
           "#b07aa1", "#76b7b2", "#ff9da7", "#7f7f7f", "#17becf", "#bcbd22")
_RULE_AT = re.compile(r"^(\S+:\d+(?::\d+)?): (.*)$", re.S)


def default_view(pages: list[Page]) -> str:
    """A model that fits one page opens on its ops; a larger one on its groups."""
    return "ops" if len(pages) == 1 else "groups"


def e(value) -> str:
    """HTML-escaped text, safe in element content and in quoted attribute values."""
    return html.escape(str(value), quote=True)


def _asset(name: str) -> str:
    return resources.files("fusionlang.report").joinpath(name).read_text(encoding="utf-8")


def _json_for_script(data) -> str:
    # inside <script>, "</script>" or "<!--" would end or change the block: escape < > &
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def mib(nbytes) -> str:
    return f"{nbytes / 2**20:.2f} MiB" if nbytes >= 2**18 else f"{nbytes / 1024:.1f} KiB"


def seconds(value) -> str:
    if value >= 1:
        return f"{value:.2f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.1f} ms"
    return f"{value * 1e6:.1f} µs"


def render_report(plan: FusionPlan, *, compiled=None, layout: str = "auto", page_ops: int = PAGE_OPS,
                  title: str | None = None) -> str:
    """The report of ``plan`` as an HTML string (see :func:`write_report`)."""
    pages = build_pages(plan, page_ops, layout)
    categories = _categories(plan)
    cat_index = {c: k for k, c in enumerate(categories)}
    kernels: dict[int, list] = {}
    if compiled is not None:
        for info in compiled.kernels:
            kernels.setdefault(info.group, []).append(info)
    page_of_group = {g.id: p.index for p in pages for g in p.groups}
    name = title or f"fusion report: {plan.graph.name}"

    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{e(name)}</title>",
        f"<style>{_asset('report.css')}\n{_category_css(categories)}</style>",
        f'</head><body data-view="{default_view(pages)}">',
        # first thing in the body: every script error from here on lands in this element
        '<pre id="script-errors" hidden></pre>',
        "<script>window.onerror=function(m,s,l,c){var x=document.getElementById('script-errors');"
        "x.hidden=false;x.textContent+=m+' (line '+l+':'+c+')\\n';"
        "document.body.setAttribute('data-script-errors',String(x.textContent.split('\\n').length-1));};</script>",
        _header(plan, name, compiled, pages),
        _legend(categories),
        _toolbar(pages),
        '<main class="layout"><div class="graph-column">',
        '<div id="viewport" class="viewport">',
        # markers live in an always-rendered SVG: those inside hidden pages would not draw
        '<svg class="defs" width="0" height="0" aria-hidden="true"><defs>'
        '<marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L8,4 L0,8 z" class="arrowhead"/></marker>'
        "</defs></svg>",
    ]
    view = default_view(pages)
    for page in pages:
        for v in ("ops", "groups"):
            parts.append(_page_svg(plan, page, cat_index, v, page.index == 0 and v == view))
    parts.append("</div>")
    for page in pages:
        parts.append(_page_table(plan, page, cat_index))
    parts.append('</div><aside id="details" class="details">'
                 '<p class="hint">Click a group or an op, or search, to see how its group was formed.</p>')
    limits = limit_notes(plan)
    for page in pages:
        for group in page.groups:
            parts.append(_group_detail(plan, group, page.index, cat_index, kernels.get(group.id), compiled,
                                       limits.get(group.id, [])))
    parts.append("</aside></main>")
    parts.append(_footer(plan, pages))
    parts.append(f'<script type="application/json" id="report-data">{_json_for_script(_data(plan, pages, page_of_group))}'
                 "</script>")
    parts.append(f"<script>{_asset('report.js')}</script>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(plan: FusionPlan, path, *, compiled=None, layout: str = "auto", page_ops: int = PAGE_OPS,
                 title: str | None = None) -> Path:
    """Write the HTML report of ``plan`` to ``path`` and return the path.

    One self-contained file: the graph (SVG, one box per group, colored by category,
    paginated for large models), a table per group (ops, category, the rules and .fuse
    lines that formed it, bytes in and out), the summary before/after fusion, and a
    search box. Pass ``compiled`` (``fusionlang.compile(plan)``) to add each group's
    loop nests after loop fusion. ``layout`` is "auto" (Graphviz dot when installed),
    "dot" or "layered" (pure Python).
    """
    text = render_report(plan, compiled=compiled, layout=layout, page_ops=page_ops, title=title)
    out = Path(path)
    out.write_text(text, encoding="utf-8")
    return out


# ----- pieces -------------------------------------------------------------------------
def _categories(plan: FusionPlan) -> list[str]:
    present = {g.category or "-" for g in plan.groups}
    return [c for c in KNOWN_CATEGORIES if c in present] + sorted(present - set(KNOWN_CATEGORIES))


def _category_css(categories: list[str]) -> str:
    """One class per category; the standard categories keep their colours in every report."""
    rules, extra = [], 0
    for k, category in enumerate(categories):
        if category in KNOWN_CATEGORIES:
            color = PALETTE[KNOWN_CATEGORIES.index(category)]
        else:
            color = PALETTE[len(KNOWN_CATEGORIES) + extra % (len(PALETTE) - len(KNOWN_CATEGORIES))]
            extra += 1
        rules.append(f".cat-{k}{{--cat:{color};}}")
    return "\n".join(rules)


def _cat_class(cat_index: dict, category: str) -> str:
    return f"cat-{cat_index[category or '-']}"


def _header(plan: FusionPlan, name: str, compiled, pages: list[Page]) -> str:
    s = plan.stats
    cards = []

    def card(label, after, before=None, note=""):
        body = f'<div class="after">{e(after)}</div>'
        if before is not None:
            body += f'<div class="before">before fusion: {e(before)}</div>'
        if note:
            body += f'<div class="note">{e(note)}</div>'
        cards.append(f'<div class="card"><div class="label">{e(label)}</div>{body}</div>')

    card("ops", len(plan.graph.nodes), s.ops_before, "after rewriting" if s.ops_before is not None else "")
    card("kernels", s.kernels_after if s.kernels_after is not None else plan.launches, s.kernels_before,
         f"{len(plan.groups)} groups" + (f", {len(plan.horizontal)} horizontal packs" if plan.horizontal else ""))
    if s.bytes_after is not None and s.bytes_before is not None:
        ratio = s.bytes_before / s.bytes_after if s.bytes_after else float("inf")
        card("global memory traffic", mib(s.bytes_after), mib(s.bytes_before), f"{ratio:.2f}x less")
    if s.estimated_seconds_after is not None and s.estimated_seconds_before is not None:
        card("estimated time", seconds(s.estimated_seconds_after), seconds(s.estimated_seconds_before),
             f"roofline on {s.device or '?'}")
    times = stage_times(s, compiled.stats if compiled is not None else {})
    if times:
        card("time", seconds(sum(times.values())), note=stage_line(times))
    if compiled is not None:
        card("loop nests", compiled.stats.loop_nests, note=f"target {compiled.stats.target}")
    rewrites = s.rewrites or {}
    fired = "".join(f"<li><code>{e(rule)}</code> × {e(count)}</li>" for rule, count in rewrites.items())
    rewrites_html = (f'<details class="rewrites"><summary>rewrites fired: {sum(rewrites.values())}</summary>'
                     f"<ul>{fired}</ul></details>") if rewrites else ""
    meta = (f"strategy <b>{e(plan.strategy or '-')}</b> · rules <b>{e(plan.rules or '-')}</b>"
            f" · {len(pages)} page{'s' if len(pages) != 1 else ''}")
    return (f'<header><h1>{e(name)}</h1><p class="meta">{meta}</p>'
            f'<div class="cards">{"".join(cards)}</div>{rewrites_html}</header>')


def _legend(categories: list[str]) -> str:
    items = "".join(f'<span class="chip cat-{k}">{e(c)}</span>' for k, c in enumerate(categories))
    return (f'<div class="legend">categories: {items} <span class="chip kind-view">view</span>'
            '<span class="chip kind-const">const</span></div>')


def _toolbar(pages: list[Page]) -> str:
    buttons = "".join(f'<button type="button" class="page-btn" data-page="{p.index}">{p.index + 1}</button>'
                      for p in pages)
    nav = (f'<div class="pager"><button type="button" id="prev-page" title="previous page">‹</button>'
           f'{buttons}<button type="button" id="next-page" title="next page">›</button></div>'
           if len(pages) > 1 else "")
    return ('<div class="toolbar">'
            '<div class="search"><input type="search" id="search" autocomplete="off" spellcheck="false" '
            'placeholder="find a node, op, original ONNX name or group (g12)  [/]" aria-label="search">'
            '<ol id="search-results" hidden></ol></div>'
            f"{nav}"
            '<div class="views" role="group" aria-label="view">'
            '<button type="button" class="view-btn" data-view="ops" title="every op inside its group">ops</button>'
            '<button type="button" class="view-btn" data-view="groups" title="one box per group">groups</button>'
            "</div>"
            '<div class="zoom"><button type="button" id="zoom-out" title="zoom out">−</button>'
            '<button type="button" id="zoom-fit" title="fit width">fit</button>'
            '<button type="button" id="zoom-in" title="zoom in">+</button></div>'
            "</div>")


def _path(points) -> str:
    (x0, y0), rest = points[0], points[1:]
    d = [f"M{x0:.1f},{y0:.1f}"]
    for k in range(0, len(rest) - 2, 3):
        (ax, ay), (bx, by), (cx, cy) = rest[k:k + 3]
        d.append(f"C{ax:.1f},{ay:.1f} {bx:.1f},{by:.1f} {cx:.1f},{cy:.1f}")
    return " ".join(d)


def _page_svg(plan: FusionPlan, page: Page, cat_index: dict, view: str, visible: bool) -> str:
    """One page in one view: "ops" (every op inside its group's box) or "groups" (one box
    per group). Either way every group of the page has exactly one ``rect.group-box``."""
    lay = cast(Layout, page.layout if view == "ops" else page.group_layout)  # build_pages laid out both
    stitched = {gid for gid, _ in plan.stitches}
    pack_of = {gid: k for k, pack in enumerate(plan.horizontal) for gid in pack}
    ops = {n.node: n.label for n in page.nodes if n.kind == "op" and n.node is not None}  # (an op has its node)
    w, h = max(lay.width, 40.0), max(lay.height, 40.0)
    out = [f'<svg class="graph" data-page="{page.index}" data-view="{view}" data-width="{w:.0f}" width="{w:.0f}" '
           f'height="{h:.0f}" viewBox="0 0 {w:.0f} {h:.0f}" xmlns="http://www.w3.org/2000/svg"'
           f'{"" if visible else " hidden"}>']
    out.append('<g class="groups">')
    for group in page.groups:
        box = lay.clusters.get(f"g{group.id}") if view == "ops" else lay.nodes.get(f"c{group.id}")
        if box is None:
            continue
        extra = (" · stitched" if group.id in stitched else "") + \
                (f" · pack {pack_of[group.id] + 1}" if group.id in pack_of else "")
        title = group_title(group, extra)
        classes = f"group {_cat_class(cat_index, group.category)} kind-{e(group.kind)}"
        element_id = f"g{group.id}" if view == "ops" else f"c{group.id}"
        out.append(f'<g class="{classes}" data-gid="{group.id}" id="{element_id}">'
                   f"<title>{e(title)} ({e(group.kind)})</title>"
                   f'<rect class="group-box" x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" '
                   f'height="{box.h:.1f}" rx="6"/>'
                   f'<text class="group-title" x="{box.x + 6:.1f}" y="{box.y + 14:.1f}">{e(title)}</text>')
        if view == "groups":
            out.append(f'<text class="group-ops" x="{box.x + 8:.1f}" y="{box.y + 31:.1f}">'
                       f"{e(group_ops_line(group, ops))}</text>")
        out.append("</g>")
    out.append('</g><g class="edges">')
    for src, dst, points in lay.edges:
        out.append(f'<path class="edge" d="{_path(points)}" marker-end="url(#arrow)"/>')
    out.append('</g><g class="nodes">')
    for node in page.nodes:
        if node.kind == "port" or view == "ops":
            out.append(_node_svg(node, lay.nodes[node.id], with_id=view == "ops"))
    out.append("</g></svg>")
    return "".join(out)


def _node_svg(node: PageNode, box, with_id: bool) -> str:
    element_id = f' id="{node.id}"' if with_id else ""
    if node.kind == "op":
        attrs = f'class="node"{element_id} data-gid="{node.group}"'
    else:
        attrs = f'class="port"{element_id}'
        if node.goto_group is not None:
            attrs += f' data-goto="{node.goto_group}" tabindex="0" role="link"'
    return (f"<g {attrs}><title>{e(node.tooltip)}</title>"
            f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" '
            f'rx="{4 if node.kind == "op" else 10}"/>'
            f'<text x="{box.cx:.1f}" y="{box.y + box.h / 2 + 4:.1f}">{e(node.label)}</text></g>')


def _page_table(plan: FusionPlan, page: Page, cat_index: dict) -> str:
    ops = {n.name: n.op for n in plan.graph.nodes}
    rows = []
    for g in page.groups:
        kinds = list(dict.fromkeys(ops[n] for n in g.nodes))
        summary = ", ".join(kinds[:6]) + (" …" if len(kinds) > 6 else "")
        formed = "<br>".join(f"<code>{e(_split_rule(r)[0])}</code>" for r in g.rules) or "—"
        rows.append(f'<tr data-gid="{g.id}"><td>g{g.id}</td>'
                    f'<td><span class="chip {_cat_class(cat_index, g.category)}">{e(g.category or "-")}</span></td>'
                    f"<td>{e(g.kind)}</td><td class=num>{len(g.nodes)}</td><td>{e(summary)}</td>"
                    f'<td class=num>{mib(g.cost.get("bytes_read", 0))}</td>'
                    f'<td class=num>{mib(g.cost.get("bytes_written", 0))}</td><td>{formed}</td></tr>')
    return (f'<section class="group-table page-table" data-page="{page.index}"{"" if page.index == 0 else " hidden"}>'
            f"<h2>Groups on page {page.index + 1} ({len(page.groups)} groups, {page.ops} ops)</h2>"
            "<table><thead><tr><th>group</th><th>category</th><th>kind</th><th>ops</th><th>op types</th>"
            "<th>bytes in</th><th>bytes out</th><th>formed by</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></section>")


def _split_rule(text: str) -> tuple[str, str]:
    """("apollo.fuse:18:1", "fuse complex -> ...") from a group's rule note."""
    m = _RULE_AT.match(text)
    return (m.group(1), m.group(2)) if m else ("", text)


def _group_detail(plan: FusionPlan, group: Group, page: int, cat_index: dict, kernels, compiled,
                  limits: list[str]) -> str:
    graph = plan.graph
    nodes = {n.name: n for n in plan.nodes_of(group)}
    stitched_values = [v for gid, v in plan.stitches if gid == group.id]
    packs = [k for k, pack in enumerate(plan.horizontal) if group.id in pack]

    def values(names):
        return "".join(f"<li><code>{e(v)}</code> <span class=type>{e(graph.types[v])}</span>"
                       f"{' (constant)' if v in graph.constants else ''}</li>" for v in names) or "<li>—</li>"

    if group.rules:
        formed = "".join(f"<li><code class=loc>{e(loc)}</code> {e(text)}</li>" if loc else f"<li>{e(text)}</li>"
                         for loc, text in map(_split_rule, group.rules))
    elif len(group.nodes) == 1:
        formed = ("<li>a single op: nothing merged it with a neighbour; "
                  f"<code>fusionlang explain MODEL --node {e(group.nodes[0])}</code> says why</li>")
    else:
        formed = "<li>no rule recorded</li>"
    limited = "".join(f"<li>{e(line)}</li>" for line in limits)
    op_rows = []
    for name in group.nodes:
        node = nodes[name]
        rewrites = [p[len("rule "):] for p in node.provenance if p.startswith("rule ")]
        origin = [p[len("onnx:"):] for p in node.provenance if p.startswith("onnx:")]
        op_rows.append(f'<tr data-node="{e(name)}"><td><code>{e(name)}</code></td><td>{e(node.op)}</td>'
                       f"<td class=type>{e(', '.join(str(graph.types[o]) for o in node.outputs))}</td>"
                       f"<td>{e(', '.join(origin))}</td><td>{e('; '.join(rewrites))}</td></tr>")
    cost = group.cost
    facts = [("page", page + 1), ("kind", group.kind), ("ops", len(group.nodes))]
    if group.kernel:
        facts.append(("priced as", f"{group.kernel} kernel"))
    if cost:
        facts += [("bytes in", mib(cost.get("bytes_read", 0))), ("bytes out", mib(cost.get("bytes_written", 0))),
                  ("flops", f"{cost.get('flops', 0):.3g}"), ("estimated time", seconds(cost.get("seconds", 0.0)))]
    if packs:
        facts.append(("horizontal pack", ", ".join(str(k + 1) for k in packs)))
    dl = "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in facts)
    parts = [f'<section class="gdetail" data-gid="{group.id}" hidden>',
             f'<h2>Group {group.id} <span class="chip {_cat_class(cat_index, group.category)}">'
             f"{e(group.category or '-')}</span></h2>",
             f"<dl>{dl}</dl>",
             f"<h3>Formed by</h3><ul class=rules>{formed}</ul>",
             *([f"<h3>Limited by</h3><ul class=limits>{limited}</ul>"] if limits else []),
             "<h3>Ops</h3><table><thead><tr><th>node</th><th>op</th><th>output</th><th>from ONNX</th>"
             f"<th>rewrites</th></tr></thead><tbody>{''.join(op_rows)}</tbody></table>",
             f"<h3>Inputs</h3><ul class=values>{values(group.inputs)}</ul>",
             f"<h3>Outputs</h3><ul class=values>{values(group.outputs)}</ul>"]
    if stitched_values:
        parts.append("<h3>Kept in on-chip memory (stitched)</h3><ul class=values>"
                     + "".join(f"<li><code>{e(v)}</code></li>" for v in stitched_values) + "</ul>")
    if compiled is not None:
        parts.append("<h3>Loop nests after loop fusion</h3>")
        if kernels:
            for info in kernels:
                parts.append(f"<details class=kernel><summary><code>{e(info.name)}</code>: {info.nests} loop "
                             f"nest{'s' if info.nests != 1 else ''}, schedule {e(info.strategy)}</summary>"
                             f"<pre><code>{e(info.source)}</code></pre></details>")
        else:
            parts.append(f"<p>no kernel: a {e(group.kind)} group costs no launch</p>")
    parts.append("</section>")
    return "".join(parts)


def _footer(plan: FusionPlan, pages: list[Page]) -> str:
    engines = sorted({p.layout.engine for p in pages if p.layout is not None})
    return (f'<footer>fusionlang report · graph {e(plan.graph.name)} · layout {e(", ".join(engines))} · '
            "self-contained: no network access</footer>")


def _data(plan: FusionPlan, pages: list[Page], page_of_group: dict) -> dict:
    """What the script searches: every op (name, op, group, page, element id, ONNX names)."""
    nodes = []
    for page in pages:
        for node in page.nodes:
            if node.kind != "op":
                continue
            graph_node = plan.graph.nodes[int(node.id[1:])]
            origin = [p[len("onnx:"):] for p in graph_node.provenance if p.startswith("onnx:")]
            nodes.append([node.node, graph_node.op, node.group, page.index, node.id, origin])
    return {"nodes": nodes, "groupPage": {str(g): p for g, p in page_of_group.items()}, "pages": len(pages)}
