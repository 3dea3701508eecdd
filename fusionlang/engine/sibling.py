"""Sibling (multi-output) fusion, as XLA's multi-output fusion: groups that read the same
value become one kernel, though neither feeds the other, so the value is read once and
the kernel writes every sibling's outputs.

A rule set asks for it with ``fuse sibling A, B : RESULT`` entries: two groups of
categories A and B (in either order) that read one value (a graph input or an op's
result; never a constant, which costs no traffic) merge into a group of category RESULT.
The first entry that pairs the two categories decides. The merge passes the same checks
as a producer-consumer merge (engine/merge_limits.py): ``max_ops``, ``max_args``, and a
quotient that stays acyclic (a path from one sibling to the other through a third group
forbids it). Groups that feed one another directly are left to the producer-consumer
table, and so is the group that computes the shared value.

Every merge an entry applied to is recorded as a MergeDecision whose two ends are the
readers and whose ``shared`` is the value; pairs no entry covers are not recorded (a
value read by n groups has n^2 such pairs, none of them a decision anyone made).
"""

from __future__ import annotations

from fusionlang.engine.decisions import MergeDecision, Verdict
from fusionlang.engine.grouping import Grouping
from fusionlang.engine.merge_limits import weigh
from fusionlang.engine.policy import describe_entry
from fusionlang.ir.graph import Graph


def sibling_entries(ruleset) -> list:
    """The rule set's ``fuse sibling`` entries, in file order."""
    return [entry for entry in ruleset.fuse_entries if "sibling" in entry.flags]


def pairing_entry(entries: list, first: str, second: str):
    """The first sibling entry that pairs the two categories, in either order, or None."""
    return next((e for e in entries if e.matches(first, second) or e.matches(second, first)), None)


def merge_siblings(graph: Graph, grouping: Grouping, ruleset, options: dict, forbidden) -> bool:
    """Merge sibling groups by the rule set's sibling entries; True when any merged."""
    entries = sibling_entries(ruleset)
    if not entries:
        return False
    producers = graph.producers()
    merged = False
    for value, readers in graph.consumers().items():
        if value in graph.constants or len(readers) < 2:
            continue
        source = producers.get(value)
        owner = grouping.group_of[source.name] if source is not None else None
        names = [node.name for node in readers]
        for k, first in enumerate(names):
            for second in names[k + 1:]:
                if _try_siblings(grouping, entries, options, forbidden, first, second, value, owner):
                    merged = True
    return merged


def _try_siblings(grouping: Grouping, entries, options, forbidden, first: str, second: str, value: str,
                  owner: int | None) -> bool:
    a, b = grouping.group_of[first], grouping.group_of[second]
    if a == b or owner in (a, b):
        return False
    if (first, second) in forbidden:
        # partition() records the backend's reason; this marks the pair as siblings
        grouping.decide(MergeDecision(first, second, Verdict.FEEDBACK_REFUSED, shared=value))
        return False
    if b in grouping.groups[a].succ or a in grouping.groups[b].succ:
        return False  # one feeds the other: the producer-consumer table decides
    cat_a, cat_b = grouping.groups[a].category, grouping.groups[b].category
    entry = pairing_entry(entries, cat_a, cat_b)
    if entry is None:
        return False
    verdict, limit, measure = weigh(grouping, options, a, b, entry)
    grouping.decide(MergeDecision(first, second, verdict, cat_a, cat_b, entry, limit, measure,
                                  (grouping.size(a), grouping.size(b)), shared=value))
    if verdict is not Verdict.MERGED:
        return False
    grouping.merge(a, b, entry.result, describe_entry(entry), edge=(first, second))
    return True
