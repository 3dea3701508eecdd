"""Graph and Node: a dataflow graph of named tensor values.

A value is a name. It is exactly one of: a graph input, a constant (its array lives in
``Graph.constants``), or the output of one node. ``Graph.types`` maps every value to its
TensorType. Nodes are kept in a topological order; :meth:`Graph.toposort` restores it
after edits. An empty input name marks an omitted optional input.

A graph carries the op registry its ops come from (``Graph.registry``): a rule file's
`def` ops live in a child of the built-in registry, and every copy of the graph must keep
knowing them. None means the built-in registry. ``ir`` does not import ``ops``, so the
field is typed by the one thing ir-level code may ask of it (:class:`OpLookup`).

A graph also owns its derived maps (``Graph.index``: name -> node, producers, consumers),
built on first use and dropped whenever the graph changes: through its methods, by
assigning or growing ``nodes``, or, for code that edits a node's ``inputs``, ``outputs``
or ``name`` in place, by calling :meth:`Graph.invalidate`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol

import numpy as np

from fusionlang.errors import GraphError
from fusionlang.ir.index import NodeIndex
from fusionlang.ir.types import TensorType


@dataclass(eq=False)  # identity semantics: attrs may hold arrays
class Node:
    """One operation: ``op`` applied to the values ``inputs`` (names; "" marks an
    omitted optional input), producing the values ``outputs``, with ``attrs`` and the
    ``provenance`` that says where it came from."""

    name: str
    op: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    #: where this node came from: "onnx:Conv_12", "rule fold_conv_bn (simplify.fuse:14)", ...
    provenance: tuple[str, ...] = ()

    def present_inputs(self) -> list[str]:
        return [v for v in self.inputs if v]

    def __repr__(self) -> str:
        return f"Node({self.name!r}, {self.op}, {self.inputs} -> {self.outputs})"


class OpLookup(Protocol):
    """What a graph's op registry is to ``ir``: something that finds an op by name
    (fusionlang.ops.OpRegistry is one)."""

    def get(self, name: str, where: str = "") -> Any: ...


class Graph:
    """A dataflow graph: ``inputs``, ``constants``, ``nodes`` in a topological order,
    ``outputs``, the TensorType of every value in ``types``, and the op ``registry`` its
    ops are defined in (None: the built-in one; see the module docstring), and the cached
    ``index`` over its nodes."""

    name: str
    #: the op registry this graph's ops are defined in; None: the built-in one
    registry: OpLookup | None
    inputs: list[str]
    outputs: list[str]
    types: dict[str, TensorType]
    constants: dict[str, np.ndarray]

    def __init__(self, name: str = "graph", registry: OpLookup | None = None):
        self.name = name
        self.registry = registry
        self.inputs = []
        self.outputs = []
        self.types = {}
        self.constants = {}
        self._nodes: list[Node] = []
        self._index: NodeIndex | None = None
        self._names = itertools.count()

    # ----- nodes and their index -----------------------------------------------------
    @property
    def nodes(self) -> list[Node]:
        """The nodes, in a topological order. Assigning a new list drops the index."""
        return self._nodes

    @nodes.setter
    def nodes(self, nodes: list[Node]) -> None:
        self._nodes = nodes
        self._index = None

    @property
    def index(self) -> NodeIndex:
        """Name -> node, producers and consumers of the current nodes (read-only maps),
        built on first use and kept until the graph changes (see the module docstring)."""
        if self._index is None or self._index.size != len(self._nodes):
            self._index = NodeIndex(self._nodes)
        return self._index

    def invalidate(self) -> None:
        """Drop the index: call after editing a node's inputs, outputs or name in place."""
        self._index = None

    def __getstate__(self) -> dict:
        # the index is derived (and its read-only views do not pickle): a copy rebuilds it
        return {**self.__dict__, "_index": None}

    # ----- construction -------------------------------------------------------------
    def add_input(self, name: str, ttype: TensorType) -> str:
        self._claim(name)
        self.types[name] = ttype
        self.inputs.append(name)
        return name

    def add_constant(self, name: str, array) -> str:
        self._claim(name)
        # np.ascontiguousarray would turn a 0-d scalar into shape [1]
        array = np.require(np.asarray(array), requirements="C")
        ttype = TensorType.of(array)
        self.constants[name] = array.astype(ttype.dtype, copy=False)
        self.types[name] = ttype
        return name

    def add_node(self, node: Node, output_types: list[TensorType]) -> Node:
        if len(output_types) != len(node.outputs):
            raise GraphError(f"node {node.name!r}: {len(node.outputs)} outputs but {len(output_types)} types")
        for out, ttype in zip(node.outputs, output_types):
            self._claim(out)
            self.types[out] = ttype
        self._nodes.append(node)
        self._index = None
        return node

    def fresh_name(self, stem: str, is_taken: Callable[[str], bool] | None = None) -> str:
        """A value or node name not used in this graph yet. A caller that tracks every
        name the graph holds passes ``is_taken`` to answer in O(1) what this otherwise
        answers by collecting every name (an import of 16,000 nodes called it per node:
        33 s, quadratic)."""
        taken = None if is_taken is not None else self._taken_names()
        while True:
            candidate = f"{stem}_{next(self._names)}"
            if not (is_taken(candidate) if is_taken is not None else candidate in (taken or ())):
                return candidate

    def _taken_names(self) -> set[str]:
        return set(self.types) | {n.name for n in self._nodes}

    def _claim(self, name: str) -> None:
        if not name:
            raise GraphError("empty value name")
        if name in self.types:
            raise GraphError(f"value {name!r} is defined twice")

    # ----- queries ------------------------------------------------------------------
    def producers(self) -> dict[str, Node]:
        """value name -> the node that computes it (inputs and constants are absent).
        A copy the caller may edit; ``index.producers`` reads without copying."""
        return dict(self.index.producers)

    def consumers(self) -> dict[str, list[Node]]:
        """value name -> nodes reading it, in node order (a node reading twice appears once).
        A copy the caller may edit; ``index.consumers`` reads without copying."""
        return {value: list(readers) for value, readers in self.index.consumers.items()}

    def node(self, name: str) -> Node:
        """The node called ``name`` (from the index)."""
        node = self.index.by_name.get(name)
        if node is None:
            raise GraphError(f"no node named {name!r} in graph {self.name!r}")
        return node

    def is_constant(self, value: str) -> bool:
        return value in self.constants

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    # ----- edits --------------------------------------------------------------------
    def toposort(self) -> None:
        """Reorder nodes topologically, keeping the current order where it is free.

        Raises GraphError naming the nodes on a cycle, or a value no one defines.
        """
        producers = self.index.producers
        defined = set(self.inputs) | set(self.constants)
        order: list[Node] = []
        state: dict[str, int] = {}  # 1 = on stack, 2 = done
        by_name = self.index.by_name

        for root in self.nodes:
            if state.get(root.name):
                continue
            stack = [(root, iter(root.present_inputs()))]
            state[root.name] = 1
            while stack:
                node, pending = stack[-1]
                advanced = False
                for value in pending:
                    producer = producers.get(value)
                    if producer is None:
                        if value not in defined:
                            raise GraphError(f"node {node.name!r} ({node.op}) reads {value!r}, which nothing defines")
                        continue
                    mark = state.get(producer.name)
                    if mark == 1:
                        cycle = [n.name for n, _ in stack[[s[0].name for s in stack].index(producer.name):]]
                        raise GraphError(f"cycle through nodes {' -> '.join(cycle + [producer.name])}")
                    if mark is None:
                        state[producer.name] = 1
                        stack.append((producer, iter(producer.present_inputs())))
                        advanced = True
                        break
                if not advanced:
                    stack.pop()
                    state[node.name] = 2
                    order.append(by_name[node.name])
        self.nodes = order

    def remove_unused(self) -> int:
        """Drop nodes and constants no graph output depends on. Returns nodes removed."""
        live = set(self.outputs)
        kept: list[Node] = []
        for node in reversed(self.nodes):
            if any(out in live for out in node.outputs):
                kept.append(node)
                live.update(node.present_inputs())
        removed = len(self.nodes) - len(kept)
        kept_ids = {id(node) for node in kept}
        dead_values = [out for node in self.nodes if id(node) not in kept_ids for out in node.outputs]
        self.nodes = kept[::-1]
        for value in dead_values:
            self.types.pop(value, None)
        for name in [c for c in self.constants if c not in live]:
            del self.constants[name]
            del self.types[name]
        return removed

    def copy(self) -> "Graph":
        """A structural copy: new Node objects and dicts, constant arrays and the op registry
        shared (read-only)."""
        other = Graph(self.name, self.registry)
        other.inputs = list(self.inputs)
        other.outputs = list(self.outputs)
        other.types = dict(self.types)
        other.constants = dict(self.constants)
        other.nodes = [
            Node(n.name, n.op, list(n.inputs), list(n.outputs), dict(n.attrs), n.provenance) for n in self.nodes
        ]
        other._names = itertools.count(next(self._names))
        return other

    def __repr__(self) -> str:
        return f"<Graph {self.name!r}: {len(self.inputs)} inputs, {len(self.nodes)} nodes, {len(self.outputs)} outputs>"
