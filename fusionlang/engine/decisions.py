"""Merge decisions: what a partitioner decided about an edge between two groups, as values.

Each time a partitioner weighs merging the group of a producer node with the group of
one of its consumers (or, for sibling entries, two groups that read the same value), it
records a :class:`MergeDecision`: the node-level edge, the categories the two groups had
at that moment, the fuse entry that applied (with its source span) or None, and a
:class:`Verdict`. A refusal by a limit carries the option's name and value. The plan keeps
the decisions in the order they were made; ``explain`` and the HTML report read them
instead of re-deriving the partitioner's reasons afterwards, when the groups' categories
may have changed (a cap can split a chain whose halves later both become ``complex``:
the cap was the cause, not the missing ``complex -> complex`` entry).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Iterable

from fusionlang.engine.policy import describe_entry


class Verdict(str, Enum):
    """What became of one weighed merge (a str, so plans serialise it as its text)."""

    MERGED = "merged"
    NO_ENTRY = "no entry"
    #: a `nofuse` entry decided the pair (the decision's entry)
    DENIED = "denied"
    MAX_OPS = "limit max_ops"
    MAX_ARGS = "limit max_args"
    MAX_DEPTH = "limit max_depth"
    CYCLE = "would create a cycle"
    PATH_REFUSED = "path refused"
    FEEDBACK_REFUSED = "feedback refused"
    COST_REJECTED = "cost rejected"
    #: the backend cut a group around a concat whose inputs are written into its output
    #: (backend/concat_inplace.py), after partitioning
    CONCAT_CUT = "cut for a concat in place"
    #: a `fuse pattern` match shares a node with an earlier pattern's group
    PATTERN_OVERLAP = "overlaps a pattern group"

    @property
    def limit(self) -> str | None:
        """The strategy option a limit verdict names (``max_ops``...), else None."""
        return self.value[len("limit "):] if self.value.startswith("limit ") else None


#: verdicts where an entry applied and something else stopped the merge: these, not a
#: later "no entry" between the grown groups, are what shaped the groups
BLOCKING = frozenset({Verdict.MAX_OPS, Verdict.MAX_ARGS, Verdict.MAX_DEPTH, Verdict.CYCLE,
                      Verdict.FEEDBACK_REFUSED, Verdict.COST_REJECTED, Verdict.CONCAT_CUT, Verdict.PATTERN_OVERLAP})


@dataclass(frozen=True)
class MergeDecision:
    """One weighed merge of the groups holding ``producer`` and ``consumer`` (node names;
    for a sibling entry, two consumers of one value)."""

    producer: str
    consumer: str
    verdict: Verdict
    producer_category: str = ""
    consumer_category: str = ""
    #: the fuse entry that applied (a lang FuseEntry, with its span), or None
    entry: Any = None
    #: the limit's value for a limit verdict (max_ops = 8 -> 8)
    limit: int | None = None
    #: the measure that broke the limit (ops or inputs of the merged group)
    measure: int | None = None
    #: sizes of the two groups when weighed (ops), for the text
    sizes: tuple[int, int] | None = None
    #: free text from outside the partitioner: the backend's reason, the cost model's numbers
    detail: str = ""
    #: for a sibling entry: the value both nodes read (producer and consumer are then the
    #: two readers)
    shared: str = ""

    @property
    def edge(self) -> tuple[str, str]:
        return self.producer, self.consumer

    def same_as(self, other: MergeDecision) -> bool:
        """The same verdict for the same reason on groups of the same sizes (what a repeated
        pass need not record again)."""
        return (self.verdict, self.producer_category, self.consumer_category, self.entry, self.limit,
                self.measure, self.sizes) == (other.verdict, other.producer_category, other.consumer_category,
                                              other.entry, other.limit, other.measure, other.sizes)

    def to_dict(self) -> dict[str, Any]:
        return {"producer": self.producer, "consumer": self.consumer, "verdict": self.verdict.value,
                "producer_category": self.producer_category, "consumer_category": self.consumer_category,
                "entry": describe_entry(self.entry) if self.entry is not None else None,
                "limit": self.verdict.limit, "limit_value": self.limit, "measure": self.measure,
                "detail": self.detail, "shared": self.shared}


def feedback_note(decision: MergeDecision) -> str:
    """The line a backend refusal has always been reported with."""
    return f"backend refused the merge {decision.producer} -> {decision.consumer}: {decision.detail}"


def history(decisions: Iterable[MergeDecision], producer: str, consumer: str) -> list[MergeDecision]:
    """Every decision recorded for the edge producer -> consumer, oldest first."""
    return [d for d in decisions if d.producer == producer and d.consumer == consumer]


def shaping(decisions: list[MergeDecision]) -> MergeDecision | None:
    """The decision that kept an edge's two sides apart: the latest blocking one (a limit,
    a cycle, the backend, the cost model), else the latest."""
    blocking = [d for d in decisions if d.verdict in BLOCKING]
    if blocking:
        return blocking[-1]
    return decisions[-1] if decisions else None
