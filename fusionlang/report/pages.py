"""What the report's graph shows, page by page.

A large model (densenet121: ~700 ops after rewriting) is cut into pages of consecutive
groups in the plan's topological order, each laid out on its own. A cut is placed where
the fewest values cross it, so pages end between blocks of the network rather than in
the middle of one. Values that cross a page boundary, graph inputs and graph outputs
become small *ports* ("from group 12, page 1") that link to the other side.

Everything here is ids and geometry; names stay raw strings and are escaped only by the
HTML writer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fusionlang.engine.plan import FusionPlan, Group
from fusionlang.report.layout import Layout, LayoutGraph, layout

#: pages hold at most this many ops (a group is never split across pages)
PAGE_OPS = 160
#: op boxes: height, and width from the op name's length
NODE_H, CHAR_W, NODE_MIN_W, NODE_MAX_W = 24.0, 7.2, 56.0, 150.0
LABEL_CHARS = 18
PORT_CHARS = 28
TITLE_CHAR_W = 6.6
COLLAPSED_H = 40.0


@dataclass
class PageNode:
    """One box of a page: an op (``node`` is its name) or a port."""

    id: str
    kind: str  # "op" | "port"
    label: str
    tooltip: str
    node: str | None = None
    group: int | None = None
    #: for ports: the group on another page they stand for, and that page
    goto_group: int | None = None
    goto_page: int | None = None
    #: ports only: True for graph inputs and values from earlier pages
    incoming: bool = False


@dataclass
class Page:
    """Consecutive groups, the boxes that show them, and their layout."""

    index: int
    groups: list[Group]
    nodes: list[PageNode] = field(default_factory=list)
    edges: list[tuple[str, str]] = field(default_factory=list)
    #: the ops view: every op boxed inside its group
    layout: Layout | None = None
    #: the collapsed view: one box per group (ids "c<gid>") and the same ports
    group_layout: Layout | None = None

    @property
    def ops(self) -> int:
        return sum(len(g.nodes) for g in self.groups)


def group_title(group: Group, extra: str = "") -> str:
    """The text above a group's box (also used to size it)."""
    n = len(group.nodes)
    return f"g{group.id} · {group.category or '-'} · {n} op{'s' if n != 1 else ''}{extra}"


def truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def split_pages(plan: FusionPlan, page_ops: int = PAGE_OPS) -> list[list[Group]]:
    """Consecutive runs of ``plan.groups``, each at most ``page_ops`` ops (or one group),
    cut where the fewest values cross."""
    groups = plan.groups
    if not groups:
        return [[]]
    pos = {g.id: k for k, g in enumerate(groups)}
    owner = plan.group_of()
    producer_pos = {out: pos[owner[n.name]] for n in plan.graph.nodes for out in n.outputs}
    last_use: dict[str, int] = {}
    for node in plan.graph.nodes:
        for value in node.present_inputs():
            if value in producer_pos:
                last_use[value] = max(last_use.get(value, -1), pos[owner[node.name]])
    # crossing[k]: values produced before position k and used at k or later
    diff = [0] * (len(groups) + 2)
    for value, q in last_use.items():
        p = producer_pos[value]
        if q > p:
            diff[p + 1] += 1
            diff[q + 1] -= 1
    crossing, running = [], 0
    for k in range(len(groups) + 1):
        running += diff[k]
        crossing.append(running)

    sizes = [len(g.nodes) for g in groups]
    pages, start = [], 0
    while start < len(groups):
        total, end = 0, start
        while end < len(groups) and (end == start or total + sizes[end] <= page_ops):
            total += sizes[end]
            end += 1
        if end < len(groups):
            # among cuts that keep the page at least 60% full, the one crossed least
            candidates, acc = [], 0
            for k in range(start + 1, end + 1):
                acc += sizes[k - 1]
                if acc >= 0.6 * page_ops or k == end:
                    candidates.append(k)
            end = min(candidates, key=lambda k: (crossing[k], -k))
        pages.append(groups[start:end])
        start = end
    return pages


def op_width(op: str) -> float:
    return min(NODE_MAX_W, max(NODE_MIN_W, CHAR_W * len(truncate(op, LABEL_CHARS)) + 16))


def build_pages(plan: FusionPlan, page_ops: int = PAGE_OPS, engine: str = "auto") -> list[Page]:
    """Pages of ``plan`` with their boxes, edges and layout."""
    runs = split_pages(plan, page_ops)
    page_of_group = {g.id: k for k, run in enumerate(runs) for g in run}
    owner = plan.group_of()
    graph = plan.graph
    index = {n.name: k for k, n in enumerate(graph.nodes)}
    producer = {out: n for n in graph.nodes for out in n.outputs}
    consumers = graph.consumers()
    stitched = {gid for gid, _ in plan.stitches}
    pack_of = {gid: k for k, pack in enumerate(plan.horizontal) for gid in pack}

    pages = []
    for k, run in enumerate(runs):
        page = Page(k, list(run))
        lg = LayoutGraph({}, [])
        ports: dict[tuple, PageNode] = {}

        def port(key, label, tooltip, goto_group=None, goto_page=None):
            if key not in ports:
                node = PageNode(f"p{k}_{len(ports)}", "port", truncate(label, PORT_CHARS), tooltip,
                                goto_group=goto_group, goto_page=goto_page, incoming=key[0] in ("in", "from"))
                ports[key] = node
                lg.sizes[node.id] = (min(NODE_MAX_W * 1.6, CHAR_W * len(node.label) + 14), NODE_H - 4)
            return ports[key].id

        members = [graph.nodes[index[name]] for g in run for name in g.nodes]
        members.sort(key=lambda n: index[n.name])
        op_ids = {}
        # incoming ports first: the layout wants ids in a topological order
        for node in members:
            for value in node.present_inputs():
                if value in graph.inputs:
                    port(("in", value), f"input {value}", f"graph input {value}: {graph.types[value]}")
                elif value in producer:
                    src_gid = owner[producer[value].name]
                    if page_of_group[src_gid] != k:
                        p = page_of_group[src_gid]
                        port(("from", src_gid), f"from g{src_gid} · page {p + 1}",
                             f"values from group {src_gid} on page {p + 1}", src_gid, p)
        for node in members:
            gid = owner[node.name]
            out_types = ", ".join(str(graph.types[o]) for o in node.outputs)
            pn = PageNode(f"o{index[node.name]}", "op", truncate(node.op, LABEL_CHARS),
                          f"{node.name} ({node.op}) -> {out_types}", node=node.name, group=gid)
            op_ids[node.name] = pn.id
            page.nodes.append(pn)
            lg.sizes[pn.id] = (op_width(node.op), NODE_H)
            lg.cluster_of[pn.id] = f"g{gid}"
        for group in run:
            extra = (" · stitched" if group.id in stitched else "") + \
                    (f" · pack {pack_of[group.id] + 1}" if group.id in pack_of else "")
            lg.cluster_title_width[f"g{group.id}"] = TITLE_CHAR_W * len(group_title(group, extra)) + 8
        edges: dict[tuple[str, str], None] = {}
        for node in members:
            dst = op_ids[node.name]
            for value in node.present_inputs():
                if value in graph.inputs:
                    edges[(ports[("in", value)].id, dst)] = None
                elif value in producer:
                    src_node = producer[value]
                    if src_node.name in op_ids:
                        edges[(op_ids[src_node.name], dst)] = None
                    else:
                        edges[(ports[("from", owner[src_node.name])].id, dst)] = None
        for node in members:
            src = op_ids[node.name]
            for value in node.outputs:
                for user in consumers.get(value, ()):
                    dst_gid = owner[user.name]
                    if page_of_group[dst_gid] != k:
                        p = page_of_group[dst_gid]
                        pid = port(("to", dst_gid), f"to g{dst_gid} · page {p + 1}",
                                   f"values used by group {dst_gid} on page {p + 1}", dst_gid, p)
                        edges[(src, pid)] = None
                if value in graph.outputs:
                    pid = port(("out", value), f"output {value}", f"graph output {value}: {graph.types[value]}")
                    edges[(src, pid)] = None
        page.nodes = [p for p in ports.values() if p.incoming] + page.nodes + \
            [p for p in ports.values() if not p.incoming]
        # ids in topological order: incoming ports, ops in graph order, outgoing ports
        lg.sizes = {p.id: lg.sizes[p.id] for p in page.nodes}
        lg.edges = list(edges)
        page.edges = lg.edges
        page.layout = layout(lg, engine)
        page.group_layout = layout(_collapsed(page, lg), engine)
        pages.append(page)
    return pages



def group_ops_line(group: Group, ops: dict[str, str], limit: int = 44) -> str:
    """The op types of a group in order, for its collapsed box: "conv → mul → add → relu"."""
    return truncate(" → ".join(ops[n] for n in group.nodes), limit)


def _collapsed(page: Page, ops_graph: LayoutGraph) -> LayoutGraph:
    """The page with each group as one box (two lines: title, op types) and the same ports."""
    labels = {n.node: n.label for n in page.nodes if n.kind == "op" and n.node is not None}  # (an op has its node)
    box_of = {n.id: f"c{n.group}" for n in page.nodes if n.kind == "op"}
    lg = LayoutGraph({}, [])
    ports = [n for n in page.nodes if n.kind == "port"]
    # ids in a topological order: incoming ports, groups in plan order, outgoing ports
    for port in ports:
        if port.incoming:
            lg.sizes[port.id] = ops_graph.sizes[port.id]
    for group in page.groups:
        width = max(TITLE_CHAR_W * len(group_title(group)), CHAR_W * len(group_ops_line(group, labels))) + 16
        lg.sizes[f"c{group.id}"] = (width, COLLAPSED_H)
    for port in ports:
        lg.sizes.setdefault(port.id, ops_graph.sizes[port.id])
    lg.edges = list(dict.fromkeys((box_of.get(a, a), box_of.get(b, b)) for a, b in ops_graph.edges
                                  if box_of.get(a, a) != box_of.get(b, b)))
    return lg
