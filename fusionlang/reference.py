"""``fusionlang.reference.run(graph, feeds)``: the NumPy oracle (see fusionlang.ops.interpreter)."""

from fusionlang.ops.interpreter import run

__all__ = ["run"]
