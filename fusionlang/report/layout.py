"""Where each box of the report's graph goes: Graphviz ``dot`` when it is installed, a
pure-Python layered (Sugiyama-style) layout otherwise.

Both engines take the same :class:`LayoutGraph` (node sizes, clusters, edges; ids only,
never names from a model) and return the same :class:`Layout` (boxes, cluster boxes and
every edge as cubic Bezier control points), so the SVG writer does not care which ran.

The pure-Python engine lays out clusters as blocks: the ops of each cluster are laid out
first, the cluster becomes one rectangle, and the rectangles are laid out in layers.
Cluster boxes therefore never overlap and never contain a foreign node, which is what a
fused group's box must promise. Each level is classic: longest-path layering, dummy
nodes on edges that skip layers, barycenter ordering sweeps (keeping the ordering with
the fewest crossings), and x coordinates pulled towards neighbours by isotonic
regression under the minimum-separation constraints.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field

Point = tuple[float, float]


@dataclass
class LayoutGraph:
    """What to lay out. Node ids are listed in a topological order of ``edges``."""

    #: node id -> (width, height)
    sizes: dict[str, tuple[float, float]]
    edges: list[tuple[str, str]]
    #: node id -> cluster id (absent: the node stands alone)
    cluster_of: dict[str, str] = field(default_factory=dict)
    #: cluster id -> minimum width of its title
    cluster_title_width: dict[str, float] = field(default_factory=dict)


@dataclass
class Box:
    """A rectangle: top-left corner, width, height."""

    x: float
    y: float
    w: float
    h: float

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def bottom(self) -> float:
        return self.y + self.h


@dataclass
class Layout:
    """Placed boxes; each edge is ``(src, dst, points)`` with points ``p0 c1 c2 p1 c1 c2 p2 ...``."""

    width: float
    height: float
    nodes: dict[str, Box]
    clusters: dict[str, Box]
    edges: list[tuple[str, str, list[Point]]]
    engine: str


#: gaps (px) the layered engine keeps between boxes and around cluster contents
GAP_X, GAP_Y, PAD, HEADER = 18.0, 26.0, 8.0, 20.0
DUMMY_WIDTH = 6.0
MARGIN = 10.0


def dot_available() -> bool:
    """Whether Graphviz's ``dot`` is on PATH."""
    return shutil.which("dot") is not None


def layout(graph: LayoutGraph, engine: str = "auto") -> Layout:
    """Lay ``graph`` out with ``engine``: "dot", "layered" or "auto" (dot when on PATH).

    With "auto", a dot that fails on this graph (it can, on large clustered graphs) is
    replaced by the layered engine and the Layout's ``engine`` says so.
    """
    if engine not in ("auto", "dot", "layered"):
        raise ValueError(f"unknown layout engine {engine!r} (expected auto, dot or layered)")
    if engine == "layered" or (engine == "auto" and not dot_available()):
        return layered_layout(graph)
    try:
        return dot_layout(graph)
    except DotFailed as exc:
        if engine == "dot":
            raise
        result = layered_layout(graph)
        result.engine = f"layered (dot failed: {exc})"
        return result


# ----- Graphviz ---------------------------------------------------------------------------
class DotFailed(RuntimeError):
    """dot exited with an error or printed something that is not a layout."""


def dot_layout(graph: LayoutGraph, dot: str = "dot", timeout: float = 120.0) -> Layout:
    """Lay ``graph`` out with Graphviz (``dot -Tjson``); only generated ids reach dot."""
    ids = {nid: f"n{k}" for k, nid in enumerate(graph.sizes)}
    clusters: dict[str, list[str]] = {}
    for nid in graph.sizes:
        if nid in graph.cluster_of:
            clusters.setdefault(graph.cluster_of[nid], []).append(nid)
    cids = {cid: f"cluster_{k}" for k, cid in enumerate(clusters)}
    lines = ["digraph G {",
             "graph [rankdir=TB, nodesep=0.25, ranksep=0.35, fontsize=11, fontname=\"monospace\"];",
             "node [shape=box, fixedsize=true, label=\"\"];",
             "edge [arrowhead=none];"]

    def node_line(nid: str) -> str:
        w, h = graph.sizes[nid]
        return f"{ids[nid]} [width={w / 72:.4f}, height={h / 72:.4f}];"

    for cid, members in clusters.items():
        # the title is drawn later; dot only reserves room for it with a placeholder
        chars = max(1, int(graph.cluster_title_width.get(cid, 40) / 7))
        lines.append(f"subgraph {cids[cid]} {{ label=\"{'X' * chars}\"; labeljust=l; margin=8;")
        lines.extend(node_line(nid) for nid in members)
        lines.append("}")
    lines.extend(node_line(nid) for nid in graph.sizes if nid not in graph.cluster_of)
    lines.extend(f"{ids[a]} -> {ids[b]};" for a, b in graph.edges)
    lines.append("}")
    try:
        proc = subprocess.run([dot, "-Tjson"], input="\n".join(lines), capture_output=True, text=True,
                              timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DotFailed(str(exc)) from None
    if proc.returncode != 0:
        raise DotFailed((proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[0])
    try:
        data = json.loads(proc.stdout)
        return _from_dot_json(data, graph, ids, cids)
    except (ValueError, KeyError, IndexError) as exc:
        raise DotFailed(f"unexpected output: {exc}") from None


def _from_dot_json(data: dict, graph: LayoutGraph, ids: dict, cids: dict) -> Layout:
    x0, y0, x1, y1 = (float(v) for v in data["bb"].split(","))
    height = y1 - y0

    def pt(text: str) -> Point:
        x, y = text.split(",")[-2:]
        return (float(x) - x0 + MARGIN, height - (float(y) - y0) + MARGIN)

    by_gvid = {}
    nodes, clusters = {}, {}
    back = {v: k for k, v in ids.items()}
    cback = {v: k for k, v in cids.items()}
    for obj in data.get("objects", []):
        name = obj.get("name", "")
        by_gvid[obj.get("_gvid")] = name
        if name in cback and "bb" in obj:
            bx0, by0, bx1, by1 = (float(v) for v in obj["bb"].split(","))
            left, top = pt(f"{bx0},{by1}")
            clusters[cback[name]] = Box(left, top, bx1 - bx0, by1 - by0)
        elif name in back and "pos" in obj:
            cx, cy = pt(obj["pos"])
            w, h = graph.sizes[back[name]]
            nodes[back[name]] = Box(cx - w / 2, cy - h / 2, w, h)
    edges = []
    for edge in data.get("edges", []):
        src, dst = back[by_gvid[edge["tail"]]], back[by_gvid[edge["head"]]]
        points = [pt(tok) for tok in edge["pos"].split() if not tok.startswith(("e,", "s,"))]
        edges.append((src, dst, points))
    return Layout(x1 - x0 + 2 * MARGIN, height + 2 * MARGIN, nodes, clusters, edges, "dot")


# ----- pure Python: layered layout ------------------------------------------------------------
@dataclass
class _Placed:
    """One level of the layered engine: centres of the real nodes, the dummy chain of each
    edge (x, layer top, layer bottom), and the extent."""

    centers: dict[str, Point]
    chains: dict[tuple[str, str], list[tuple[float, float, float]]]
    width: float
    height: float


def layered_layout(graph: LayoutGraph) -> Layout:
    """The pure-Python engine (see the module docstring)."""
    members: dict[str, list[str]] = {}
    for nid in graph.sizes:
        if nid in graph.cluster_of:
            members.setdefault(graph.cluster_of[nid], []).append(nid)
    block_of = {nid: graph.cluster_of.get(nid, nid) for nid in graph.sizes}

    # 1. inside each cluster
    inner: dict[str, _Placed] = {}
    block_size: dict[str, tuple[float, float]] = {}
    for cid, ids in members.items():
        idset = set(ids)
        inside = [(a, b) for a, b in graph.edges if a in idset and b in idset]
        placed = _layer_and_place(ids, {n: graph.sizes[n] for n in ids}, inside)
        inner[cid] = placed
        width = max(placed.width, graph.cluster_title_width.get(cid, 0.0)) + 2 * PAD
        block_size[cid] = (width, placed.height + HEADER + PAD)
    for nid in graph.sizes:
        if nid not in graph.cluster_of:
            block_size[nid] = graph.sizes[nid]

    # 2. the blocks
    order = list(dict.fromkeys(block_of[n] for n in graph.sizes))
    block_edges = list(dict.fromkeys((block_of[a], block_of[b]) for a, b in graph.edges
                                     if block_of[a] != block_of[b]))
    outer = _layer_and_place(order, block_size, block_edges)

    blocks: dict[str, Box] = {}
    for bid, (cx, cy) in outer.centers.items():
        w, h = block_size[bid]
        blocks[bid] = Box(cx - w / 2 + MARGIN, cy - h / 2 + MARGIN, w, h)
    nodes: dict[str, Box] = {}
    clusters: dict[str, Box] = {}
    for nid in graph.sizes:
        w, h = graph.sizes[nid]
        block = blocks[block_of[nid]]
        if nid in graph.cluster_of:
            cid = graph.cluster_of[nid]
            clusters[cid] = block
            cx, cy = inner[cid].centers[nid]
            # centre the contents when the title made the box wider than they are
            dx = (block.w - 2 * PAD - inner[cid].width) / 2
            nodes[nid] = Box(block.x + PAD + dx + cx - w / 2, block.y + HEADER + cy - h / 2, w, h)
        else:
            nodes[nid] = Box(block.x, block.y, w, h)

    edges: list[tuple[str, str, list[Point]]] = []
    for a, b in graph.edges:
        src, dst = nodes[a], nodes[b]
        start, end = (src.cx, src.bottom), (dst.cx, dst.y)
        via: list[Point] = []
        ba, bb = block_of[a], block_of[b]
        if ba == bb and ba in inner:
            origin = nodes[a].x - inner[ba].centers[a][0] + graph.sizes[a][0] / 2, blocks[ba].y + HEADER
            for x, top, bottom in inner[ba].chains.get((a, b), []):
                via += [(origin[0] + x, origin[1] + top), (origin[0] + x, origin[1] + bottom)]
        elif ba != bb:
            for x, top, bottom in outer.chains.get((ba, bb), []):
                via += [(x + MARGIN, top + MARGIN), (x + MARGIN, bottom + MARGIN)]
        edges.append((a, b, _smooth([start, *via, end])))
    return Layout(outer.width + 2 * MARGIN, outer.height + 2 * MARGIN, nodes, clusters, edges, "layered")


def _smooth(points: list[Point]) -> list[Point]:
    """Cubic Bezier control points through ``points`` with vertical tangents."""
    out = [points[0]]
    for (ax, ay), (bx, by) in zip(points, points[1:]):
        mid = (ay + by) / 2
        out += [(ax, mid), (bx, mid), (bx, by)]
    return out


def _layer_and_place(ids: list[str], sizes: dict[str, tuple[float, float]],
                     edges: list[tuple[str, str]]) -> _Placed:
    position = {n: k for k, n in enumerate(ids)}
    # edges against the given order would make cycles; lay out without them
    forward = [(a, b) for a, b in edges if position[a] < position[b]]
    preds: dict[str, list[str]] = {n: [] for n in ids}
    succs: dict[str, list[str]] = {n: [] for n in ids}
    for a, b in forward:
        preds[b].append(a)
        succs[a].append(b)

    layer: dict[str, int] = {}
    for n in ids:  # longest path from the sources
        layer[n] = 1 + max((layer[p] for p in preds[n]), default=-1)
    for n in reversed(ids):  # sources sink down to just above their first consumer
        if not preds[n] and succs[n]:
            layer[n] = min(layer[s] for s in succs[n]) - 1

    # dummy nodes: an edge spanning k layers gets k - 1 of them
    rows: dict[int, list[str]] = {}
    width = {n: sizes[n][0] for n in ids}
    up: dict[str, list[str]] = {n: list(preds[n]) for n in ids}
    down: dict[str, list[str]] = {n: list(succs[n]) for n in ids}
    chains: dict[tuple[str, str], list[str]] = {}
    for n in ids:
        rows.setdefault(layer[n], []).append(n)
    for a, b in forward:
        if layer[b] - layer[a] <= 1:
            continue
        down[a].remove(b)
        up[b].remove(a)
        prev = a
        chain = []
        for lvl in range(layer[a] + 1, layer[b]):
            d = f"\0dummy:{len(width)}"
            width[d] = DUMMY_WIDTH
            layer[d] = lvl
            rows.setdefault(lvl, []).append(d)
            up[d], down[d] = [prev], []
            down[prev].append(d)
            chain.append(d)
            prev = d
        down[prev].append(b)
        up[b].append(prev)
        chains[(a, b)] = chain
    levels = [rows[k] for k in sorted(rows)]

    levels = _order(levels, up, down)
    xs = _assign_x(levels, width, up, down)

    tops, heights = [], []
    y = 0.0
    for row in levels:
        h = max((sizes[n][1] for n in row if n in sizes), default=0.0)
        tops.append(y)
        heights.append(h)
        y += h + GAP_Y
    total_h = max(0.0, y - GAP_Y)
    left = min((xs[n] - width[n] / 2 for row in levels for n in row), default=0.0)
    right = max((xs[n] + width[n] / 2 for row in levels for n in row), default=0.0)
    centers = {}
    for k, row in enumerate(levels):
        for n in row:
            if n in sizes:
                centers[n] = (xs[n] - left, tops[k] + heights[k] / 2)
    level_of = {n: k for k, row in enumerate(levels) for n in row}
    placed_chains = {edge: [(xs[d] - left, tops[level_of[d]], tops[level_of[d]] + heights[level_of[d]])
                            for d in chain] for edge, chain in chains.items()}
    return _Placed(centers, placed_chains, right - left, total_h)


def _order(levels: list[list[str]], up: dict, down: dict, sweeps: int = 8) -> list[list[str]]:
    """Barycenter sweeps (down, then up, alternately); returns the ordering seen with the
    fewest crossings."""
    levels = [list(row) for row in levels]
    best, best_crossings = [list(r) for r in levels], _crossings(levels, down)
    for sweep in range(sweeps):
        downward = sweep % 2 == 0
        rng = range(1, len(levels)) if downward else range(len(levels) - 2, -1, -1)
        for k in rng:
            ref = levels[k - 1] if downward else levels[k + 1]
            pos = {n: i for i, n in enumerate(ref)}
            neigh = up if downward else down

            def key(item, pos=pos, neigh=neigh):
                i, n = item
                ps = [pos[m] for m in neigh[n] if m in pos]
                return (sum(ps) / len(ps) if ps else i, i)

            levels[k] = [n for _, n in sorted(enumerate(levels[k]), key=key)]
        crossings = _crossings(levels, down)
        if crossings < best_crossings:
            best, best_crossings = [list(r) for r in levels], crossings
    return best


def _crossings(levels: list[list[str]], down: dict) -> int:
    total = 0
    for row, below in zip(levels, levels[1:]):
        pos = {n: i for i, n in enumerate(below)}
        pairs = sorted((i, pos[m]) for i, n in enumerate(row) for m in down[n] if m in pos)
        # count inversions of the targets (pairs already sorted by source)
        targets = [t for _, t in pairs]
        total += _inversions(targets)
    return total


def _inversions(seq: list[int]) -> int:
    if len(seq) < 2:
        return 0
    mid = len(seq) // 2
    left, right = seq[:mid], seq[mid:]
    count = _inversions(left) + _inversions(right)
    i, j = 0, 0
    left, right = sorted(left), sorted(right)
    while i < len(left) and j < len(right):
        if left[i] <= right[j]:
            i += 1
        else:
            count += len(left) - i
            j += 1
    return count


def _assign_x(levels: list[list[str]], width: dict, up: dict, down: dict, rounds: int = 6) -> dict[str, float]:
    xs: dict[str, float] = {}
    for row in levels:  # packed left to right
        x = 0.0
        for n in row:
            xs[n] = x + width[n] / 2
            x += width[n] + GAP_X
    for r in range(rounds):
        last = r == rounds - 1
        downward = r % 2 == 0
        seq = range(len(levels)) if downward else range(len(levels) - 1, -1, -1)
        for k in seq:
            row = levels[k]
            wanted = []
            for n in row:
                ns = (up[n] + down[n]) if last else (up[n] if downward else down[n])
                wanted.append(sum(xs[m] for m in ns) / len(ns) if ns else xs[n])
            for n, x in zip(row, _pava_place(wanted, [width[n] for n in row])):
                xs[n] = x
    return xs


def _pava_place(wanted: list[float], widths: list[float]) -> list[float]:
    """x closest (least squares) to ``wanted`` keeping order and GAP_X between boxes."""
    # shift by the cumulative separation so the constraint becomes y[i+1] >= y[i]
    offsets, acc = [], 0.0
    for i, w in enumerate(widths):
        if i:
            acc += widths[i - 1] / 2 + GAP_X + w / 2
        offsets.append(acc)
    target = [w - o for w, o in zip(wanted, offsets)]
    blocks: list[list[float]] = []  # [mean, count]
    for t in target:
        blocks.append([t, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, c2 = blocks.pop()
            m1, c1 = blocks.pop()
            blocks.append([(m1 * c1 + m2 * c2) / (c1 + c2), c1 + c2])
    y = [m for m, c in blocks for _ in range(int(c))]
    return [v + o for v, o in zip(y, offsets)]
