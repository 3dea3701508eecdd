"""The cost model: global-memory bytes, flops and launches of a group, and a roofline time.

A group reads each value entering it once and writes each value leaving it once (the
ideal the fused kernel aims for); values produced and consumed inside the group cost no
global traffic. Groups made only of views launch nothing and move nothing. Flops come
from the ops' access specs (body operations x iteration points), cached per signature.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Iterable

from fusionlang.errors import FuseError
from fusionlang.ir.graph import Graph, Node
from fusionlang.ops.access import count_ops
from fusionlang.ops.checking import op_call
from fusionlang.ops.interpreter import registry_of
from fusionlang.ops.registry import OpRegistry


#: the contractions a backend runs as compute templates (tiled, packed, register-blocked)
#: rather than as loop nests; a device may price their flops at the templates' own rate
CONTRACTIONS = ("matmul", "gemm", "conv")


@dataclass(frozen=True)
class Device:
    name: str
    bandwidth: float  # bytes / s of global memory
    flops: float  # fp32 flop / s of generated loop nests
    launch: float  # seconds per kernel launch
    #: fp32 flop / s of CONTRACTIONS run as templates (None: the same as ``flops``)
    contraction_flops: float | None = None

    def seconds(self, nbytes: float, flops: float, launches: int, contraction_flops: float = 0.0) -> float:
        """Launches plus the larger of memory time and compute time; ``flops`` includes
        ``contraction_flops``, the part priced at the templates' rate."""
        rate = self.contraction_flops or self.flops
        compute = (flops - contraction_flops) / self.flops + contraction_flops / rate
        return launches * self.launch + max(nbytes / self.bandwidth, compute)


DEVICES = {
    "h100": Device("h100", 3.35e12, 67e12, 1e-6),
    "h200": Device("h200", 4.8e12, 67e12, 1e-6),
    "a100": Device("a100", 2.0e12, 19.5e12, 1e-6),
    # one core of the small CPU CI runs the C twin on (2 cores, AVX-512): loop nests reach
    # about 30 GFLOP/s (layer_norm with rows in cache, bench/cpu_runtime.py), the GEMM
    # template about 85 (conv layers of resnet50; sgemm 1024^3: 97, bench/gemm.py)
    "cpu": Device("cpu", 20e9, 30e9, 2e-7, contraction_flops=85e9),
}


def device(name: str) -> Device:
    try:
        return DEVICES[name]
    except KeyError:
        raise FuseError(f"unknown device {name!r} (known: {', '.join(DEVICES)})") from None


@dataclass(frozen=True)
class GroupCost:
    """Cost-model numbers of one group (or a whole plan): global-memory bytes read and
    written, flops, kernel launches and the roofline time in seconds."""

    bytes_read: int
    bytes_written: int
    flops: float
    launches: int
    seconds: float

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    def as_dict(self) -> dict[str, float]:
        return {"bytes_read": self.bytes_read, "bytes_written": self.bytes_written, "flops": self.flops,
                "launches": self.launches, "seconds": self.seconds}


class CostModel:
    """Prices nodes and groups of one graph on a device (``DEVICES``): bytes moved through
    global memory, flops, launches and a roofline time (launch overhead plus the larger of
    memory and compute time)."""

    def __init__(self, graph: Graph, registry: OpRegistry | None = None, device_name: str = "h100"):
        self.graph = graph
        self.registry = registry_of(graph, registry)
        self.device = device(device_name)
        self.outputs = set(graph.outputs)
        self._nodes = graph.index.by_name
        self._consumers = graph.index.consumers
        self._flops_cache: dict[tuple, float] = {}
        self._view_cache: dict[str, bool] = {}

    # ----- per node -----------------------------------------------------------------
    def is_view(self, node: Node) -> bool:
        cached = self._view_cache.get(node.name)
        if cached is None:
            opdef = self.registry.get(node.op, f"node {node.name!r}")
            cached = bool(opdef.view) and opdef.is_view(op_call(self.graph, node, self.registry))
            self._view_cache[node.name] = cached
        return cached

    def node_flops(self, node: Node) -> float:
        key = (node.op, _freeze(node.attrs), tuple(self.graph.types[v] if v else None for v in node.inputs))
        cached = self._flops_cache.get(key)
        if cached is None:
            cached = self._compute_flops(node)
            self._flops_cache[key] = cached
        return cached

    def _compute_flops(self, node: Node) -> float:
        if self.is_view(node):
            return 0.0
        opdef = self.registry.get(node.op)
        out_size = sum(self.graph.types[v].size for v in node.outputs)
        if opdef.access is None:
            # compound or reference-only: a few operations per output element
            return 5.0 * out_size
        total = 0.0
        for stmt in opdef.access(op_call(self.graph, node, self.registry)):
            points = prod(stmt.domain)
            if stmt.reduce is None:
                total += points * max(1, count_ops(stmt.body))
            else:
                total += points * prod(stmt.reduce_extents) * (count_ops(stmt.body) + 1)
                total += points * count_ops(stmt.finalize)
        return float(total)

    # ----- per group ----------------------------------------------------------------
    def group_cost(self, members: Iterable[str]) -> GroupCost:
        names = set(members)
        nodes = [self._nodes[n] for n in names]
        if all(self.is_view(n) for n in nodes):
            return GroupCost(0, 0, 0.0, 0, 0.0)
        produced = {out for n in nodes for out in n.outputs}
        read = {v for n in nodes for v in n.present_inputs() if v not in produced}
        written = {v for v in produced
                   if v in self.outputs or any(c.name not in names for c in self._consumers.get(v, ()))}
        bytes_read = sum(self.graph.types[v].nbytes for v in read)
        bytes_written = sum(self.graph.types[v].nbytes for v in written)
        flops = sum(self.node_flops(n) for n in nodes)
        contraction = sum(self.node_flops(n) for n in nodes if n.op in CONTRACTIONS)
        seconds = self.device.seconds(bytes_read + bytes_written, flops, 1, contraction)
        return GroupCost(bytes_read, bytes_written, flops, 1, seconds)

    def unfused(self) -> GroupCost:
        """Totals when every node is its own kernel."""
        costs = [self.group_cost([n.name]) for n in self.graph.nodes]
        return _total(costs)

    def plan_total(self, groups: Iterable[Iterable[str]]) -> GroupCost:
        return _total([self.group_cost(g) for g in groups])


def _total(costs: list[GroupCost]) -> GroupCost:
    return GroupCost(sum(c.bytes_read for c in costs), sum(c.bytes_written for c in costs),
                     sum(c.flops for c in costs), sum(c.launches for c in costs), sum(c.seconds for c in costs))


def _freeze(attrs: dict) -> tuple:
    items = []
    for k, v in sorted(attrs.items()):
        if hasattr(v, "tobytes"):
            v = (v.shape, str(v.dtype), v.tobytes())
        elif isinstance(v, list):
            v = tuple(v)
        items.append((k, v))
    return tuple(items)
