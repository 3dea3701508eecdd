"""Op-aware graph verification: structure, then every node against its OpDef."""

from __future__ import annotations

from fusionlang.errors import GraphError
from fusionlang.ir.graph import Graph
from fusionlang.ir.verify import verify_structure
from fusionlang.ops.interpreter import registry_of
from fusionlang.ops.registry import OpCall, OpRegistry


def verify_graph(graph: Graph, registry: OpRegistry | None = None) -> None:
    """Raise a FuseError on the first defect: structure, unknown op, arity, attributes,
    or a recorded type that differs from the inferred one."""
    verify_structure(graph)
    registry = registry_of(graph, registry)
    for node in graph.nodes:
        in_types = [graph.types[v] if v else None for v in node.inputs]
        in_values = [graph.constants.get(v) for v in node.inputs]
        inferred = registry.infer(node.op, node.name, node.attrs, in_types, in_values)
        if len(inferred) < len(node.outputs):
            raise GraphError(f"node {node.name!r} ({node.op}) has {len(node.outputs)} outputs; the op makes "
                             f"{len(inferred)}")
        for out, want in zip(node.outputs, inferred):
            if graph.types[out] != want:
                raise GraphError(f"node {node.name!r} ({node.op}): output {out!r} is recorded as "
                                 f"{graph.types[out]} but the op computes {want}")


def op_call(graph: Graph, node, registry: OpRegistry | None = None) -> OpCall:
    """The OpCall of an existing node, with input and output types filled in."""
    registry = registry_of(graph, registry)
    opdef = registry.get(node.op, f"node {node.name!r}")
    call = OpCall(node.op, node.name, dict(node.attrs), [graph.types[v] if v else None for v in node.inputs],
                  [graph.types[v] for v in node.outputs], [graph.constants.get(v) for v in node.inputs])
    call.attrs = opdef.normalize_attrs(call.attrs, f"node {node.name!r}")
    return call
