"""fusionlang: deep-learning operator fusion with the fusion policy written as data."""

from fusionlang import reference
from fusionlang.errors import FuseError
from fusionlang.ir import Graph, Node, TensorType
from fusionlang.ops import GraphBuilder

__version__ = "0.1.0"

__all__ = ["FuseError", "Graph", "GraphBuilder", "Node", "TensorType", "reference"]
