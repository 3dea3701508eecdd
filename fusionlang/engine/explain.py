"""explain(): why a node ended up in its group, and why each neighbour did not join it.

For every edge between the node's group and another group, the first reason the
partitioner had (or would have had) not to merge them is reported with its source
location: the backend refused the merge; the fuse table has no entry for the two
groups' categories; a size limit of the strategy; the merge would create a cycle; or,
for the dp strategy, the cost model priced separate kernels lower. Nodes that rewrites
removed are traced through provenance ("onnx:NAME") to the nodes that replaced them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fusionlang.engine.cost import CostModel
from fusionlang.engine.partition import STRATEGIES
from fusionlang.engine.plan import FusionPlan
from fusionlang.engine.policy import describe_entry, strategy_options
from fusionlang.errors import FuseError


@dataclass
class Refusal:
    neighbour: str  # node name in the other group
    neighbour_op: str
    direction: str  # "producer" (feeds the node's group) or "consumer"
    group: int  # the neighbour's group id
    reason: str

    def __str__(self) -> str:
        arrow = "<-" if self.direction == "producer" else "->"
        return f"{arrow} {self.neighbour} ({self.neighbour_op}, group {self.group}): {self.reason}"


@dataclass
class Explanation:
    query: str
    node: str
    op: str
    category: str
    class_rule: str
    provenance: tuple[str, ...]
    group: int
    group_category: str
    group_members: list[str]
    group_rules: list[str]
    refusals: list[Refusal] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        head = f"node {self.node} ({self.op}) is {self.category}"
        if self.class_rule:
            head += f" by {self.class_rule}"
        out = [head]
        if self.query != self.node:
            out.append(f"  {self.query!r} was rewritten; it now lives in: {', '.join(self.replaced)}")
        rules = [p for p in self.provenance if p.startswith("rule ")]
        if rules:
            out.append("  rewrites: " + "; ".join(r[len("rule "):] for r in rules))
        others = [m for m in self.group_members if m != self.node]
        out.append(f"  group {self.group} ({self.group_category}, {len(self.group_members)} ops)"
                   + (f" with {', '.join(others[:12])}{' ...' if len(others) > 12 else ''}" if others else ", alone"))
        for why in self.group_rules:
            out.append(f"    formed by {why}")
        if self.refusals:
            out.append("  not fused with:")
            out.extend(f"    {r}" for r in self.refusals)
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def explain(plan: FusionPlan, ruleset, node_name: str, options: dict | None = None) -> Explanation:
    graph = plan.graph
    nodes = graph.index.by_name
    replaced = []
    target = node_name
    if node_name not in nodes:
        replaced = [n.name for n in graph.nodes if f"onnx:{node_name}" in n.provenance]
        if not replaced:
            known = ", ".join(list(nodes)[:8])
            raise FuseError(f"no node named {node_name!r} in the model or its rewritten graph (e.g. {known}, ...)")
        target = replaced[0]
    node = nodes[target]
    owner = plan.group_of()
    group = plan.group(owner[target])
    category = ruleset.category_of_node(graph, node)
    exp = Explanation(node_name, target, node.op, category, _class_rule(ruleset, graph, node), node.provenance,
                      group.id, group.category, list(group.nodes), list(group.rules), replaced=replaced)
    strategy = plan.strategy if plan.strategy in STRATEGIES else "apollo"
    opts = strategy_options(ruleset, strategy, STRATEGIES[strategy][1], options)
    refusal = _Refuser(plan, ruleset, strategy, opts)
    for value in node.present_inputs():
        for producer in graph.nodes:
            if value in producer.outputs and owner[producer.name] != group.id:
                exp.refusals.append(Refusal(producer.name, producer.op, "producer", owner[producer.name],
                                            refusal.reason(owner[producer.name], group.id)))
    consumers = graph.consumers()
    for value in node.outputs:
        for consumer in consumers.get(value, ()):
            if owner[consumer.name] != group.id:
                exp.refusals.append(Refusal(consumer.name, consumer.op, "consumer", owner[consumer.name],
                                            refusal.reason(group.id, owner[consumer.name])))
    return exp


def _class_rule(ruleset, graph, node) -> str:
    rule = ruleset.class_rule_of_node(graph, node)
    if rule is None:
        return ""
    from fusionlang.lang import format_expr

    guard = f" when {format_expr(rule.guard)}" if rule.guard is not None else ""
    return f"{rule.span}: class {node.op} : {rule.category}{guard}"


class _Refuser:
    def __init__(self, plan: FusionPlan, ruleset, strategy: str, options: dict):
        self.plan, self.ruleset, self.strategy, self.options = plan, ruleset, strategy, options
        self.quotient = plan.quotient()
        declared = getattr(ruleset, "strategies", {}).get(strategy)
        self.where = f" ({declared.span}: strategy {strategy})" if declared is not None else ""

    def reason(self, producer_gid: int, consumer_gid: int) -> str:
        p, c = self.plan.group(producer_gid), self.plan.group(consumer_gid)
        for note in self.plan.stats.get("feedback", []):
            if any(f"{a} -> {b}" in note for a in p.nodes for b in c.nodes):
                return note
        if p.kind == "view" or c.kind == "view":
            return "views launch nothing, so there is nothing to fuse with"
        if self.strategy == "tvm":
            return self._tvm_reason(p, c)
        entry = self.ruleset.fuse_result(p.category, c.category) or \
            self.ruleset.fuse_result(p.category, c.category, flag="stitch")
        if entry is None:
            return f"no fuse entry for {p.category} -> {c.category} in rules {self.ruleset.name!r}"
        if len(p.nodes) + len(c.nodes) > self.options["max_ops"]:
            return (f"{describe_entry(entry)} applies, but max_ops = {self.options['max_ops']}{self.where} "
                    f"({len(p.nodes)} + {len(c.nodes)} ops)")
        cycle = self._cycle_through(producer_gid, consumer_gid)
        if cycle is not None:
            return f"{describe_entry(entry)} applies, but merging would create a cycle through group {cycle}"
        if self.strategy == "dp":
            return self._cost_reason(p, c, entry)
        return f"{describe_entry(entry)} applies; merged groups were formed first by other edges"

    def _cycle_through(self, a: int, b: int) -> int | None:
        import networkx as nx

        for mid in self.quotient.successors(a):
            if mid != b and nx.has_path(self.quotient, mid, b):
                return mid
        return None

    def _cost_reason(self, p, c, entry) -> str:
        cost = CostModel(self.plan.graph, self.ruleset.registry, self.options["cost"])
        apart = cost.group_cost(p.nodes).seconds + cost.group_cost(c.nodes).seconds
        together = cost.group_cost(p.nodes + c.nodes).seconds
        if together >= apart:
            return (f"{describe_entry(entry)} applies, but the cost model prices the merge higher "
                    f"({together * 1e6:.2f} us fused vs {apart * 1e6:.2f} us apart on {cost.device.name})")
        return (f"{describe_entry(entry)} applies; the chosen topological segments separate them "
                f"(dp groups are contiguous segments)")

    def _tvm_reason(self, p, c) -> str:
        return (f"TVM fuses a node only into its immediate post-dominator with every path checked; "
                f"groups {p.id} ({p.category}) and {c.id} ({c.category}) met no tvm fuse entry's conditions")
