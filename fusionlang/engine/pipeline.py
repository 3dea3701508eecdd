"""fuse(): rewrite a graph with a rule set, then partition it into a FusionPlan.

The numbers a user compares come from here: kernels and global-memory bytes of the graph
as it came in (every node its own kernel, views free) against those of the plan, and the
time the whole thing took.
"""

from __future__ import annotations

import time
from dataclasses import replace

from fusionlang.engine.cost import CostModel
from fusionlang.engine.lowering import lower_compound_groups, opened
from fusionlang.engine.partition import Feedback, default_strategy, narrowed, partition
from fusionlang.engine.plan import FusionPlan
from fusionlang.engine.rewrite import apply_rules
from fusionlang.ir.graph import Graph
from fusionlang.instrument import logger, timed
from fusionlang.stages import PARTITION, REWRITE


def unfused_stats(graph: Graph, registry=None, device: str = "h100") -> dict:
    """Kernels, bytes and roofline time of ``graph`` with no fusion at all."""
    cost = CostModel(graph, registry, device)
    total = cost.unfused()
    return {"kernels": total.launches, "bytes": total.bytes, "seconds": total.seconds}


def fuse(graph: Graph, ruleset, strategy: str | None = None, *, options: dict | None = None,
         feedback: Feedback | None = None, rewrite: bool = True, target: str = "") -> FusionPlan:
    """Rewrite ``graph`` with ``ruleset`` and partition the result with ``strategy``
    (default: the rule set's own); returns the FusionPlan with before/after stats.
    ``feedback`` is the backend's verdict on a group (Apollo's upward feedback), for
    ``target``, which the plan records. The compound ops the partition keeps whole are
    opened once: the feedback asks about the opened graph, and the plan takes it over."""
    started = time.perf_counter()
    name = strategy or default_strategy(ruleset)
    with timed(PARTITION, "cost before fusion"):
        before = unfused_stats(graph, ruleset.registry)
    result = apply_rules(graph, ruleset) if rewrite else None
    rewritten = result.graph if result is not None else graph
    rewritten_at = time.perf_counter()
    with timed(PARTITION, "narrow wide concats and splits"):
        rewritten = narrowed(rewritten, ruleset, name, options)
    with timed(PARTITION, "open compound ops"):
        opening = opened(rewritten, ruleset)
    plan = partition(rewritten, ruleset, name, options=options, feedback=feedback, opening=opening)
    plan.target = target
    with timed(PARTITION, "open compound groups"):
        plan = lower_compound_groups(plan, ruleset, opening)  # the graph was narrowed before it was opened
    plan.original = graph
    plan.stats = replace(
        plan.stats,
        kernels_before=before["kernels"],
        bytes_before=before["bytes"],
        estimated_seconds_before=before["seconds"],
        ops_before=len(graph.nodes),
        rewrites=dict(result.fired) if result is not None else {},
        rewrite_order=rewrite_order(result.trace) if result is not None else [],
        rewrite_stop=result.stop_reason if result is not None else "skipped",
        rewrite_seconds=rewritten_at - started,
        partition_seconds=time.perf_counter() - rewritten_at,
    )
    _log_plan(plan, result)
    return plan


def rewrite_order(trace) -> list[dict]:
    """Each rewrite rule once, in the order it first fired, with its priority (its phase),
    the step of that first firing and how often it fired: what `fuse --show-rewrites` prints."""
    order: dict[str, dict] = {}
    for entry in trace:
        if entry.pass_name != "simplify":
            continue
        row = order.setdefault(entry.rule, {"rule": entry.rule, "where": entry.where, "priority": entry.priority,
                                            "first_step": entry.step, "count": 0})
        row["count"] += 1
    return list(order.values())


def _log_plan(plan: FusionPlan, result) -> None:
    """The INFO lines of the rewrite and partition stages: what each decided."""
    if result is not None:
        fired = ", ".join(f"{rule} x{count}" for rule, count in sorted(result.fired.items()))
        logger(REWRITE).info("%d rewrites (%s), stop: %s", sum(result.fired.values()), fired or "none",
                             result.stop_reason)
    s = plan.stats
    logger(PARTITION).info("%s: %d ops -> %d kernels in %d groups (before fusion: %d kernels), %d backend refusals",
                           plan.strategy, s.ops_before, plan.launches, len(plan.groups), s.kernels_before,
                           len(s.feedback or []))
