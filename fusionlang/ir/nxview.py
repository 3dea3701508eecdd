"""A networkx view of a Graph, so graph algorithms come from networkx, not from us."""

from __future__ import annotations

import networkx as nx

from fusionlang.ir.graph import Graph

#: pseudo-node standing for "leaves the graph": the sink for post-dominator trees
SINK = "__sink__"


def to_networkx(graph: Graph, *, with_sink: bool = False) -> nx.DiGraph:
    """One networkx node per op node (keyed by node name, attribute ``node``); an edge
    producer -> consumer per value passed (attribute ``values``: the value names).

    With ``with_sink``, every node producing a graph output also gets an edge to SINK,
    so every node has a path to a single exit (what post-dominance needs).
    """
    dig: nx.DiGraph[str] = nx.DiGraph()
    producers = {}
    for node in graph.nodes:
        dig.add_node(node.name, node=node)
        for out in node.outputs:
            producers[out] = node.name
    for node in graph.nodes:
        for value in node.present_inputs():
            src = producers.get(value)
            if src is None:
                continue
            if dig.has_edge(src, node.name):
                dig.edges[src, node.name]["values"].append(value)
            else:
                dig.add_edge(src, node.name, values=[value])
    if with_sink:
        dig.add_node(SINK)
        consumed = {u for u, _ in dig.edges}
        outputs = set(graph.outputs)
        for node in graph.nodes:
            if node.name not in consumed or outputs.intersection(node.outputs):
                dig.add_edge(node.name, SINK, values=[v for v in node.outputs if v in outputs])
    return dig


def post_dominators(graph: Graph) -> dict[str, str]:
    """Immediate post-dominator of each node (SINK when none inside the graph)."""
    dig = to_networkx(graph, with_sink=True)
    idom = nx.immediate_dominators(dig.reverse(copy=False), SINK)
    return {name: dom for name, dom in idom.items() if name != SINK}
