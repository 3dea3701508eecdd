"""The graph verifier: structural checks that need no op knowledge.

Op-level checks (arity, attributes, inferred types) are added by
``fusionlang.ops.verify_ops``, which calls this first.
"""

from __future__ import annotations

from fusionlang.errors import GraphError
from fusionlang.ir.graph import Graph


def verify_structure(graph: Graph) -> None:
    """Raise GraphError on the first structural defect found, naming the node or value."""
    seen_nodes: set[str] = set()
    defined: dict[str, str] = {}
    for name in graph.inputs:
        _define(defined, name, "graph input")
        if name not in graph.types:
            raise GraphError(f"graph input {name!r} has no type")
    for name in graph.constants:
        _define(defined, name, "constant")
        if name not in graph.types:
            raise GraphError(f"constant {name!r} has no type")
    for node in graph.nodes:
        if node.name in seen_nodes:
            raise GraphError(f"two nodes are named {node.name!r}")
        seen_nodes.add(node.name)
        if not node.outputs:
            raise GraphError(f"node {node.name!r} ({node.op}) has no outputs")
        for out in node.outputs:
            _define(defined, out, f"output of node {node.name!r}")
            if out not in graph.types:
                raise GraphError(f"value {out!r} (output of node {node.name!r}) has no type")
    for node in graph.nodes:
        for value in node.present_inputs():
            if value not in defined:
                raise GraphError(f"node {node.name!r} ({node.op}) reads {value!r}, which nothing defines")
    for value in graph.outputs:
        if value not in defined:
            raise GraphError(f"graph output {value!r} is not defined")
    # topological order (also detects cycles); verification leaves the order it finds
    # intact when it is already topological
    position = {out: i for i, node in enumerate(graph.nodes) for out in node.outputs}
    for i, node in enumerate(graph.nodes):
        for value in node.present_inputs():
            if position.get(value, -1) >= i:
                probe = graph.copy()
                probe.toposort()  # raises on a cycle with the nodes involved
                raise GraphError(
                    f"nodes are not in topological order: {node.name!r} reads {value!r} before it is computed"
                )


def _define(defined: dict[str, str], name: str, what: str) -> None:
    if name in defined:
        raise GraphError(f"value {name!r} is defined twice ({defined[name]} and {what})")
    defined[name] = what
