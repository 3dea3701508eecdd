"""The cost model: global-memory bytes, flops and launches of a group, and a roofline time.

A group reads each value entering it once and writes each value leaving it once (the
ideal the fused kernel aims for); values produced and consumed inside the group cost no
global traffic. Groups made only of views launch nothing and move nothing. Flops come
from the ops' access specs (body operations x iteration points), cached per signature, and
are priced at the rate of the kernel that runs them (engine.kernel_kind: the GEMM template,
the depthwise kernel, a loop nest...), a rate per kind on the Device.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from types import MappingProxyType
from typing import Iterable, Mapping

from fusionlang.engine.kernel_kind import CONTRACTIONS as CONTRACTIONS  # re-exported: backend.template's
from fusionlang.engine.kernel_kind import (ATTENTION, DENSE, DEPTHWISE, GEMV, GROUPED, LOOP, LOOP_CONTRACTION, POOL,
                                           FlopTally, is_attention, node_kind)
from fusionlang.errors import FuseError
from fusionlang.ir.graph import Graph, Node
from fusionlang.ops.access import count_ops
from fusionlang.ops.checking import op_call
from fusionlang.ops.interpreter import registry_of
from fusionlang.ops.registry import OpRegistry


@dataclass(frozen=True)
class Device:
    name: str
    bandwidth: float  # bytes / s of global memory
    flops: float  # fp32 flop / s of generated loop nests, and of every kind absent from ``rates``
    launch: float  # seconds per kernel launch
    #: fp32 flop / s per kind of kernel (engine.kernel_kind.KINDS); a GPU prices every flop alike
    rates: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    #: whether a template's prologue runs as a pass of its own (the C target's "before" loop
    #: nest); CUDA computes it while staging the operand, at no extra trip
    prologue_pass: bool = False

    def rate(self, kind: str) -> float:
        return self.rates.get(kind, self.flops)

    def compute_seconds(self, flops: float | Mapping[str, float]) -> float:
        """Seconds of arithmetic: ``flops`` per kind of kernel (a number: all in loop nests)."""
        if not isinstance(flops, Mapping):
            return flops / self.rate(LOOP)
        return sum(f / self.rate(kind) for kind, f in flops.items() if f)

    def seconds(self, nbytes: float, flops: float | Mapping[str, float], launches: int,
                staged_bytes: float = 0.0) -> float:
        """Launches plus the larger of memory time and compute time (see compute_seconds),
        plus, on a device with a ``prologue_pass``, the time of ``staged_bytes``, moved by
        that pass before the arithmetic starts (not overlapped with it)."""
        staged = staged_bytes / self.bandwidth if self.prologue_pass else 0.0
        return launches * self.launch + max(nbytes / self.bandwidth, self.compute_seconds(flops)) + staged


#: one core of the small CPU CI runs the C twin on (2 cores, AVX-512 + AMX), fp32 flop / s of
#: each kind of kernel as bench/cpu_rates.py measured them through the C backend (one thread,
#: process CPU time; bench/results/cpu_rates.json, which a test keeps equal to this table).
#: The memory-bound kinds (gemv, pool, loop) include their memory time: the roofline's max()
#: then takes whichever is larger
CPU_RATES = MappingProxyType({
    DENSE: 96e9, DEPTHWISE: 29e9, GROUPED: 75e9, GEMV: 9.1e9, ATTENTION: 61e9, POOL: 8.7e9,
    LOOP_CONTRACTION: 36e9, LOOP: 11e9,
})

DEVICES = {
    "h100": Device("h100", 3.35e12, 67e12, 1e-6),
    "h200": Device("h200", 4.8e12, 67e12, 1e-6),
    "a100": Device("a100", 2.0e12, 19.5e12, 1e-6),
    "cpu": Device("cpu", 20e9, CPU_RATES[LOOP], 2e-7, rates=CPU_RATES, prologue_pass=True),
}


def device(name: str) -> Device:
    try:
        return DEVICES[name]
    except KeyError:
        raise FuseError(f"unknown device {name!r} (known: {', '.join(DEVICES)})") from None


@dataclass(frozen=True)
class GroupCost:
    """Cost-model numbers of one group (or a whole plan): global-memory bytes read and
    written, flops, kernel launches, the roofline time in seconds, and the ``kernel`` kind
    it was priced as (engine.kernel_kind; "" for views and for plan totals)."""

    bytes_read: int
    bytes_written: int
    flops: float
    launches: int
    seconds: float
    kernel: str = ""

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
        self._kind_cache: dict[str, str] = {}

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

    def node_kind(self, node: Node) -> str:
        """The kernel that runs ``node`` as its group's one template op (views: loop)."""
        cached = self._kind_cache.get(node.name)
        if cached is None:
            cached = LOOP if self.is_view(node) else node_kind(self.graph, node)
            self._kind_cache[node.name] = cached
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
        tally = FlopTally()
        for node in nodes:
            tally.add(self.node_kind(node), self.node_flops(node), self.inside_bytes(node, produced))
        flops = sum(self.node_flops(n) for n in nodes)
        attention = self.attention_check(list(names))
        seconds = self.device.seconds(bytes_read + bytes_written, tally.by_kind(attention), 1, tally.staged_bytes())
        return GroupCost(bytes_read, bytes_written, flops, 1, seconds, tally.kind(attention))

    def inside_bytes(self, node: Node, produced: set[str]) -> int:
        """Bytes of ``node``'s inputs among the ``produced`` values of its group."""
        return sum(self.graph.types[v].nbytes for v in dict.fromkeys(node.present_inputs()) if v in produced)

    def attention_check(self, members: list[str]):
        """A callable saying whether ``members`` is an attention group (asked lazily)."""
        return lambda: is_attention(self.graph, members)

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
