"""What the loop fuser's verdict on a group depends on, without names (see
:func:`group_signature`): groups with equal signatures get the same verdict and the same
schedule, so a block a model repeats is judged and scheduled once.
"""

from __future__ import annotations

import numpy as np

from fusionlang.ir.graph import Graph
from fusionlang.ir.types import is_float_dtype


def group_signature(graph: Graph, node_names: list[str], constants: dict | None = None) -> tuple:
    """What the loop fuser's verdict on the group depends on, without names: per node (in
    graph order) its op, attributes, output types and whether each output is used after
    the group, and per input the node and output producing it inside the group, or its
    type outside (one number per distinct outside value, so ``x * x`` differs from
    ``x * y``). Of constants it keeps what access specs and literals see: the values of
    non-float and one-element ones; other float data (weights) never shapes a loop nest,
    so two layers differing only in weights share one signature. ``constants``: the values
    known at compile time (default: the graph's constants). Raises KeyError for a node not
    in the graph."""
    constants = graph.constants if constants is None else constants
    nodes = in_graph_order(graph, node_names)
    used_after = _used_after(graph, nodes)
    produced = {v: (k, j) for k, n in enumerate(nodes) for j, v in enumerate(n.outputs) if v}
    outside: dict[str, int] = {}
    signature = []
    for node in nodes:
        inputs: list[tuple | None] = []
        for v in node.inputs:
            if not v:
                inputs.append(None)
            elif v in produced:
                inputs.append(produced[v])
            else:
                number = outside.setdefault(v, len(outside))
                inputs.append((number, _type_key(graph, v), _constant_key(constants.get(v))))
        outputs = tuple((_type_key(graph, v), v in used_after) if v else None for v in node.outputs)
        signature.append((node.op, _frozen(node.attrs), tuple(inputs), outputs))
    return tuple(signature)


def in_graph_order(graph: Graph, node_names: list[str]) -> list:
    """The nodes named, in the graph's order (through ``graph.index``, built once per
    version of the graph: a model's partition asks for hundreds of signatures of one graph,
    and a whole-graph scan for each was a tenth of planning densenet121)."""
    index = graph.index
    return [index.by_name[n] for n in sorted(set(node_names), key=index.position.__getitem__)]


def _used_after(graph: Graph, nodes: list) -> set[str]:
    """Values the nodes produce that another node reads or that leave the graph."""
    consumers = graph.index.consumers
    members = {n.name for n in nodes}
    outputs = set(graph.outputs)
    return {v for n in nodes for v in n.outputs
            if v and (v in outputs or any(r.name not in members for r in consumers.get(v, ())))}


def _type_key(graph: Graph, value: str) -> tuple:
    t = graph.types[value]
    return tuple(int(d) for d in t.shape), str(t.dtype)


def _constant_key(array) -> tuple | None:
    if array is None:
        return None
    a = np.asarray(array)
    if is_float_dtype(a.dtype) and a.size > 1:
        return ("const",)
    return ("const", a.dtype.str, a.shape, a.tobytes())


def _frozen(value):
    """A hashable, comparable form of an attribute value."""
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__,) + tuple(_frozen(v) for v in value)
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, np.generic):
        return ("scalar", value.dtype.str, value.item())
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return (type(value).__name__, value)
    return ("repr", type(value).__name__, repr(value))


__all__ = ["group_signature", "in_graph_order"]
