"""fusionlang: deep-learning operator fusion with the fusion policy written as data.

    import fusionlang
    graph = fusionlang.from_onnx("model.onnx")
    plan = fusionlang.fuse(graph, "apollo")          # rules by name or .fuse path
    print(plan.summary())
    compiled = fusionlang.compile(plan, target="c")
    outputs = compiled.run({"x": x})
    compiled.save("model.fl")                        # a directory; load it in any process:
    outputs = fusionlang.load("model.fl").run({"x": x})  # no compiler, no islpy/sympy/lark
    expected = fusionlang.reference.run(graph, {"x": x})
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from fusionlang.version import VERSION as __version__

if TYPE_CHECKING:  # what the names below are, for type checkers and readers
    from fusionlang import reference
    from fusionlang.api import compile, compile_model, from_onnx, from_torch, fuse, load_rules, save_fused_onnx
    from fusionlang.backend.artifact import LoadedGraph, load
    from fusionlang.engine.plan import FusionPlan, Group
    from fusionlang.errors import FuseError
    from fusionlang.ir import Graph, Node, TensorType
    from fusionlang.ops import GraphBuilder
    from fusionlang.specialize import Specializer
    from fusionlang.testing.checker import check_rules


#: public name -> the module that defines it. The facade imports nothing heavy up front
#: (PEP 562): ml_dtypes, sympy, islpy, lark and onnx cost about two seconds to import,
#: which `import fusionlang` and `fusionlang --help` should not pay before anything is used.
#: check_rules lives in fusionlang.testing, above every package, and needs the optional
#: hypothesis.
_EXPORTS = {
    "reference": "fusionlang.reference",
    "compile": "fusionlang.api",
    "compile_model": "fusionlang.api",
    "from_onnx": "fusionlang.api",
    "from_torch": "fusionlang.api",
    "fuse": "fusionlang.api",
    "load_rules": "fusionlang.api",
    "save_fused_onnx": "fusionlang.api",
    "load": "fusionlang.backend.artifact",
    "LoadedGraph": "fusionlang.backend.artifact",
    "FusionPlan": "fusionlang.engine.plan",
    "Group": "fusionlang.engine.plan",
    "FuseError": "fusionlang.errors",
    "Graph": "fusionlang.ir",
    "Node": "fusionlang.ir",
    "TensorType": "fusionlang.ir",
    "GraphBuilder": "fusionlang.ops",
    "Specializer": "fusionlang.specialize",
    "check_rules": "fusionlang.testing.checker",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'fusionlang' has no attribute {name!r}")
    module = importlib.import_module(module_name)
    value = module if module_name == f"fusionlang.{name}" else getattr(module, name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
