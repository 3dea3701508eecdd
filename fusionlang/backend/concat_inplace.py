"""Concat without a copy: its inputs are written where the output keeps them.

A concat along an axis with only 1s before it (batch 1, channels, NCHW: inception's and
densenet's concats) lays its inputs end to end in the output's bytes. Each input can then
be stored there directly by the kernel that computes it, and the concat itself runs
nothing (inception_v2: the concat copies were 4 to 8% of a run).

An input is placed inside the output (a ``Placement``) when, conservatively:

* it is written by a kernel group (not a graph input, a constant or a view of another
  value), and no other concat places it;
* it appears once among the concat's inputs;
* neither it nor the concat's output is, or is re-labelled as, a graph output (``run``
  may hand a graph output's memory to the caller, see ``runtime_c.direct_outputs``).

A placed concat's output may itself be placed in a later concat (densenet's blocks concat
the previous concat with new features): offsets add up along the chain.

A policy may fuse a concat into the group of one of its producers (Apollo puts inception's
concat after a branch's conv, batch norm and relu): that group then copies every other
branch. :func:`split_trailing_concats` gives such a concat a group of its own, right
after, so the branch it came with writes its result into the concat's output like the
others (the value stays out of memory of its own) and the copies go.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from fusionlang.engine.plan import FusionPlan, Group, make_groups


@dataclass(frozen=True)
class Placement:
    #: the concat output whose bytes hold the value
    root: str
    #: byte offset of the value inside ``root``
    at: int


def split_trailing_concats(plan: FusionPlan) -> FusionPlan:
    """``plan`` with each concat that can run in place (by its shape) and ends a larger
    kernel group moved to a group of its own, right after (``plan`` itself if none)."""
    members, fields, moved = [], [], {}
    for group in plan.groups:
        concat = _trailing_concat(plan, group)
        fields.append(dict(category=group.category, kind=group.kind, rules=list(group.rules), cost=dict(group.cost)))
        if concat is None:
            members.append(list(group.nodes))
            continue
        members.append([n for n in group.nodes if n != concat])
        members.append([concat])
        fields.append(dict(category=group.category, kind="kernel",
                           rules=[*group.rules, "concat run in place (backend/concat_inplace.py)"]))
        moved[group.id] = len(members) - 1
    if not moved:
        return plan
    new_id = {}
    for group in plan.groups:
        new_id[group.id] = len(new_id) + sum(1 for old in moved if old < group.id)
    groups = make_groups(plan.graph, members, fields)
    split = replace(plan, groups=groups, stitches=[(new_id[g], v) for g, v in plan.stitches],
                    horizontal=[[new_id[g] for g in pack] for pack in plan.horizontal])
    split.validate()
    return split


def _trailing_concat(plan: FusionPlan, group: Group) -> str | None:
    """The concat node that ends ``group`` (read by nothing else in it), when the group holds
    more than it and the concat's shape lets it run in place."""
    if group.kind != "kernel" or len(group.nodes) < 2:
        return None
    graph = plan.graph
    inside = set(group.nodes)
    for node in plan.nodes_of(group):
        if node.op != "concat" or not _lays_end_to_end(graph, node):
            continue
        readers = {c.name for c in graph.index.consumers.get(node.outputs[0], ())}
        if not readers & inside:
            return node.name
    return None


def _lays_end_to_end(graph, node) -> bool:
    out = graph.types[node.outputs[0]]
    return out.rank > 0 and math.prod(out.shape[:node.attrs["axis"] % out.rank]) == 1 and out.nbytes > 0


def concat_placements(plan: FusionPlan, group: Group, written: set[str], taken: dict[str, Placement]) -> dict[str, Placement]:
    """The placements that make ``group`` a concat run in place, or {} when it is not one.
    ``written``: values kernel groups before it store to memory; ``taken``: values already
    placed."""
    nodes = plan.nodes_of(group)
    if group.kind != "kernel" or len(nodes) != 1 or nodes[0].op != "concat":
        return {}
    node = nodes[0]
    graph = plan.graph
    if not _lays_end_to_end(graph, node) or node.outputs[0] not in group.outputs:  # unread: no buffer
        return {}
    inputs = node.inputs
    if len(set(inputs)) != len(inputs) or any(v not in written or v in taken for v in inputs):
        return {}
    found, at = {}, 0
    for value in inputs:
        found[value] = Placement(node.outputs[0], at)
        at += graph.types[value].nbytes
    return found


def drop_output_bound(placements: dict[str, Placement], outputs: set[str], aliases: dict[str, str]) -> set[str]:
    """Remove, in place, every concat whose output or an input is a graph output or is
    re-labelled as one (a view of it is); returns the outputs of the concats dropped."""
    bound = set(outputs)
    for value in outputs:
        while value in aliases:
            value = aliases[value]
            bound.add(value)
    dropped = {p.root for v, p in placements.items() if v in bound or p.root in bound}
    for value in [v for v, p in placements.items() if p.root in dropped]:
        del placements[value]
    return dropped


def resolve(placements: dict[str, Placement], value: str) -> Placement:
    """Where ``value`` lies in the outermost concat output that holds it."""
    place = placements[value]
    while place.root in placements:
        outer = placements[place.root]
        place = Placement(outer.root, outer.at + place.at)
    return place


__all__ = ["Placement", "concat_placements", "drop_output_bound", "resolve", "split_trailing_concats"]
