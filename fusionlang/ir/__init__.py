"""What a graph is: tensor types, nodes, graphs, structural verification, printing."""

from typing import TYPE_CHECKING

from fusionlang.ir.graph import Graph, Node
from fusionlang.ir.printer import format_graph
from fusionlang.ir.types import DTYPES, TensorType, canonical_dtype
from fusionlang.ir.verify import verify_structure

if TYPE_CHECKING:
    from fusionlang.ir.nxview import SINK, post_dominators, to_networkx


def __getattr__(name: str):
    """The networkx view, imported on first use: networkx takes a tenth of a second to
    import, which reading a rule file (`lint`) does not need."""
    if name in ("SINK", "post_dominators", "to_networkx"):
        from fusionlang.ir import nxview
        return getattr(nxview, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
