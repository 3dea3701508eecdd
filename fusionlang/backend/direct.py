"""What the C target's direct kernels (an op with a kernel of its own instead of a loop
nest: LRN, segment_sum, a tiled transpose) ask of a group first: that it is one node of
their op."""

from __future__ import annotations

from fusionlang.ir.graph import Graph, Node


def lone_node(graph: Graph, names: list[str], op: str) -> Node | None:
    """The one node of the group ``names`` when it is a single ``op`` node, else None."""
    if len(names) != 1:
        return None
    node = graph.node(names[0])
    return node if node.op == op else None


__all__ = ["lone_node"]
