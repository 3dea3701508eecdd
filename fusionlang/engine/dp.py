"""Dynamic-programming partitioner (after Gao et al., 2025: DP search with a cost model
and pruning instead of greedy fusion).

Groups are contiguous segments of one topological order: a segment of a topological
order is always convex (a path between two members passes only through nodes ordered
between them). ``best[e]`` = cheapest partition of the first e nodes; each segment is
priced by the roofline cost model. On a chain every legal group is such a segment, so
the result is optimal there; on a DAG the order is chosen to keep producer-consumer
chains adjacent (depth-first), and the search costs O(n * window).

A segment is legal when each node after the first consumes something inside it and
the fuse table has an entry for (segment category so far, node category) — the same
table the apollo strategy applies. Pruning: a segment stops growing at the first node
the table refuses, at ``max_ops`` nodes, at ``max_args`` external inputs, or at a
forbidden (backend-rejected) edge: no extension of it can become legal again.

A segment's flops are priced at the rate of the kernel the backend would run it as
(engine.kernel_kind): a segment holding two matmuls that are not attention is one loop
nest, far slower per flop on the cpu device than each matmul in a GEMM template of its own.
"""

from __future__ import annotations

from fusionlang.engine.cost import CostModel
from fusionlang.engine.decisions import MergeDecision, Verdict
from fusionlang.engine.grouping import Grouping
from fusionlang.engine.kernel_kind import FlopTally
from fusionlang.engine.policy import describe_entry, node_categories
from fusionlang.ir.graph import Graph
from fusionlang.lang.guards import StepBudget
from fusionlang.lang.ruleset import edge_context, guard_budget

DEFAULTS = {"max_ops": 32, "max_args": 96, "cost": "h100"}


def chain_order(graph: Graph) -> list[int]:
    """A topological order that visits a node's consumers as soon as they are ready
    (LIFO Kahn), so chains stay contiguous."""
    producers = {out: k for k, n in enumerate(graph.nodes) for out in n.outputs}
    preds: list[set[int]] = [set() for _ in graph.nodes]
    succs: list[list[int]] = [[] for _ in graph.nodes]
    for k, node in enumerate(graph.nodes):
        for value in node.present_inputs():
            p = producers.get(value)
            if p is not None and p not in preds[k]:
                preds[k].add(p)
                succs[p].append(k)
    indegree = [len(p) for p in preds]
    stack = [k for k in reversed(range(len(graph.nodes))) if indegree[k] == 0]
    order = []
    while stack:
        k = stack.pop()
        order.append(k)
        for s in reversed(succs[k]):
            indegree[s] -= 1
            if indegree[s] == 0:
                stack.append(s)
    return order


class _Segment:
    """Incremental state of one candidate group while it grows."""

    def __init__(self, graph: Graph, cost: CostModel, use_count: dict[str, int], *, record: bool = False,
                 guard_budget: StepBudget | None = None):
        self.graph = graph
        #: the steps the fuse table's guards share while the graph is partitioned
        self.guard_budget = guard_budget
        self.cost = cost
        self.use_count = use_count
        self.outputs = set(graph.outputs)
        self.members: list[str] = []
        self.produced: set[str] = set()
        self.producer: dict[str, str] = {}
        self.inside_uses: dict[str, int] = {}
        self.external: set[str] = set()
        #: bytes of ``external`` and of the produced values read outside (or outputs), kept
        #: as values join: summing them again per extension made the search O(n * max_ops**2)
        self.read_bytes = 0
        self.written_bytes = 0
        #: the flops by the kernel that will run them, settled when the segment is priced
        self.tally = FlopTally()
        self.all_views = True
        self.category = ""
        self.rules: list[str] = []
        self.stitches: list[tuple[str, str]] = []
        #: the merges that built the segment, as decisions (only for the chosen segments:
        #: the search tries O(n * max_ops) of them)
        self.record = record
        self.merged: list[MergeDecision] = []

    def weigh(self, node, category: str, ruleset):
        """(verdict, entry, stitched, inside values) for adding ``node``; verdict None when
        the node reads nothing of the segment (no edge to decide about)."""
        if not self.members:
            return Verdict.MERGED, None, False, []
        inside = [v for v in node.present_inputs() if v in self.produced]
        if not inside:
            return None, None, False, inside
        # the entry deciding the edge: a `nofuse` one denies it; guards see the first value read
        edge = edge_context(self.graph, inside[0], node, self.guard_budget)
        entry, stitched = ruleset.fuse_decision(self.category, category, edge=edge), False
        if entry is None:
            entry, stitched = ruleset.fuse_decision(self.category, category, flag="stitch", edge=edge), True
        if entry is None:
            return Verdict.NO_ENTRY, None, stitched, inside
        return (Verdict.DENIED if entry.deny else Verdict.MERGED), entry, stitched, inside

    def add(self, node, category: str, ruleset, categories: dict[str, str]) -> bool:
        """Add ``node``; False when the fuse table refuses it (the segment is then dead)."""
        verdict, entry, stitched, inside = self.weigh(node, category, ruleset)
        if verdict is not Verdict.MERGED:
            return False
        if entry is not None and self.record:
            self.merged.append(MergeDecision(self.producer[inside[0]], node.name, Verdict.MERGED, self.category,
                                             category, entry, sizes=(len(self.members), 1)))
        self.category = entry.result if entry is not None else category
        if entry is not None and self.record:  # rules and stitches: only the chosen segments keep them
            why = describe_entry(entry)
            if why not in self.rules:
                self.rules.append(why)
            if stitched:
                # only a reduction's own result is kept on chip (see apollo.py)
                self.stitches.extend((v, node.name) for v in inside
                                     if categories[self.producer[v]] in entry.producers)
        self.members.append(node.name)
        types = self.graph.types
        reads_inside = self.cost.inside_bytes(node, self.produced)
        for value in dict.fromkeys(node.present_inputs()):
            if value in self.produced:
                self.inside_uses[value] = self.inside_uses.get(value, 0) + 1
                if self.inside_uses[value] == self.use_count.get(value, 0) and value not in self.outputs:
                    self.written_bytes -= types[value].nbytes  # its last reader joined
            elif value not in self.external:
                self.external.add(value)
                self.read_bytes += types[value].nbytes
        for value in node.outputs:
            if value in self.outputs or self.use_count.get(value, 0) > 0:
                self.written_bytes += types[value].nbytes
        self.produced.update(node.outputs)
        self.producer.update((v, node.name) for v in node.outputs)
        self.tally.add(self.cost.node_kind(node), self.cost.node_flops(node), reads_inside)
        self.all_views = self.all_views and self.cost.is_view(node)
        return True

    def refusal(self, node, category: str, ruleset, options, forbidden_pairs) -> MergeDecision | None:
        """Why ``node`` may not join (the segment then stops growing), or None. Only asked
        once the search has stopped, so the common path stays incremental."""
        verdict, entry, _, inside = self.weigh(node, category, ruleset)
        if verdict is None:
            return None
        if any(frozenset((m, node.name)) in forbidden_pairs for m in self.members):
            return None  # partition() records the backend's refusal, with its reason
        edge = (self.producer[inside[0]], node.name)
        sizes = (len(self.members), 1)
        if verdict in (Verdict.NO_ENTRY, Verdict.DENIED):
            return MergeDecision(*edge, verdict, self.category, category, entry, sizes=sizes)
        if len(self.members) + 1 > options["max_ops"]:
            return MergeDecision(*edge, Verdict.MAX_OPS, self.category, category, entry, options["max_ops"],
                                 len(self.members) + 1, sizes)
        inputs = self.external | {v for v in node.present_inputs() if v not in self.produced}
        if len(inputs) > options["max_args"]:
            return MergeDecision(*edge, Verdict.MAX_ARGS, self.category, category, entry, options["max_args"],
                                 len(inputs), sizes)
        return MergeDecision(*edge, Verdict.COST_REJECTED, self.category, category, entry, sizes=sizes)

    def seconds(self) -> float:
        if self.all_views:
            return 0.0
        flops = self.tally.by_kind(self.cost.attention_check(self.members))
        return self.cost.device.seconds(self.read_bytes + self.written_bytes, flops, 1, self.tally.staged_bytes())


def partition_dp(graph: Graph, ruleset, options: dict, forbidden: set[tuple[str, str]]) -> Grouping:
    categories = node_categories(graph, ruleset)
    cost = CostModel(graph, ruleset.registry, options["cost"])
    budget = guard_budget(ruleset, graph)
    use_count: dict[str, int] = {}
    for node in graph.nodes:
        for value in dict.fromkeys(node.present_inputs()):
            use_count[value] = use_count.get(value, 0) + 1
    order = chain_order(graph)
    nodes = graph.nodes
    n = len(order)
    best = [float("inf")] * (n + 1)
    count = [0] * (n + 1)
    start_of = [0] * (n + 1)  # best[e] uses the segment order[start_of[e]:e]
    best[0] = 0.0
    forbidden_pairs = {frozenset(p) for p in forbidden}
    for start in range(n):
        if best[start] == float("inf"):
            continue
        segment = _Segment(graph, cost, use_count, guard_budget=budget)
        for end in range(start, min(n, start + options["max_ops"])):
            node = nodes[order[end]]
            if forbidden_pairs and any(frozenset((m, node.name)) in forbidden_pairs for m in segment.members):
                break
            if not segment.add(node, categories[node.name], ruleset, categories):
                break
            # a node alone is always a group, however many arguments it takes
            if end > start and len(segment.external) > options["max_args"]:
                break
            total = best[start] + segment.seconds()
            # ties go to fewer groups, then to the longer segment
            if total < best[end + 1] - 1e-15 or (abs(total - best[end + 1]) <= 1e-15
                                                 and count[start] + 1 < count[end + 1]):
                best[end + 1] = total
                count[end + 1] = count[start] + 1
                start_of[end + 1] = start
    grouping = Grouping(graph, categories)
    end = n
    while end > 0:
        segment = _Segment(graph, cost, use_count, record=True, guard_budget=budget)
        for k in order[start_of[end]:end]:
            segment.add(nodes[k], categories[nodes[k].name], ruleset, categories)
        members = segment.members
        target = grouping.group_of[members[-1]]
        for name in members[:-1]:
            target = grouping.merge(grouping.group_of[name], target, segment.category,
                                    segment.rules[0] if segment.rules else None, edge=(name, members[-1]))
        grouping.groups[target].category = segment.category
        grouping.groups[target].rules = list(segment.rules)
        grouping.stitches.extend(segment.stitches)
        for decision in segment.merged:
            grouping.decide(decision)
        if end < n:
            _record_cut(grouping, segment, nodes[order[end]], categories, ruleset, options, forbidden_pairs)
        end -= len(members)
    grouping.decisions.sort(key=lambda d: grouping.index[d.consumer])
    return grouping


def _record_cut(grouping, segment: _Segment, following, categories, ruleset, options, forbidden_pairs) -> None:
    """Why the chosen segment does not take the node after it: a refusal of the table or a
    limit, else the cost model priced the cut lower."""
    decision = segment.refusal(following, categories[following.name], ruleset, options, forbidden_pairs)
    if decision is not None:
        grouping.decide(decision)
