"""FusionPlan: the partition of a (rewritten) graph into groups, each one kernel.

Every op node is in exactly one group; groups are listed in a topological order of the
quotient graph, which must be acyclic. A group's ``kind`` says what it costs at run time:
"kernel" launches work; "view" only re-labels contiguous data (reshape, identity...);
"const" was folded at compile time. Only kernels count as launches.

Memory stitching (Apollo layer II) merges a reduction and its consumers into one group
and records ``stitches``: (group id, value) pairs, each a reduction result inside the
group that is kept in on-chip memory (shared memory on the GPU) rather than in global
memory. Horizontal groups (Apollo layer III) are lists of independent group ids launched
together as one kernel.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any

import networkx as nx

from fusionlang.engine.decisions import MergeDecision
from fusionlang.errors import PlanError
from fusionlang.ir.graph import Graph, Node
from fusionlang.stages import Stats, stage_line, stage_times

KINDS = ("kernel", "view", "const")


@dataclass
class Group:
    """One fused group: its ``nodes`` (names, in graph order) run as one kernel (``kind``
    "kernel"), as a free view ("view") or are folded at compile time ("const").
    ``category`` is the aggregated category, ``rules`` the fuse entries and limits that
    formed it (with file:line), ``cost`` the cost model's numbers and ``kernel`` the kind of
    kernel it priced the group as."""

    id: int
    nodes: list[str]
    category: str = ""
    kind: str = "kernel"
    #: values read from outside the group (graph inputs, constants, other groups' outputs)
    inputs: list[str] = field(default_factory=list)
    #: values used after the group (by other groups or as graph outputs)
    outputs: list[str] = field(default_factory=list)
    #: why it exists: "apollo.fuse:41: fuse elemwise -> reduce : reduce", limits hit, ...
    rules: list[str] = field(default_factory=list)
    #: cost-model numbers filled in by the partitioner (bytes, flops, seconds)
    cost: dict[str, float] = field(default_factory=dict)
    #: the kind of kernel the cost model priced it as (engine/kernel_kind.py: "dense",
    #: "depthwise", "attention", "loop"...); "" for views and groups the partitioner did not price
    kernel: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class PlanStats(Stats):
    """What :func:`fusionlang.fuse` counted and timed. None: not recorded (a plan built by
    hand, or by the partitioner alone, has no before-fusion numbers); the plan JSON carries
    the recorded fields under these names."""

    #: kernel launches of the unfused graph (one per op that is not a view)
    kernels_before: int | None = None
    #: global memory bytes read and written by the unfused graph, by the cost model
    bytes_before: int | None = None
    #: the unfused graph's roofline time on ``device``
    estimated_seconds_before: float | None = None
    #: op nodes of the graph before rewriting
    ops_before: int | None = None
    #: rewrite rule -> how often it fired
    rewrites: dict[str, int] | None = None
    #: each rewrite rule once, in the order it first fired (see pipeline.rewrite_order)
    rewrite_order: list[dict[str, Any]] | None = None
    #: why rewriting stopped ("fixpoint", a step limit...), or "skipped"
    rewrite_stop: str | None = None
    rewrite_seconds: float | None = None
    partition_seconds: float | None = None
    #: kernel launches of the plan (after compile cuts concats in place: its launches)
    kernels_after: int | None = None
    #: global memory bytes read and written by the plan's groups, by the cost model
    bytes_after: int | None = None
    #: the groups' floating-point operations, by the cost model
    flops: float | None = None
    #: the plan's roofline time on ``device``
    estimated_seconds_after: float | None = None
    #: the device the cost model priced
    device: str | None = None
    #: one line per merge the backend refused
    feedback: list[str] | None = None


@dataclass
class FusionPlan:
    """The partition of a (rewritten) graph into groups, plus stitches, horizontal packs,
    ``stats`` (:class:`PlanStats`: kernels and bytes before/after, stage times...) and the
    partitioner's merge ``decisions``; see the module docstring."""

    graph: Graph
    groups: list[Group]
    strategy: str = ""
    rules: str = ""
    stitches: list[tuple[int, str]] = field(default_factory=list)
    horizontal: list[list[int]] = field(default_factory=list)
    #: counters and timings (frozen: a stage records its fields with dataclasses.replace)
    stats: PlanStats = field(default_factory=PlanStats)
    #: the graph as it came in, before rewriting (for before/after comparisons)
    original: Graph | None = None
    #: every merge the partitioner weighed, oldest first (engine/decisions.py): what
    #: explain and the report read
    decisions: list[MergeDecision] = field(default_factory=list)
    #: the target the backend vetted the groups for ("c", "cuda", "cuda-emu"), or "" when
    #: none did (a plan fused without feedback)
    target: str = ""
    #: group id -> the schedule the backend selected for the group on ``target``, which
    #: compile replays instead of searching again (a backend value the engine only carries)
    schedules: dict[int, Any] = field(default_factory=dict)
    #: group id -> part of its template call ("before", "after") -> the schedule of that
    #: part's loop nest on ``target``, replayed by compile like ``schedules``
    template_schedules: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: node made by opening a compound op -> the compound node of the rewritten graph it
    #: came from (engine/lowering.py)
    opened_from: dict[str, str] = field(default_factory=dict)

    # ----- queries ------------------------------------------------------------------
    def group_of(self) -> dict[str, int]:
        """node name -> group id"""
        return {name: g.id for g in self.groups for name in g.nodes}

    def group(self, gid: int) -> Group:
        for g in self.groups:
            if g.id == gid:
                return g
        raise PlanError(f"no group {gid}")

    def nodes_of(self, group: Group) -> list[Node]:
        by_name = self.graph.index.by_name
        return [by_name[name] for name in group.nodes]

    @property
    def kernels(self) -> list[Group]:
        return [g for g in self.groups if g.kind == "kernel"]

    @property
    def launches(self) -> int:
        """Kernel launches: kernel groups, with each horizontal pack counted once."""
        packed = {gid for pack in self.horizontal for gid in pack}
        return len([g for g in self.kernels if g.id not in packed]) + len(self.horizontal)

    def quotient(self) -> nx.DiGraph:
        """Group-level dataflow graph (edge attribute ``values``)."""
        owner = self.group_of()
        producers = {out: owner[n.name] for n in self.graph.nodes for out in n.outputs}
        dig: nx.DiGraph[int] = nx.DiGraph()
        dig.add_nodes_from(g.id for g in self.groups)
        for node in self.graph.nodes:
            for value in node.present_inputs():
                src = producers.get(value)
                dst = owner[node.name]
                if src is not None and src != dst:
                    dig.add_edge(src, dst)
                    dig.edges[src, dst].setdefault("values", set()).add(value)
        return dig

    # ----- checks -------------------------------------------------------------------
    def validate(self) -> None:
        """Every node in exactly one group, groups topologically ordered, quotient acyclic,
        recorded inputs/outputs consistent with the graph."""
        seen: dict[str, int] = {}
        for g in self.groups:
            if g.kind not in KINDS:
                raise PlanError(f"group {g.id}: unknown kind {g.kind!r}")
            if not g.nodes:
                raise PlanError(f"group {g.id} is empty")
            for name in g.nodes:
                if name in seen:
                    raise PlanError(f"node {name!r} is in groups {seen[name]} and {g.id}")
                seen[name] = g.id
        missing = [n.name for n in self.graph.nodes if n.name not in seen]
        if missing:
            raise PlanError(f"node {missing[0]!r} is in no group")
        unknown = sorted(set(seen) - {n.name for n in self.graph.nodes})
        if unknown:
            raise PlanError(f"group {seen[unknown[0]]} names node {unknown[0]!r}, which is not in the graph")
        quotient = self.quotient()
        if not nx.is_directed_acyclic_graph(quotient):
            cycle = nx.find_cycle(quotient)
            raise PlanError(f"groups form a cycle: {' -> '.join(str(u) for u, _ in cycle)} -> {cycle[0][0]}")
        position = {g.id: k for k, g in enumerate(self.groups)}
        for src, dst in quotient.edges:
            if position[src] >= position[dst]:
                raise PlanError(f"group {dst} is listed before group {src}, which feeds it")
        boundaries = group_boundaries(self.graph, seen)
        for g in self.groups:
            want_in, want_out = boundaries[g.id]
            if set(g.inputs) != set(want_in) or set(g.outputs) != set(want_out):
                raise PlanError(f"group {g.id}: recorded inputs/outputs do not match the graph")

    # ----- reporting ----------------------------------------------------------------
    def summary(self) -> str:
        s = self.stats
        lines = [
            f"plan for {self.graph.name!r}: strategy {self.strategy or '-'}, rules {self.rules or '-'}",
            f"  ops {len(self.graph.nodes)}, groups {len(self.groups)}, kernels {len(self.kernels)}"
            + (f" (before fusion {s.kernels_before})" if s.kernels_before is not None else ""),
        ]
        if s.bytes_before is not None and s.bytes_after is not None:
            ratio = s.bytes_before / s.bytes_after if s.bytes_after else float("inf")
            lines.append(f"  global memory traffic {_mib(s.bytes_after)} (before {_mib(s.bytes_before)}, "
                         f"{ratio:.2f}x less)")
        if self.stitches:
            lines.append(f"  stitched pairs {len(self.stitches)}")
        if self.horizontal:
            lines.append(f"  horizontal launches {len(self.horizontal)} covering "
                         f"{sum(len(h) for h in self.horizontal)} groups")
        times = stage_times(s)
        if times:
            lines.append(f"  time {stage_line(times)}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        by_name = self.graph.index.by_name
        data = {
            "graph": self.graph.name,
            "strategy": self.strategy,
            "rules": self.rules,
            "ops": len(self.graph.nodes),
            "kernels_after": len(self.kernels),
            "groups": [g.to_dict() | {"ops": [by_name[n].op for n in g.nodes]} for g in self.groups],
            "stitches": [list(p) for p in self.stitches],
            "horizontal": self.horizontal,
            "decisions": [d.to_dict() for d in self.decisions],
            "target": self.target,
            "schedules": {str(gid): _jsonable(choice) for gid, choice in self.schedules.items()},
            "template_schedules": {str(gid): {part: _jsonable(choice) for part, choice in parts.items()}
                                   for gid, parts in self.template_schedules.items()},
            "opened_from": dict(self.opened_from),
        }
        data.update(self.stats.to_dict())
        return data

    def to_json(self, **kwargs) -> str:
        return json.dumps(self.to_dict(), default=_jsonable, **kwargs)


def group_boundaries(graph: Graph, owner: dict[str, int]) -> dict[int, tuple[list[str], list[str]]]:
    """(inputs, outputs) of every group at once, in one pass over the graph.

    A group's inputs are values it reads that it does not produce; its outputs are values
    it produces that another group reads or that leave the graph.
    """
    producer_group = {out: owner[n.name] for n in graph.nodes for out in n.outputs}
    inputs: dict[int, dict[str, None]] = {}
    outputs: dict[int, dict[str, None]] = {}
    for node in graph.nodes:
        gid = owner[node.name]
        inputs.setdefault(gid, {})
        outputs.setdefault(gid, {})
        for value in node.present_inputs():
            source = producer_group.get(value)
            if source != gid:
                inputs[gid][value] = None
                if source is not None:
                    outputs[source][value] = None
    for value in graph.outputs:
        if value in producer_group:
            outputs[producer_group[value]][value] = None
    order = {out: k for k, n in enumerate(graph.nodes) for out in n.outputs}
    return {gid: (list(inputs[gid]), sorted(outputs[gid], key=order.__getitem__)) for gid in inputs}


def boundary(graph: Graph, members: set[str]) -> tuple[list[str], list[str]]:
    """(inputs, outputs) of one set of nodes: values read from outside, values used outside;
    in :func:`group_boundaries`' order. Walks the members only, through the graph's index
    (densenet121's planning asked 546 times, each a walk of all 900 nodes: 1 s)."""
    index = graph.index
    nodes = sorted((index.by_name[m] for m in members if m in index.by_name), key=lambda n: index.position[n.name])
    inputs: dict[str, None] = {}
    for node in nodes:
        for value in node.present_inputs():
            producer = index.producers.get(value)
            if producer is None or producer.name not in members:
                inputs[value] = None
    graph_outputs = {value: k for k, value in enumerate(graph.outputs)}
    outputs = []
    for node in nodes:  # by producer, then as group_boundaries meets them: first outside reader, graph outputs
        met = []
        for value in node.outputs:
            readers = [c for c in index.consumers.get(value, ()) if c.name not in members]
            if readers:
                met.append(((0, index.position[readers[0].name], readers[0].present_inputs().index(value)), value))
            elif value in graph_outputs:
                met.append(((1, graph_outputs[value], 0), value))
        outputs += [value for _, value in sorted(met)]
    return list(inputs), outputs


def make_groups(graph: Graph, members: list[list[str]], fields: list[dict]) -> list[Group]:
    """Groups 0.. over the given member lists (kept in graph order), boundaries filled in."""
    owner = {name: gid for gid, names in enumerate(members) for name in names}
    order = {n.name: k for k, n in enumerate(graph.nodes)}
    boundaries = group_boundaries(graph, owner)
    return [Group(gid, sorted(names, key=order.__getitem__), inputs=boundaries[gid][0],
                  outputs=boundaries[gid][1], **extra)
            for gid, (names, extra) in enumerate(zip(members, fields))]


def carried_fields(group: Group) -> dict[str, Any]:
    """The fields of ``group`` that a regrouping of its members (opening compound ops,
    cutting a concat out) carries over to the groups made of them."""
    return dict(category=group.category, kind=group.kind, rules=list(group.rules), cost=dict(group.cost),
                kernel=group.kernel)


def make_group(graph: Graph, gid: int, members: list[str], **fields) -> Group:
    """A Group over ``members`` (kept in graph order) with its boundary filled in."""
    order = {n.name: k for k, n in enumerate(graph.nodes)}
    names = sorted(members, key=order.__getitem__)
    inputs, outputs = boundary(graph, set(names))
    return Group(gid, names, inputs=inputs, outputs=outputs, **fields)


def per_node_plan(graph: Graph, kind_of=None) -> FusionPlan:
    """The unfused plan: one group per node (``kind_of(node)`` may mark views)."""
    fields = [dict(kind=(kind_of(n) if kind_of else "kernel")) for n in graph.nodes]
    return FusionPlan(graph, make_groups(graph, [[n.name] for n in graph.nodes], fields), strategy="none")


def single_group_plan(graph: Graph) -> FusionPlan:
    """Everything in one group (useful for testing loop fusion)."""
    return FusionPlan(graph, [make_group(graph, 0, [n.name for n in graph.nodes])], strategy="single")


def _mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:.2f} MiB"


def _jsonable(value):
    if is_dataclass(value) and not isinstance(value, type):  # a backend's schedule choice: its fields
        return asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if hasattr(value, "item"):
        return value.item()
    return str(value)
