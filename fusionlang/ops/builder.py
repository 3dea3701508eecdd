"""GraphBuilder: write graphs by hand in Python, with types inferred as you go.

    b = GraphBuilder("block")
    x = b.input("x", (8, 64))
    y = b.relu(b.add(x, b.constant(np.ones(64, np.float32))))
    b.output(y)
    graph = b.build()

Values are their names (strings). ``b.<op>(...)`` is ``b.op("<op>", ...)``.
"""

from __future__ import annotations

import numpy as np

from fusionlang.errors import GraphError
from fusionlang.ir.graph import Graph, Node
from fusionlang.ir.types import TensorType
from fusionlang.ops.checking import verify_graph
from fusionlang.ops.registry import REGISTRY, OpRegistry


class GraphBuilder:
    """Build a Graph by hand: ``input``, ``constant``, ``op`` (or ``b.<op>(...)``), ``output``,
    then ``build()`` verifies it. Output types are inferred as nodes are added."""

    def __init__(self, name: str = "graph", registry: OpRegistry | None = None):
        # the graph records a rule file's registry (None: the built-in one stays implied)
        self.graph = Graph(name, registry)
        self.registry = registry or REGISTRY

    def input(self, name: str, shape, dtype="float32") -> str:
        return self.graph.add_input(name, TensorType(tuple(shape), dtype))

    def constant(self, array, name: str | None = None) -> str:
        return self.graph.add_constant(name or self.graph.fresh_name("const"), np.asarray(array))

    def op(self, op: str, *inputs, name: str | None = None, outputs=None, num_outputs: int | None = None,
           provenance: tuple[str, ...] = (), **attrs):
        """Add one node; returns its output name (or a tuple for several outputs)."""
        name = name or self.graph.fresh_name(op)
        in_names = [self._value(v) for v in inputs]
        in_types = [self.graph.types[v] if v else None for v in in_names]
        in_values = [self.graph.constants.get(v) for v in in_names]
        types = self.registry.infer(op, name, attrs, in_types, in_values)
        opdef = self.registry.get(op)
        if num_outputs is not None:
            types = types[:num_outputs]
        if outputs is None:
            outputs = [name if len(types) == 1 and name not in self.graph.types else self.graph.fresh_name(name)
                       for _ in types]
        node = Node(name, op, in_names, list(outputs), opdef.normalize_attrs(attrs, f"node {name!r}"), provenance)
        self.graph.add_node(node, types)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def output(self, *values: str) -> None:
        for value in values:
            if value not in self.graph.types:
                raise GraphError(f"output {value!r} is not a value of this graph")
            self.graph.outputs.append(value)

    def build(self, verify: bool = True) -> Graph:
        if verify:
            verify_graph(self.graph, self.registry)
        return self.graph

    def _value(self, value) -> str:
        if value is None:
            return ""
        if isinstance(value, str):
            if value and value not in self.graph.types:
                raise GraphError(f"{value!r} is not a value of this graph")
            return value
        return self.constant(value)

    def __getattr__(self, op: str):
        if op.startswith("_"):
            raise AttributeError(op)
        return lambda *inputs, **kw: self.op(op, *inputs, **kw)
