"""Apollo's partition phase: aggregate primitive ops into micro-graphs by the fuse table.

First every match of a `fuse pattern` entry becomes one group (engine/pattern_groups.py).
Then consumers are visited in topological order; each producer group is merged into its
consumer's group when the rule set's table has an entry for (producer category, consumer
category), the merge keeps groups convex, and the size limits hold. A `stitch` entry
also merges, and records the value as kept on chip (layer II). The pass repeats until no
merge applies, because merged groups take new categories. Then `fuse sibling` entries
merge groups that read the same value (multi-output fusion, engine/sibling.py), and the
vertical pass runs again while they change anything. Afterwards independent small
groups of the categories named by `horizontal` entries are packed into shared launches
(layer III): groups at the same depth of the quotient DAG never depend on each other.
"""

from __future__ import annotations

from collections import defaultdict

import networkx as nx

from fusionlang.engine import sibling
from fusionlang.engine.cost import CostModel
from fusionlang.engine.decisions import MergeDecision, Verdict
from fusionlang.engine.grouping import Grouping
from fusionlang.engine.merge_limits import weigh
from fusionlang.engine.pattern_groups import group_patterns
from fusionlang.engine.policy import describe_entry, node_categories
from fusionlang.ir.graph import Graph
from fusionlang.lang.ruleset import edge_context, guard_budget

DEFAULTS = {
    "max_ops": 64,
    "max_args": 96,
    "horizontal": True,
    "horizontal_max_bytes": 1 << 20,
    "horizontal_max_groups": 8,
    "cost": "h100",
}


def partition_apollo(graph: Graph, ruleset, options: dict, forbidden: set[tuple[str, str]]) -> Grouping:
    categories = node_categories(graph, ruleset)
    grouping = Grouping(graph, categories, guard_budget(ruleset, graph))
    producers = {out: n.name for n in graph.nodes for out in n.outputs}
    group_patterns(graph, grouping, ruleset, forbidden, categories)
    _vertical(graph, grouping, ruleset, options, forbidden, categories, producers)
    # a sibling merge gives its group a new category, which may open new vertical merges
    while sibling.merge_siblings(graph, grouping, ruleset, options, forbidden):
        _vertical(graph, grouping, ruleset, options, forbidden, categories, producers)
    return grouping


def _vertical(graph: Graph, grouping: Grouping, ruleset, options, forbidden, categories, producers) -> None:
    """Producer-consumer merges by the fuse table, repeated until none applies."""
    changed = True
    while changed:
        changed = False
        for node in graph.nodes:
            for value in dict.fromkeys(node.present_inputs()):
                source = producers.get(value)
                if source is not None and _try_merge(grouping, ruleset, options, source, node.name, value, forbidden,
                                                             categories):
                    changed = True


def _try_merge(grouping: Grouping, ruleset, options, source: str, sink: str, value: str, forbidden,
               categories: dict[str, str]) -> bool:
    a, b = grouping.group_of[source], grouping.group_of[sink]
    if a == b or (source, sink) in forbidden:
        return False  # the backend's refusals are recorded by partition(), which holds the reasons
    cat_a, cat_b = grouping.groups[a].category, grouping.groups[b].category
    # the entry deciding the edge: a `nofuse` one denies it; guards see the node edge
    edge = edge_context(grouping.graph, value, grouping.nodes[sink], grouping.guard_budget)
    entry, stitched = ruleset.fuse_decision(cat_a, cat_b, edge=edge), False
    if entry is None:
        entry, stitched = ruleset.fuse_decision(cat_a, cat_b, flag="stitch", edge=edge), True
    verdict, limit, measure = weigh(grouping, options, a, b, entry)
    grouping.decide(MergeDecision(source, sink, verdict, cat_a, cat_b, entry, limit, measure,
                                  (grouping.size(a), grouping.size(b))))
    if verdict is not Verdict.MERGED:
        return False
    grouping.merge(a, b, entry.result, describe_entry(entry), edge=(source, sink))
    if stitched and categories[source] in entry.producers:
        # only a reduction's own result is kept on chip; values of ops merged earlier
        # into the reduction's group are ordinary intermediates
        grouping.stitches.append((value, sink))
    return True


def horizontal_packs(plan, ruleset, options: dict, cost: CostModel) -> list[list[int]]:
    """Lists of plan group ids to launch together (each list at one quotient depth)."""
    if not options["horizontal"]:
        return []
    eligible = set()
    for entry in ruleset.fuse_entries:
        if "horizontal" in entry.flags:
            eligible |= set(entry.producers) | set(entry.consumers)
    if not eligible:
        return []
    quotient = plan.quotient()
    depth: dict[int, int] = {}
    for gid in nx.topological_sort(quotient):
        depth[gid] = 1 + max((depth[p] for p in quotient.predecessors(gid)), default=-1)
    levels: dict[int, list[int]] = defaultdict(list)
    for group in plan.kernels:
        small = cost.group_cost(group.nodes).bytes <= options["horizontal_max_bytes"]
        if group.category in eligible and small:
            levels[depth[group.id]].append(group.id)
    packs = []
    limit = max(2, options["horizontal_max_groups"])
    for level in sorted(levels):
        members = levels[level]
        for start in range(0, len(members), limit):
            chunk = members[start:start + limit]
            if len(chunk) > 1:
                packs.append(chunk)
    return packs
