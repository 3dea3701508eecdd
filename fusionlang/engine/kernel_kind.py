"""Which kind of kernel the C backend runs a group as, judged from ops, attributes and shapes.

The cost model prices a group's flops at the rate of the kernel that runs them
(``Device.rates``), and the backend's kernels differ by more than an order of magnitude
per flop: the GEMM template, the depthwise and grouped-conv direct kernels, GEMV-shaped
products (memory-bound), the attention kernel, pools, and generated loop nests. The engine
may not import the backend (data flows engine -> backend), so this mirrors the backend's
choices from what the graph says:

* a contraction (``CONTRACTIONS``) of at least ``TEMPLATE_MIN_MACS`` multiply-adds runs as
  a template: a conv whose every group has one input and one output channel as the
  depthwise kernel (backend.depthwise_template.is_depthwise), a conv of more than one group
  with at most ``GROUPED_MAX_CHANNELS`` input and output channels a group as the grouped
  kernel (backend.grouped_template.is_grouped), a product with one row or one column of
  output as a GEMV (backend.gemm_template.is_gemv), any other as the dense GEMM;
* a pool (``POOLS``) runs as the depthwise kernel with a max or a sum for its tap;
* a group holding two matmuls around a softmax is the attention kernel;
* a group holding two or more template ops otherwise is one loop nest (the backend's
  feedback refuses such groups: backend.feedback.TEMPLATE_OPS), so its contractions run at
  the loop nests' contraction rate (``LOOP_CONTRACTION``), not the templates';
* everything else is a loop nest (``LOOP``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Callable, Mapping

from fusionlang.ir.graph import Graph, Node

#: the contractions a backend runs as compute templates (tiled, packed, register-blocked)
#: rather than as loop nests
CONTRACTIONS = ("matmul", "gemm", "conv")
#: the pools the C backend runs as the depthwise kernel with another tap
POOLS = ("max_pool", "average_pool")

DENSE = "dense"
DEPTHWISE = "depthwise"
GROUPED = "grouped"
GEMV = "gemv"
POOL = "pool"
ATTENTION = "attention"
#: a contraction run as (part of) a generated loop nest
LOOP_CONTRACTION = "loop_contraction"
#: elementwise ops, reductions and data movement as generated loop nests
LOOP = "loop"
#: every kind, in the order the calibration table lists them
KINDS = (DENSE, DEPTHWISE, GROUPED, GEMV, ATTENTION, POOL, LOOP_CONTRACTION, LOOP)
#: the kinds one template call runs (one such op per group)
TEMPLATE_KINDS = frozenset({DENSE, DEPTHWISE, GROUPED, GEMV, POOL})

#: a contraction smaller than this many multiply-adds stays a loop nest (packing would
#: dominate): backend.template.MIN_MACS, which a test keeps equal
TEMPLATE_MIN_MACS = 4096
#: the widest groups the grouped-conv kernel takes: backend.grouped_template.MAX_GROUP_CHANNELS
GROUPED_MAX_CHANNELS = 16


def node_kind(graph: Graph, node: Node) -> str:
    """The kernel that runs ``node`` when it is the one template op of its group."""
    if node.op in POOLS:
        return POOL
    if node.op not in CONTRACTIONS:
        return LOOP
    out = graph.types[node.outputs[0]]
    if out.size * _reduction_length(graph, node) < TEMPLATE_MIN_MACS:
        return LOOP_CONTRACTION
    if node.op == "conv":
        return _conv_kind(graph, node)
    rows, columns = _product_shape(graph, node)
    return GEMV if rows == 1 or columns == 1 else DENSE


def _reduction_length(graph: Graph, node: Node) -> int:
    a, b = (graph.types[v].shape for v in node.inputs[:2])
    if node.op == "conv":
        return prod(b[1:])  # input channels of a group x taps
    if node.op == "gemm":
        return a[0] if node.attrs.get("trans_a") else a[1]
    return a[-1]


def _conv_kind(graph: Graph, node: Node) -> str:
    weight = graph.types[node.inputs[1]].shape
    groups = node.attrs.get("group", 1)
    inputs_per_group, outputs_per_group = weight[1], weight[0] // groups
    if inputs_per_group == 1 and outputs_per_group == 1:
        return DEPTHWISE
    if groups > 1 and max(inputs_per_group, outputs_per_group) <= GROUPED_MAX_CHANNELS:
        return GROUPED
    return DENSE


def _product_shape(graph: Graph, node: Node) -> tuple[int, int]:
    """(rows, columns) of the product's output as the template sees it: a matmul by a
    shared matrix takes all the leading axes of A as rows."""
    a, b = (graph.types[v].shape for v in node.inputs[:2])
    if node.op == "gemm":
        return (a[1] if node.attrs.get("trans_a") else a[0]), (b[0] if node.attrs.get("trans_b") else b[1])
    rows = 1 if len(a) == 1 else prod(a[:-1]) if len(b) == 2 else a[-2]
    return rows, (1 if len(b) == 1 else b[-1])


def is_attention(graph: Graph, members: list[str]) -> bool:
    """Two matmuls, the second reading (within the group) a softmax, or the exp of an opened
    one, that reads the first: the shape of scaled dot-product attention that the C backend
    runs as one kernel."""
    names = set(members)
    nodes = graph.index.by_name
    matmuls = [nodes[m] for m in members if nodes[m].op == "matmul"]
    if len(matmuls) != 2:
        return False
    producer = graph.index.producers
    first, second = sorted(matmuls, key=lambda n: graph.index.position[n.name])

    def inside_ancestors(node: Node) -> set[str]:
        seen: set[str] = set()
        stack = [node]
        while stack:
            for value in stack.pop().present_inputs():
                p = producer.get(value)
                if p is not None and p.name in names and p.name not in seen:
                    seen.add(p.name)
                    stack.append(p)
        return seen

    exps = [nodes[a] for a in inside_ancestors(second) if nodes[a].op in ("exp", "softmax")]
    return any(first.name in inside_ancestors(e) for e in exps)


@dataclass
class FlopTally:
    """A group's flops as its nodes join, split by the kernel that will run them; the
    split depends on the whole group (a second template op makes it a loop nest), so it
    is settled by :meth:`by_kind`."""

    loop: float = 0.0
    loop_contraction: float = 0.0
    #: (kind, flops) of each op that would be its group's template call
    templates: list[tuple[str, float]] = field(default_factory=list)
    #: bytes of the values the template op reads from inside its group (see staged_bytes)
    prologue_bytes: int = 0

    def add(self, kind: str, flops: float, reads_inside: int = 0) -> None:
        """Add a node of ``kind`` and ``flops``; ``reads_inside``: the bytes of its inputs
        computed inside the group."""
        if kind in TEMPLATE_KINDS:
            self.templates.append((kind, flops))
            self.prologue_bytes += reads_inside
        elif kind == LOOP_CONTRACTION:
            self.loop_contraction += flops
        else:
            self.loop += flops

    def staged_bytes(self) -> int:
        """Global-memory bytes the group moves beyond its inputs and outputs: on the C
        target the ops a template op reads through run before it as a loop nest of their own
        (backend.template's "before" part), whose results the template reads back from
        memory (written once, read once)."""
        return 2 * self.prologue_bytes if len(self.templates) == 1 else 0

    def kind(self, attention: Callable[[], bool]) -> str:
        """The group's kernel: its one template op's kind, attention, or a loop nest."""
        if len(self.templates) == 1:
            return self.templates[0][0]
        if len(self.templates) == 2 and attention():
            return ATTENTION
        return LOOP_CONTRACTION if self.loop_contraction or self.templates else LOOP

    def by_kind(self, attention: Callable[[], bool]) -> Mapping[str, float]:
        """Flops per kind of kernel; ``attention`` says whether the group is attention (only
        asked of a group holding two template ops)."""
        if len(self.templates) <= 1:
            return {LOOP: self.loop, LOOP_CONTRACTION: self.loop_contraction,
                    **{kind: flops for kind, flops in self.templates}}
        total = self.loop + self.loop_contraction + sum(f for _, f in self.templates)
        if self.kind(attention) == ATTENTION:
            return {ATTENTION: total}
        # one loop nest: its contractions at the nests' contraction rate, pools with the rest
        contraction = self.loop_contraction + sum(f for k, f in self.templates if k != POOL)
        return {LOOP: total - contraction, LOOP_CONTRACTION: contraction}
