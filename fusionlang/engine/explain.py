"""explain(): why a node ended up in its group, and why each neighbour did not join it.

For every edge between the node's group and another group, the reason the partitioner
had not to merge them is reported with its source location, read from the merge
decisions it recorded (engine/decisions.py): the backend refused the merge; a limit of
the strategy (``max_ops = 8`` and the line that set it), even when the groups later grew
into categories the table does not pair; the fuse table has no entry for the two groups'
categories; the merge would create a cycle; or, for the dp strategy, the cost model
priced separate kernels lower. Edges the partitioner never weighed get what the table
and limits say about the final groups. Nodes that rewrites
removed are traced through provenance ("onnx:NAME") to the nodes that replaced them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import networkx as nx

from fusionlang.engine.cost import CostModel
from fusionlang.engine.decisions import MergeDecision, Verdict, feedback_note, history, shaping
from fusionlang.engine.partition import STRATEGIES
from fusionlang.engine.plan import FusionPlan
from fusionlang.engine.policy import describe_entry, strategy_options
from fusionlang.errors import FuseError
from fusionlang.lang import format_expr


@dataclass
class Refusal:
    neighbour: str  # node name in the other group
    neighbour_op: str
    direction: str  # "producer" (feeds the node's group), "consumer" or "sibling" (reads a value it reads)
    group: int  # the neighbour's group id
    reason: str

    def __str__(self) -> str:
        arrow = {"producer": "<-", "consumer": "->"}.get(self.direction, "~")
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
    #: the kind of kernel the cost model priced the group as ("" when it priced none)
    group_kernel: str = ""

    def lines(self) -> list[str]:
        head = f"node {self.node} ({self.op}) is {self.category}"
        if self.class_rule:
            head += f" by {self.class_rule}"
        out = [head]
        if self.query != self.node:
            out.append(f"  {self.query!r} was rewritten; it now lives in: {', '.join(self.replaced)}")
        rules = [p for p in self.provenance if p.startswith("rule ")]
        if rules:
            out.append("  rewrites: " + "; ".join(r[len("rule "):] for r in rules) + _opened_after(self.provenance))
        others = [m for m in self.group_members if m != self.node]
        out.append(f"  group {self.group} ({self.group_category}, {len(self.group_members)} ops)"
                   + (f" with {', '.join(others[:12])}{' ...' if len(others) > 12 else ''}" if others else ", alone"))
        if self.group_kernel:
            out.append(f"    priced as a {self.group_kernel} kernel")
        for why in self.group_rules:
            out.append(f"    formed by {why}")
        if self.refusals:
            out.append("  not fused with:")
            out.extend(f"    {r}" for r in self.refusals)
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def _opened_after(provenance: tuple[str, ...]) -> str:
    """The decompositions that opened what the last rewrite built (they undid it)."""
    last = max(k for k, p in enumerate(provenance) if p.startswith("rule "))
    opened = [p for p in provenance[last + 1:] if p.startswith("decompose ")]
    return "; then opened by " + ", ".join(opened) if opened else ""


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
                      group.id, group.category, list(group.nodes), list(group.rules), replaced=replaced,
                      group_kernel=group.kernel)
    strategy = plan.strategy if plan.strategy in STRATEGIES else "apollo"
    opts = strategy_options(ruleset, strategy, STRATEGIES[strategy][1], options)
    refusal = _Refuser(plan, ruleset, strategy, opts)
    for value in node.present_inputs():
        for producer in graph.nodes:
            if value in producer.outputs and owner[producer.name] != group.id:
                exp.refusals.append(Refusal(producer.name, producer.op, "producer", owner[producer.name],
                                            refusal.reason(producer.name, target, owner[producer.name], group.id)))
    consumers = graph.consumers()
    for value in node.outputs:
        for consumer in consumers.get(value, ()):
            if owner[consumer.name] != group.id:
                exp.refusals.append(Refusal(consumer.name, consumer.op, "consumer", owner[consumer.name],
                                            refusal.reason(target, consumer.name, group.id, owner[consumer.name])))
    exp.refusals.extend(_sibling_refusals(plan, refusal, target, owner))
    return exp


def _sibling_refusals(plan: FusionPlan, refusal: _Refuser, target: str, owner: dict[str, int]) -> list[Refusal]:
    """Siblings a `fuse sibling` entry would have merged with the node, and what stopped it."""
    ops = {n.name: n.op for n in plan.graph.nodes}
    pairs = dict.fromkeys(d.edge for d in plan.decisions if d.shared and target in d.edge)
    out = []
    for first, second in pairs:
        other = second if first == target else first
        if other not in owner or owner[other] == owner[target]:
            continue
        decision = cast(MergeDecision, shaping(history(plan.decisions, first, second)))  # the pair has decisions
        reason = refusal.sibling_reason(decision, plan.group(owner[first]), plan.group(owner[second]))
        out.append(Refusal(other, ops[other], "sibling", owner[other], f"both read {decision.shared}: {reason}"))
    return out


def _class_rule(ruleset, graph, node) -> str:
    rule = ruleset.class_rule_of_node(graph, node)
    if rule is None:
        return ""

    guard = f" when {format_expr(rule.guard)}" if rule.guard is not None else ""
    return f"{rule.span}: class {node.op} : {rule.category}{guard}"


class _Refuser:
    """Reasons for refusals, read from the merge decisions the partitioner recorded; edges
    it never weighed (another strategy's geometry) fall back to asking the table now."""

    def __init__(self, plan: FusionPlan, ruleset, strategy: str, options: dict):
        self.plan, self.ruleset, self.strategy, self.options = plan, ruleset, strategy, options
        self.quotient = plan.quotient()
        self.declared = getattr(ruleset, "strategies", {}).get(strategy)

    def reason(self, producer: str, consumer: str, producer_gid: int, consumer_gid: int) -> str:
        p, c = self.plan.group(producer_gid), self.plan.group(consumer_gid)
        for decision in self.plan.decisions:
            if decision.verdict is Verdict.FEEDBACK_REFUSED and decision.producer in p.nodes \
                    and decision.consumer in c.nodes:
                return feedback_note(decision)
            if decision.verdict is Verdict.CONCAT_CUT and decision.edge == (producer, consumer):
                return decision.detail
        if p.kind == "view" or c.kind == "view":
            return "views launch nothing, so there is nothing to fuse with"
        decision = shaping(history(self.plan.decisions, producer, consumer))
        if decision is not None:
            recorded = self._recorded(decision, p, c)
            if recorded is not None:
                return recorded
        if self.strategy == "tvm":
            return self._tvm_reason(p, c)
        return self._reconstructed(p, c)

    def sibling_reason(self, decision, a, b) -> str:
        """Why two readers of one value stayed apart, from their recorded sibling decision."""
        for refused in self.plan.decisions:
            if refused.verdict is Verdict.FEEDBACK_REFUSED and refused.edge == decision.edge:
                return feedback_note(refused)
        return self._recorded(decision, a, b) or f"{describe_entry(decision.entry)} applies"

    def _recorded(self, decision, p, c) -> str | None:
        """The text for what the partitioner decided when it weighed the edge."""
        verdict = decision.verdict
        if verdict.limit is not None:
            return self._limit_reason(decision)
        if self.strategy == "tvm":
            return None
        if verdict is Verdict.DENIED:
            return f"{describe_entry(decision.entry)} denies it"
        if verdict is Verdict.NO_ENTRY:
            return self._no_entry(decision.producer_category, decision.consumer_category)
        if verdict is Verdict.CYCLE:
            cycle = self._cycle_through(p.id, c.id)
            if cycle is None:  # siblings: the path may run either way
                cycle = self._cycle_through(c.id, p.id)
            through = f"group {cycle}" if cycle is not None else "another group"
            return f"{describe_entry(decision.entry)} applies, but merging would create a cycle through {through}"
        if verdict is Verdict.COST_REJECTED:
            return self._cost_reason(p, c, decision.entry)
        if verdict is Verdict.PATTERN_OVERLAP:
            return f"{describe_entry(decision.entry)} matches, but {decision.detail}"
        return None

    def _reconstructed(self, p, c) -> str:
        """For an edge the partitioner never weighed as such (dp cuts a topological order,
        so most of its edges): what the table and the limits say about the final groups."""
        entry = self.ruleset.fuse_decision(p.category, c.category) or \
            self.ruleset.fuse_decision(p.category, c.category, flag="stitch")
        if entry is not None and entry.deny:
            return f"{describe_entry(entry)} denies it"
        if entry is None:
            return self._no_entry(p.category, c.category)
        if len(p.nodes) + len(c.nodes) > self.options["max_ops"]:
            return (f"{describe_entry(entry)} applies, but max_ops = {self.options['max_ops']}"
                    f"{self._source('max_ops', self.options['max_ops'])} ({len(p.nodes)} + {len(c.nodes)} ops)")
        cycle = self._cycle_through(p.id, c.id)
        if cycle is not None:
            return f"{describe_entry(entry)} applies, but merging would create a cycle through group {cycle}"
        if self.strategy == "dp":
            return self._cost_reason(p, c, entry)
        return f"{describe_entry(entry)} applies; merged groups were formed first by other edges"

    def _no_entry(self, producer_category: str, consumer_category: str) -> str:
        # a guarded entry for the pair was passed over: its guard did not hold on the edge
        guarded = [e for e in self.ruleset.fuse_entries
                   if e.guard is not None and not e.deny and e.matches(producer_category, consumer_category)]
        unmet = f" (the guard of {describe_entry(guarded[0])} does not hold)" if guarded else ""
        return f"no fuse entry for {producer_category} -> {consumer_category} in rules {self.ruleset.name!r}{unmet}"

    def _limit_reason(self, decision) -> str:
        """'<entry> applies, but max_ops = 8 (<file:line>: strategy apollo) (6 + 3 ops)': the
        limit that refused the merge when it was weighed, whatever the groups became later."""
        name = decision.verdict.limit
        head = f"{describe_entry(decision.entry)} applies, but " if decision.entry is not None else ""
        if decision.verdict is Verdict.MAX_OPS and decision.sizes is not None:
            measure = f"{decision.sizes[0]} + {decision.sizes[1]} ops"
        elif decision.verdict is Verdict.MAX_ARGS:
            measure = f"{decision.measure} inputs"
        else:
            measure = f"{decision.measure} ops" if decision.measure is not None else ""
        return (f"{head}{name} = {decision.limit}{self._source(name, decision.limit)}"
                + (f" ({measure})" if measure else ""))

    def _source(self, option: str, value) -> str:
        """Where the option's value came from: the strategy block that sets it, the
        strategy's default, or options given from outside."""
        declared = self.declared
        if declared is not None and option in declared.options and declared.options[option] == value:
            # the option's own span: an importing file may override some keys only
            return f" ({getattr(declared, 'option_spans', {}).get(option, declared.span)}: strategy {self.strategy})"
        if STRATEGIES[self.strategy][1].get(option) == value:
            return f" (the default of strategy {self.strategy})"
        return " (set by an option)"

    def _cycle_through(self, a: int, b: int) -> int | None:

        for mid in self.quotient.successors(a):
            if mid != b and nx.has_path(self.quotient, mid, b):
                return mid
        return None

    def _cost_reason(self, p, c, entry) -> str:
        cost = CostModel(self.plan.graph, self.ruleset.registry, self.options["cost"])
        first, second = cost.group_cost(p.nodes), cost.group_cost(c.nodes)
        fused = cost.group_cost(p.nodes + c.nodes)
        apart, together = first.seconds + second.seconds, fused.seconds
        if together >= apart:
            return (f"{describe_entry(entry)} applies, but the cost model prices the merge higher "
                    f"({together * 1e6:.2f} us fused as one {fused.kernel} kernel vs {apart * 1e6:.2f} us apart "
                    f"as {first.kernel} + {second.kernel} on {cost.device.name})")
        return (f"{describe_entry(entry)} applies; the chosen topological segments separate them "
                f"(dp groups are contiguous segments)")

    def _tvm_reason(self, p, c) -> str:
        return (f"TVM fuses a node only into its immediate post-dominator with every path checked; "
                f"groups {p.id} ({p.category}) and {c.id} ({c.category}) met no tvm fuse entry's conditions")
