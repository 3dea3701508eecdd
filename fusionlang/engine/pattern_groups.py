"""Pattern-scoped fusion: every subgraph a ``fuse pattern`` entry matches becomes one group.

This runs before the category pairs are consulted (as TVM's FuseOpsByPattern runs before
FuseOps): entries in precedence order, roots in graph order. A match is one group when it is
legal, and every refusal is a recorded decision naming the entry: a match that shares a node
with an earlier pattern's group (PATTERN_OVERLAP), one whose nodes a path through an outside
node connects (grouping them would make a cycle: CYCLE), or one the backend refused to
compile in an earlier round (FEEDBACK_REFUSED). The group takes the entry's ``as`` category,
else the highest category among its nodes, and later takes part in category-pair fusion as
any group does.
"""

from __future__ import annotations

from fusionlang.engine.decisions import MergeDecision, Verdict
from fusionlang.engine.grouping import Grouping
from fusionlang.engine.match import Match, Matcher
from fusionlang.engine.policy import describe_entry
from fusionlang.ir.graph import Graph
from fusionlang.lang.ruleset import PatternEntry


def group_patterns(graph: Graph, grouping: Grouping, ruleset, forbidden: set[tuple[str, str]],
                   categories: dict[str, str]) -> None:
    """Merge each legal match of ``ruleset``'s pattern entries into one group of ``grouping``."""
    if not getattr(ruleset, "fuse_patterns", ()):
        return
    matcher = Matcher(graph, ruleset)
    claimed: dict[str, PatternEntry] = {}
    for entry in ruleset.fuse_patterns:
        for node in graph.nodes:
            match = matcher.match(entry, node)
            if match is not None and _legal(grouping, entry, match, claimed, forbidden, categories):
                _merge(grouping, ruleset, entry, match, categories)
                claimed.update((n.name, entry) for n in match.nodes)


def pattern_outcomes(plan, ruleset) -> list[tuple[PatternEntry, int, dict[str, int]]]:
    """Per pattern entry of ``ruleset``: the plan's groups it formed, and its refused
    matches counted by verdict (what `fuse` prints)."""
    out = []
    for entry in getattr(ruleset, "fuse_patterns", ()):
        why = describe_entry(entry)
        refused: dict[str, int] = {}
        for d in plan.decisions:
            if d.entry is entry and d.verdict is not Verdict.MERGED:
                refused[d.verdict.value] = refused.get(d.verdict.value, 0) + 1
        out.append((entry, sum(why in g.rules for g in plan.groups), refused))
    return out


def internal_edges(match: Match) -> list[tuple[str, str]]:
    """(producer, consumer) node pairs inside the match, producers before their consumers."""
    produced_by = {out: n.name for n in match.nodes for out in n.outputs}
    edges = []
    for consumer in reversed(match.nodes):
        for value in dict.fromkeys(consumer.present_inputs()):
            if value in produced_by:
                edges.append((produced_by[value], consumer.name))
    return edges


def _legal(grouping: Grouping, entry: PatternEntry, match: Match, claimed, forbidden, categories) -> bool:
    edges = internal_edges(match) or [(match.root.name, match.root.name)]
    first = edges[0]

    def refuse(verdict: Verdict, edge: tuple[str, str], detail: str) -> bool:
        grouping.decide(MergeDecision(*edge, verdict, categories[edge[0]], categories[edge[1]], entry, detail=detail))
        return False

    taken = [n.name for n in match.nodes if n.name in claimed]
    if taken:
        other = claimed[taken[0]]
        return refuse(Verdict.PATTERN_OVERLAP, first, f"node {taken[0]!r} is already in a group of fuse pattern "
                                                      f"{other.name!r} ({other.where})")
    refused = [edge for edge in edges if edge in forbidden]
    if refused:
        return refuse(Verdict.FEEDBACK_REFUSED, refused[0], "the backend refused a merge inside this match")
    outside = grouping.path_outside({grouping.group_of[n.name] for n in match.nodes})
    if outside is not None:
        return refuse(Verdict.CYCLE, first, f"a path leaves the match and re-enters it through node "
                                            f"{grouping.groups[outside].members[0]!r}")
    return True


def _merge(grouping: Grouping, ruleset, entry: PatternEntry, match: Match, categories) -> None:
    category = entry.result or max((categories[n.name] for n in match.nodes), key=ruleset.rank)
    why = describe_entry(entry)
    root = grouping.group_of[match.root.name]
    for producer, consumer in internal_edges(match):
        grouping.decide(MergeDecision(producer, consumer, Verdict.MERGED, categories[producer], categories[consumer],
                                      entry))
        source = grouping.group_of[producer]
        if source != root:
            root = grouping.merge(source, root, category, why, edge=(producer, consumer))
    group = grouping.groups[root]
    group.category = category
    if why not in group.rules:
        group.rules.append(why)
    # the match is one unit: its partial sets are no merges the feedback may split at (an
    # attention block half built is two matmuls the backend refuses), so when the group later
    # grows and is refused, the split falls on a merge after the match, or on the match whole
    group.history = group.history[-1:]
