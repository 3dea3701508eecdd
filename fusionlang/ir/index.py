"""NodeIndex: a graph's derived maps (name -> node and position, producers, consumers), built once.

Passes ask "which node is called X", "who computes value v" and "who reads v" all the
time; each used to build its own dict by scanning the node list. A Graph builds one
NodeIndex on the first such question and keeps it until the graph changes (see
:attr:`fusionlang.ir.graph.Graph.index`). The maps are read-only views: a pass that
needs maps it can edit (the rewriter's GraphIndex) copies them.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:  # graph.py imports this module; the names are for annotations only
    from fusionlang.ir.graph import Node


class NodeIndex:
    """Read-only lookups over one version of a graph's node list."""

    def __init__(self, nodes: list["Node"]):
        by_name: dict[str, Node] = {}
        producers: dict[str, Node] = {}
        users: dict[str, list[Node]] = {}
        for node in nodes:
            by_name[node.name] = node
            for out in node.outputs:
                producers[out] = node
            for value in dict.fromkeys(node.present_inputs()):
                users.setdefault(value, []).append(node)
        #: how many nodes the list held when this index was built (a cheap staleness check)
        self.size = len(nodes)
        #: node name -> node
        self.by_name: Mapping[str, Node] = MappingProxyType(by_name)
        #: node name -> its position in the node list
        self.position: Mapping[str, int] = MappingProxyType({node.name: k for k, node in enumerate(nodes)})
        #: value name -> the node computing it (graph inputs and constants are absent)
        self.producers: Mapping[str, Node] = MappingProxyType(producers)
        #: value name -> the nodes reading it, in node order (a node reading twice appears once)
        self.consumers: Mapping[str, tuple[Node, ...]] = MappingProxyType(
            {value: tuple(readers) for value, readers in users.items()})
