"""The checks every greedy merge of two groups passes, in the order their verdicts are
reported: a fuse entry applies, the merged group stays within ``max_ops`` ops and
``max_args`` inputs, and the quotient stays acyclic. Shared by apollo's producer-consumer
merges and its sibling merges, so both record the same verdicts for the same reasons.
"""

from __future__ import annotations

from fusionlang.engine.decisions import Verdict
from fusionlang.engine.grouping import Grouping


def weigh(grouping: Grouping, options, a: int, b: int, entry) -> tuple[Verdict, int | None, int | None]:
    """The verdict on merging groups a and b under ``entry`` (None: the table has none),
    with the limit's value and the measure that broke it."""
    if entry is None:
        return Verdict.NO_ENTRY, None, None
    if entry.deny:
        return Verdict.DENIED, None, None
    ops = grouping.size(a) + grouping.size(b)
    if ops > options["max_ops"]:
        return Verdict.MAX_OPS, options["max_ops"], ops
    inputs = len(grouping.external_inputs([a, b]))
    if inputs > options["max_args"]:
        return Verdict.MAX_ARGS, options["max_args"], inputs
    if not grouping.can_merge(a, b):
        return Verdict.CYCLE, None, None
    return Verdict.MERGED, None, None
