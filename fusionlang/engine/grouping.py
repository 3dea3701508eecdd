"""Grouping: a partition of a graph's nodes that stays convex under merges.

Groups form a quotient DAG. Merging two groups is legal only when no path leaves one
and re-enters the other through a third group: otherwise the merged group would both
feed and consume that third group, a cycle (XLA, Inductor and MindSpore all ask the same
"circle checker" before every merge). The search is pruned by topological positions: a
group on a path into B must contain a node that precedes some node of B.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from fusionlang.engine.decisions import MergeDecision
from fusionlang.engine.plan import FusionPlan, make_groups
from fusionlang.ir.graph import Graph
from fusionlang.lang.guards import StepBudget


@dataclass
class _Group:
    gid: int
    members: list[str]
    category: str
    lo: int  # smallest topological index of a member
    hi: int  # largest
    succ: set[int] = field(default_factory=set)
    pred: set[int] = field(default_factory=set)
    rules: list[str] = field(default_factory=list)
    #: the node-level edge (producer, consumer) whose merge formed this group last
    last_merge: tuple[str, str] | None = None
    #: every merge that built this group, oldest first: (order, edge, members right after it),
    #: so feedback can split a rejected group at the first merge that made it unfusable
    history: list[tuple[int, tuple[str, str], frozenset[str]]] = field(default_factory=list)


class Grouping:
    def __init__(self, graph: Graph, categories: dict[str, str], guard_budget: StepBudget | None = None):
        self.graph = graph
        #: the steps the fuse table's guards share while this graph is partitioned
        self.guard_budget = guard_budget
        self.index = {n.name: k for k, n in enumerate(graph.nodes)}
        self.nodes = graph.index.by_name
        self.group_of: dict[str, int] = {}
        self.groups: dict[int, _Group] = {}
        self.stitches: list[tuple[str, str]] = []  # (value, consumer node) kept on chip
        self.merges = 0
        #: every merge the strategy weighed, in order (see engine/decisions.py)
        self.decisions: list[MergeDecision] = []
        self._last_decision: dict[tuple[str, str], MergeDecision] = {}
        for k, node in enumerate(graph.nodes):
            self.groups[k] = _Group(k, [node.name], categories[node.name], k, k)
            self.group_of[node.name] = k
        producers = {out: n.name for n in graph.nodes for out in n.outputs}
        for node in graph.nodes:
            dst = self.group_of[node.name]
            for value in node.present_inputs():
                if value in producers:
                    src = self.group_of[producers[value]]
                    if src != dst:
                        self.groups[src].succ.add(dst)
                        self.groups[dst].pred.add(src)

    # ----- queries ------------------------------------------------------------------
    def group(self, node: str) -> _Group:
        return self.groups[self.group_of[node]]

    def size(self, gid: int) -> int:
        return len(self.groups[gid].members)

    def reaches(self, src: int, dst: int, *, skip_direct: bool) -> bool:
        """Is there a path src -> ... -> dst (through a third group when skip_direct)?"""
        limit = self.groups[dst].hi
        stack = [g for g in self.groups[src].succ if not (skip_direct and g == dst)]
        seen = set(stack)
        while stack:
            gid = stack.pop()
            if gid == dst:
                return True
            for nxt in self.groups[gid].succ:
                if nxt in seen:
                    continue
                if nxt == dst or self.groups[nxt].lo < limit:
                    seen.add(nxt)
                    stack.append(nxt)
        return False

    def can_merge(self, a: int, b: int) -> bool:
        """Would merging groups a and b keep the quotient acyclic?"""
        if a == b:
            return False
        return not (self.reaches(a, b, skip_direct=True) or self.reaches(b, a, skip_direct=True))

    def path_outside(self, gids: set[int]) -> int | None:
        """A group outside ``gids`` on a path that leaves them and comes back (merging
        ``gids`` into one group would then make a cycle through it), or None."""
        limit = max(self.groups[g].hi for g in gids)
        # the outside groups reachable from the set, each with the first outside group on its path
        stack = [(s, s) for g in gids for s in self.groups[g].succ if s not in gids]
        seen = {s for s, _ in stack}
        while stack:
            gid, first = stack.pop()
            for nxt in self.groups[gid].succ:
                if nxt in gids:
                    return first
                if nxt not in seen and self.groups[nxt].lo < limit:
                    seen.add(nxt)
                    stack.append((nxt, first))
        return None

    def external_inputs(self, gids: list[int]) -> set[str]:
        members = [m for g in gids for m in self.groups[g].members]
        produced = {out for m in members for out in self.nodes[m].outputs}
        return {v for m in members for v in self.nodes[m].present_inputs() if v not in produced}

    # ----- edits --------------------------------------------------------------------
    def decide(self, decision: MergeDecision) -> MergeDecision:
        """Record a weighed merge; a pass that repeats the last verdict on an edge for the same
        reason adds nothing (strategies revisit every edge until nothing changes)."""
        last = self._last_decision.get(decision.edge)
        if last is None or not last.same_as(decision):
            self.decisions.append(decision)
            self._last_decision[decision.edge] = decision
        return decision

    def merge(self, a: int, b: int, category: str, why: str | None = None,
              edge: tuple[str, str] | None = None) -> int:
        """Merge group a into group b; returns the surviving id (b)."""
        ga, gb = self.groups[a], self.groups[b]
        for member in ga.members:
            self.group_of[member] = b
        gb.members.extend(ga.members)
        gb.lo, gb.hi = min(ga.lo, gb.lo), max(ga.hi, gb.hi)
        gb.category = category
        gb.rules.extend(r for r in ga.rules if r not in gb.rules)
        if why and why not in gb.rules:
            gb.rules.append(why)
        gb.last_merge = edge
        if edge is not None:
            self.merges += 1
            gb.history = [*heapq.merge(gb.history, ga.history), (self.merges, edge, frozenset(gb.members))]
        for s in ga.succ:
            self.groups[s].pred.discard(a)
            if s != b:
                self.groups[s].pred.add(b)
                gb.succ.add(s)
        for p in ga.pred:
            self.groups[p].succ.discard(a)
            if p != b:
                self.groups[p].succ.add(b)
                gb.pred.add(p)
        gb.succ.discard(b)
        gb.pred.discard(b)
        gb.succ.discard(a)
        gb.pred.discard(a)
        del self.groups[a]
        return b

    # ----- output -------------------------------------------------------------------
    def ordered_groups(self) -> list[_Group]:
        """Groups in a topological order of the quotient (ties by first member)."""
        indegree = {g: len(grp.pred) for g, grp in self.groups.items()}
        ready = [(grp.lo, g) for g, grp in self.groups.items() if indegree[g] == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            _, gid = heapq.heappop(ready)
            order.append(self.groups[gid])
            for nxt in self.groups[gid].succ:
                indegree[nxt] -= 1
                if indegree[nxt] == 0:
                    heapq.heappush(ready, (self.groups[nxt].lo, nxt))
        if len(order) != len(self.groups):
            raise AssertionError("grouping lost acyclicity; can_merge must be asked before merge")
        return order

    def to_plan(self, strategy: str, kind_of) -> tuple[FusionPlan, dict[int, int]]:
        """A FusionPlan with groups renumbered 0.. in topological order; also the map
        from internal ids to plan ids."""
        ordered = self.ordered_groups()
        renumber = {grp.gid: k for k, grp in enumerate(ordered)}
        fields = [dict(category=grp.category, kind=kind_of(grp.members), rules=list(grp.rules)) for grp in ordered]
        groups = make_groups(self.graph, [grp.members for grp in ordered], fields)
        plan = FusionPlan(self.graph, groups, strategy=strategy)
        owner = {name: renumber[self.group_of[name]] for name in self.group_of}
        plan.stitches = sorted({(owner[consumer], value) for value, consumer in self.stitches})
        plan.decisions = list(self.decisions)
        return plan, renumber
