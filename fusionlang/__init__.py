"""fusionlang: deep-learning operator fusion with the fusion policy written as data.

    import fusionlang
    graph = fusionlang.from_onnx("model.onnx")
    plan = fusionlang.fuse(graph, "apollo")          # rules by name or .fuse path
    print(plan.summary())
    outputs = fusionlang.compile(plan, target="c").run({"x": x})
    expected = fusionlang.reference.run(graph, {"x": x})
"""

from fusionlang import reference
from fusionlang.api import check_rules, compile, compile_model, from_onnx, fuse, load_rules
from fusionlang.engine.plan import FusionPlan, Group
from fusionlang.errors import FuseError
from fusionlang.ir import Graph, Node, TensorType
from fusionlang.ops import GraphBuilder

__version__ = "0.1.0"

__all__ = [
    "FuseError",
    "FusionPlan",
    "Graph",
    "GraphBuilder",
    "Group",
    "Node",
    "TensorType",
    "check_rules",
    "compile",
    "compile_model",
    "from_onnx",
    "fuse",
    "load_rules",
    "reference",
]
