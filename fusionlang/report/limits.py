"""What the report says about the limits that shaped each group, read from the plan's
recorded merge decisions (engine/decisions.py): a group cut by ``max_ops`` or ``max_args``
says so, with the edge, the other group and the fuse entry that would have merged them."""

from __future__ import annotations

from fusionlang.engine.decisions import MergeDecision, shaping
from fusionlang.engine.plan import FusionPlan
from fusionlang.engine.policy import describe_entry


def limit_notes(plan: FusionPlan) -> dict[int, list[str]]:
    """group id -> one line per edge to another group that a limit kept apart, on both sides."""
    owner = plan.group_of()
    by_edge: dict[tuple[str, str], list[MergeDecision]] = {}
    for decision in plan.decisions:
        if decision.producer in owner and decision.consumer in owner:
            by_edge.setdefault(decision.edge, []).append(decision)
    notes: dict[int, list[str]] = {}
    for (producer, consumer), decisions in by_edge.items():
        source, sink = owner[producer], owner[consumer]
        decision = shaping(decisions)
        if source == sink or decision is None or decision.verdict.limit is None:
            continue
        entry = f" ({describe_entry(decision.entry)} applied)" if decision.entry is not None else ""
        line = (f"{decision.verdict.limit} = {decision.limit} kept {producer} (group {source}) and "
                f"{consumer} (group {sink}) apart{entry}")
        for gid in dict.fromkeys((source, sink)):
            notes.setdefault(gid, []).append(line)
    return notes
