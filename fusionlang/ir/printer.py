"""A readable text form of a Graph (for humans and golden tests; not parsed back)."""

from __future__ import annotations

import numpy as np

from fusionlang.ir.graph import Graph


def format_attr(value) -> str:
    if isinstance(value, np.ndarray):
        if value.size <= 8:
            return f"tensor{list(value.ravel().tolist())}"
        return f"tensor<{value.dtype}{list(value.shape)}>"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_attr(v) for v in value) + "]"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def format_graph(graph: Graph, *, max_constants: int = 20) -> str:
    """The graph as readable text: inputs, constants (at most ``max_constants``), one line
    per node with typed values, outputs."""
    def typed(value: str) -> str:
        return f"%{value}: {graph.types[value]}"

    lines = [f"graph {graph.name}({', '.join(typed(v) for v in graph.inputs)}) {{"]
    for i, (name, array) in enumerate(graph.constants.items()):
        if i == max_constants:
            lines.append(f"  ... {len(graph.constants) - max_constants} more constants")
            break
        lines.append(f"  const {typed(name)} = {format_attr(array)}")
    for node in graph.nodes:
        outs = ", ".join(typed(v) for v in node.outputs)
        ins = ", ".join(f"%{v}" if v else "_" for v in node.inputs)
        attrs = ""
        if node.attrs:
            attrs = " {" + ", ".join(f"{k}={format_attr(v)}" for k, v in sorted(node.attrs.items())) + "}"
        lines.append(f"  {outs} = {node.op}({ins}){attrs}  # {node.name}")
    lines.append(f"  return {', '.join('%' + v for v in graph.outputs)}")
    lines.append("}")
    return "\n".join(lines)
