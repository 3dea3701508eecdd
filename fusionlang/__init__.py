"""fusionlang: deep-learning operator fusion with the fusion policy written as data.

    import fusionlang
    graph = fusionlang.from_onnx("model.onnx")
    plan = fusionlang.fuse(graph, "apollo")          # rules by name or .fuse path
    print(plan.summary())
    outputs = fusionlang.compile(plan, target="c").run({"x": x})
    expected = fusionlang.reference.run(graph, {"x": x})
"""

from fusionlang import reference
from fusionlang.api import compile, compile_model, from_onnx, fuse, load_rules
from fusionlang.engine.plan import FusionPlan, Group
from fusionlang.errors import FuseError
from fusionlang.ir import Graph, Node, TensorType
from fusionlang.ops import GraphBuilder
from fusionlang.specialize import Specializer
from fusionlang.version import __version__

__all__ = [
    "FuseError",
    "FusionPlan",
    "Graph",
    "GraphBuilder",
    "Group",
    "Node",
    "Specializer",
    "TensorType",
    "check_rules",
    "compile",
    "compile_model",
    "from_onnx",
    "fuse",
    "load_rules",
    "reference",
]


def __getattr__(name: str):
    # check_rules lives in fusionlang.testing, which sits above every package (no library
    # module imports it) and needs the optional hypothesis: this facade, the one place
    # above both, reaches it on first use only (PEP 562), so `import fusionlang` stays
    # cheap and works without the test extra
    if name == "check_rules":
        from fusionlang.testing.checker import check_rules

        return check_rules
    raise AttributeError(f"module 'fusionlang' has no attribute {name!r}")
