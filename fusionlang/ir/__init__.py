"""What a graph is: tensor types, nodes, graphs, structural verification, printing."""

from fusionlang.ir.graph import Graph, Node
from fusionlang.ir.nxview import SINK, post_dominators, to_networkx
from fusionlang.ir.printer import format_graph
from fusionlang.ir.types import DTYPES, TensorType, canonical_dtype
from fusionlang.ir.verify import verify_structure

__all__ = [
    "DTYPES",
    "Graph",
    "Node",
    "SINK",
    "TensorType",
    "canonical_dtype",
    "format_graph",
    "post_dominators",
    "to_networkx",
    "verify_structure",
]
