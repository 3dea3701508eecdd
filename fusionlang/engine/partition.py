"""partition(): run a strategy over a graph and return a checked FusionPlan.

Apollo's upward feedback lives here: the backend's verdict on a group comes in as a
callback (``feedback(graph, node_names) -> reason | None``), never as an import of the
backend. A rejected group is split by forbidding the merge that formed it last, and the
strategy runs again, until every group is accepted or the round limit is reached.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, cast

from fusionlang.engine import apollo, dp, tvm
from fusionlang.engine.cost import CostModel
from fusionlang.engine.decisions import MergeDecision, Verdict, feedback_note
from fusionlang.engine.lowering import OPEN_HERE, OpenedGraph, on_primitives, opened
from fusionlang.engine.plan import FusionPlan
from fusionlang.engine.policy import strategy_options
from fusionlang.engine.wide_concat import concat_fan_in, concat_split_notes, split_wide_concats, split_wide_splits
from fusionlang.errors import FuseError
from fusionlang.instrument import timed
from fusionlang.stages import PARTITION
from fusionlang.ir.graph import Graph

Feedback = Callable[[Graph, list[str]], "str | None"]

STRATEGIES = {
    "apollo": (apollo.partition_apollo, apollo.DEFAULTS),
    "tvm": (tvm.partition_tvm, tvm.DEFAULTS),
    "dp": (dp.partition_dp, dp.DEFAULTS),
}


def default_strategy(ruleset) -> str:
    """The strategy a rule set declares (the first `strategy` block), else apollo."""
    declared = [name for name in getattr(ruleset, "strategies", {}) if name in STRATEGIES]
    return declared[0] if declared else "apollo"


def _strategy(name: str):
    if name not in STRATEGIES:
        raise FuseError(f"unknown strategy {name!r} (known: {', '.join(STRATEGIES)})")
    return STRATEGIES[name]


def narrowed(graph: Graph, ruleset, strategy: str, options: dict | None = None) -> Graph:
    """``graph``, or a copy in which each concat and split wider than a kernel may take
    under the strategy's options is a tree of narrower ones (:mod:`.wide_concat`): a node
    is a group whatever its fan-in or fan-out."""
    fan = concat_fan_in(strategy_options(ruleset, strategy, _strategy(strategy)[1], options))
    return split_wide_splits(split_wide_concats(graph, fan), fan)


def partition(graph: Graph, ruleset, strategy: str | None = None, *, options: dict | None = None,
              feedback: Feedback | None = None, max_feedback_rounds: int = 16,
              opening: OpenedGraph | None | object = OPEN_HERE) -> FusionPlan:
    """Partition ``graph`` (already rewritten) into a FusionPlan with ``strategy`` ("apollo",
    "tvm" or "dp"); groups that ``feedback`` rejects are split and the graph partitioned
    again, at most ``max_feedback_rounds`` times. ``feedback`` is asked about groups with
    their compound ops opened, in ``opening`` (by default opened here). The graph is first
    narrowed (:func:`narrowed`): the plan's graph is then that copy, and an ``opening`` made
    of the graph before is made again (``fuse`` narrows before opening, so it never is)."""
    name = strategy or default_strategy(ruleset)
    run, defaults = _strategy(name)
    opts = strategy_options(ruleset, name, defaults, options)
    split = narrowed(graph, ruleset, name, options)
    if split is not graph:
        graph, opening = split, OPEN_HERE
    cost = CostModel(graph, ruleset.registry, opts.get("cost", "h100"))
    if feedback is not None:
        feedback = on_primitives(feedback, graph, opened(graph, ruleset) if opening is OPEN_HERE
                                 else cast("OpenedGraph | None", opening))
    forbidden: set[tuple[str, str]] = set()
    refusals: list[MergeDecision] = []
    for _ in range(max_feedback_rounds):
        with timed(PARTITION, f"strategy {name}"):
            grouping = run(graph, ruleset, opts, forbidden)
        with timed(PARTITION, "backend feedback"):
            rejected = _rejected_merges(graph, grouping, feedback, cost)
        if not rejected:
            break
        for edge, reason in rejected:
            forbidden.add(edge)
            refusals.append(MergeDecision(*edge, Verdict.FEEDBACK_REFUSED, detail=reason))
    else:
        raise FuseError(f"strategy {name}: the backend kept rejecting groups after {max_feedback_rounds} rounds "
                        f"(last: {feedback_note(refusals[-1]) if refusals else '?'})")

    by_name = graph.index.by_name

    def kind_of(members: list[str]) -> str:
        return "view" if all(cost.is_view(by_name[m]) for m in members) else "kernel"

    plan, _ = grouping.to_plan(name, kind_of)
    # the backend's refusals came first: every later round ran with those edges forbidden
    plan.decisions = refusals + plan.decisions
    plan.rules = getattr(ruleset, "name", "")
    for group in plan.groups:
        priced = cost.group_cost(group.nodes)
        group.cost, group.kernel = priced.as_dict(), priced.kernel
        group.rules.extend(concat_split_notes(graph, group.nodes))
    if name == "apollo":
        with timed(PARTITION, "horizontal packs"):
            plan.horizontal = apollo.horizontal_packs(plan, ruleset, opts, cost)
    plan.stats = replace(
        plan.stats,
        kernels_after=plan.launches,
        bytes_after=sum(int(g.cost["bytes_read"] + g.cost["bytes_written"]) for g in plan.groups),
        flops=sum(g.cost["flops"] for g in plan.groups),
        estimated_seconds_after=sum(g.cost["seconds"] for g in plan.groups),
        device=cost.device.name,
        feedback=[feedback_note(d) for d in refusals],
    )
    plan.validate()
    return plan


def _rejected_merges(graph, grouping, feedback, cost) -> list[tuple[tuple[str, str], str]]:
    if feedback is None:
        return []
    rejected = []
    by_name = graph.index.by_name
    for group in grouping.groups.values():
        if len(group.members) < 2 or all(cost.is_view(by_name[m]) for m in group.members):
            continue
        reason = feedback(graph, list(group.members))
        if reason is not None:
            if group.last_merge is None:
                raise FuseError(f"backend rejected group {group.members} but no merge formed it: {reason}")
            rejected.append(_first_failing_merge(grouping, group, feedback, reason))
    return rejected


def _first_failing_merge(grouping, group, feedback, reason) -> tuple[tuple[str, str], str]:
    """The oldest merge whose result the backend rejects: forbidding it splits the group where
    it first went wrong (forbidding the last merge would peel one op per round)."""
    for _, edge, members in group.history[:-1]:
        if len(members) > 1:
            earlier = feedback(grouping.graph, sorted(members, key=grouping.index.__getitem__))
            if earlier is not None:
                return edge, earlier
    return group.last_merge, reason
