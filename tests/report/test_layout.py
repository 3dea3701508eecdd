"""Both layout engines: a cluster's box holds exactly its own nodes, boxes never
overlap, and every edge runs from its source's box to its target's."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fusionlang.report.layout import Box, LayoutGraph, dot_available, layout


@st.composite
def clustered_dags(draw):
    n = draw(st.integers(1, 24))
    sizes = {f"v{k}": (draw(st.sampled_from([40.0, 56.0, 90.0, 130.0])), 24.0) for k in range(n)}
    edges = sorted({(f"v{a}", f"v{b}") for a in range(n) for b in range(a + 1, n)
                    if draw(st.integers(0, 9)) < 2})
    # clusters are runs of consecutive ids, like groups of a plan in topological order
    cluster_of, k, c = {}, 0, 0
    while k < n:
        run = draw(st.integers(1, 4))
        if draw(st.booleans()):
            for j in range(k, min(n, k + run)):
                cluster_of[f"v{j}"] = f"c{c}"
            c += 1
        k += run
    titles = {cid: draw(st.sampled_from([30.0, 120.0, 260.0])) for cid in set(cluster_of.values())}
    return LayoutGraph(sizes, edges, cluster_of, titles)


def inside(inner: Box, outer: Box) -> bool:
    eps = 0.51
    return (inner.x >= outer.x - eps and inner.y >= outer.y - eps and inner.x + inner.w <= outer.x + outer.w + eps
            and inner.y + inner.h <= outer.y + outer.h + eps)


def overlap(a: Box, b: Box) -> bool:
    return a.x < b.x + b.w - 0.5 and b.x < a.x + a.w - 0.5 and a.y < b.y + b.h - 0.5 and b.y < a.y + a.h - 0.5


def check(graph: LayoutGraph, engine: str) -> None:
    result = layout(graph, engine)
    assert set(result.nodes) == set(graph.sizes)
    assert set(result.clusters) == set(graph.cluster_of.values())
    for nid, box in result.nodes.items():
        assert (box.w, box.h) == pytest.approx(graph.sizes[nid])
        assert 0 <= box.x and box.x + box.w <= result.width + 0.5
        assert 0 <= box.y and box.y + box.h <= result.height + 0.5
    ids = list(result.nodes)
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            assert not overlap(result.nodes[a], result.nodes[b]), (a, b)
    for cid, box in result.clusters.items():
        for nid, nbox in result.nodes.items():
            if graph.cluster_of.get(nid) == cid:
                assert inside(nbox, box), (nid, cid)
            else:
                assert not overlap(nbox, box), (nid, cid)
    cids = list(result.clusters)
    for i, a in enumerate(cids):
        for b in cids[i + 1:]:
            assert not overlap(result.clusters[a], result.clusters[b]), (a, b)
    assert [(a, b) for a, b, _ in result.edges] == graph.edges or engine == "dot"
    for a, b, points in result.edges:
        assert len(points) % 3 == 1 and len(points) >= 4
        src, dst = result.nodes[a], result.nodes[b]
        if engine == "layered":
            assert points[0] == pytest.approx((src.cx, src.bottom))
            assert points[-1] == pytest.approx((dst.cx, dst.y))


@given(clustered_dags())
def test_layered_layout(graph):
    check(graph, "layered")


@pytest.mark.skipif(not dot_available(), reason="Graphviz dot is not installed")
@given(clustered_dags())
def test_dot_layout(graph):
    check(graph, "dot")


def test_layered_layout_puts_producers_above_consumers():
    graph = LayoutGraph({"a": (40, 24), "b": (40, 24), "c": (40, 24), "d": (40, 24)},
                        [("a", "b"), ("b", "c"), ("a", "c"), ("c", "d")], {"b": "g", "c": "g"})
    result = layout(graph, "layered")
    y = {k: box.y for k, box in result.nodes.items()}
    assert y["a"] < y["b"] < y["c"] < y["d"]


def test_layered_layout_routes_long_edges_around_boxes():
    # a -> d skips two layers: it runs through dummy positions beside b and c
    graph = LayoutGraph({k: (60, 24) for k in "abcd"}, [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")])
    result = layout(graph, "layered")
    (points,) = [p for s, t, p in result.edges if (s, t) == ("a", "d")]
    assert len(points) == 3 * 5 + 1  # start, two points per dummy, end
    for x, y in points[3:-1:3]:
        for k in "bc":
            box = result.nodes[k]
            assert not (box.x <= x <= box.x + box.w and box.y <= y <= box.bottom)


def test_unknown_engine_is_refused():
    with pytest.raises(ValueError, match="unknown layout engine"):
        layout(LayoutGraph({"a": (10, 10)}, []), "neato")
