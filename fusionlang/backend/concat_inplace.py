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
the previous concat with new features): offsets add up along the chain. A concat that
lists an earlier in-place concat's inputs again, whole and in order (torch's densenet
concats every feature of its block so far, layer after layer), lays that concat's output
there instead: the whole block lies in its last concat's bytes.

A policy may fuse a concat into the group of one of its producers (Apollo puts inception's
concat after a branch's conv, batch norm and relu; densenet's between a conv and the next
batch norm): that group then copies every other input. :func:`split_at_concats` gives
such a concat a group of its own, so the branch it came with writes its result into the
concat's output like the others and the copies go (densenet121, one core: the copies
made the fused build 6% slower than one kernel per op, concats in place).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from fusionlang.engine.cost import CONTRACTIONS
from fusionlang.engine.decisions import MergeDecision, Verdict
from fusionlang.engine.plan import FusionPlan, Group, carried_fields, make_groups


@dataclass(frozen=True)
class Placement:
    #: the concat output whose bytes hold the value
    root: str
    #: byte offset of the value inside ``root``
    at: int


def split_at_concats(plan: FusionPlan, *, cut_inside: bool = True) -> FusionPlan:
    """``plan`` with each larger kernel group that holds a concat able to run in place cut
    around it: what the concat does not depend on, the concat alone, what reads it (``plan``
    itself if none is cut). Cut where nothing in the group reads the concat (no kernel is
    added), and, with ``cut_inside``, where the cut stores nothing the group did not store
    already: the concat's output leaves the group anyway, or each of its inputs comes from
    outside the group or from a conv or matmul (the template stores its result either way).
    The cut saves the copy of the inputs computed elsewhere and adds a kernel for what read
    the concat in the group: on a GPU a launch costs more than such a copy. On the CPU the
    cut also spares loop fusion a statement writing at an offset, which no outer loop can
    share: densenet121's last concat of a block, fused with the batch norm after it, ran
    as 8 loop nests through 5 temporaries (5.3 ms of a 71 ms run).
    A group in a stitch or a horizontal pack is left whole."""
    kept = {g for g, _ in plan.stitches} | {g for pack in plan.horizontal for g in pack}
    members: list[list[str]] = []
    fields, first_piece, schedules, template_schedules, decisions = [], {}, {}, {}, []
    for group in plan.groups:
        first_piece[group.id] = len(members)
        field = carried_fields(group)
        concat = None if group.id in kept else _concat_to_cut(plan, group, cut_inside)
        if concat is None:
            if group.id in plan.schedules:
                schedules[len(members)] = plan.schedules[group.id]
            if group.id in plan.template_schedules:
                template_schedules[len(members)] = plan.template_schedules[group.id]
            members.append(list(group.nodes))
            fields.append(field)
            continue
        after = _descendants_in(plan.graph, concat, set(group.nodes))
        pieces = [[n for n in group.nodes if n != concat and n not in after], [concat],
                  [n for n in group.nodes if n in after]]
        decisions += _cut_decisions(plan.graph, [p for p in pieces if p], concat)
        for piece in pieces:
            if piece:
                members.append(piece)
                fields.append(field if piece != [concat] else
                              dict(category=group.category, rules=[*group.rules, "concat run in place"]))
    if len(members) == len(plan.groups):
        return plan
    # a cut group's schedule is gone with it: fuse() selects its pieces' (compile does for a plan made elsewhere)
    cut = replace(plan, groups=make_groups(plan.graph, members, fields),
                  stitches=[(first_piece[g], v) for g, v in plan.stitches],
                  horizontal=[[first_piece[g] for g in pack] for pack in plan.horizontal],
                  schedules=schedules, template_schedules=template_schedules,
                  decisions=[*plan.decisions, *decisions])
    cut.validate()
    if cut.stats.kernels_after is not None:
        cut.stats = replace(cut.stats, kernels_after=cut.launches)
    return split_at_concats(cut, cut_inside=cut_inside)  # a group with a second concat: cut again


def _cut_decisions(graph, pieces: list[list[str]], concat: str) -> list[MergeDecision]:
    """A decision for each edge of the group the cut separates: the plan says why its ends
    are in different groups, as for the partitioner's own refusals."""
    piece_of = {name: k for k, piece in enumerate(pieces) for name in piece}
    detail = (f"the backend cut the group around {concat} (concat), whose inputs are written straight into its "
              "output (it runs in place)")
    by_name = graph.index.by_name
    return [MergeDecision(name, reader.name, Verdict.CONCAT_CUT, detail=detail)
            for name in piece_of
            for out in by_name[name].outputs if out
            for reader in graph.index.consumers.get(out, ())
            if reader.name in piece_of and piece_of[reader.name] != piece_of[name]]


def _concat_to_cut(plan: FusionPlan, group: Group, cut_inside: bool) -> str | None:
    """The first concat of ``group`` worth a group of its own (see :func:`split_at_concats`)."""
    if group.kind != "kernel" or len(group.nodes) < 2:
        return None
    graph = plan.graph
    inside = set(group.nodes)
    for node in plan.nodes_of(group):
        if node.op != "concat" or not _lays_end_to_end(graph, node) or not _placeable_inputs(graph, node):
            continue
        read_inside = any(c.name in inside for c in graph.index.consumers.get(node.outputs[0], ()))
        if not read_inside or (cut_inside and (node.outputs[0] in group.outputs
                                               or _inputs_stored_anyway(graph, node, inside))):
            return node.name
    return None


def _inputs_stored_anyway(graph, node, inside: set[str]) -> bool:
    """Each input of the concat comes from outside the group or from a conv or matmul in it
    (its GEMM template stores the result whether or not the concat is cut out)."""
    producers = graph.index.producers
    return all(producers[v].name not in inside or producers[v].op in CONTRACTIONS for v in node.inputs)


def _placeable_inputs(graph, node) -> bool:
    """What :func:`concat_placements` will ask, as far as the graph alone tells: distinct
    inputs, each computed by a node, neither they nor the output a graph output."""
    values = [*node.inputs, node.outputs[0]]
    return (len(set(node.inputs)) == len(node.inputs) and not set(values) & set(graph.outputs)
            and all(v in graph.index.producers for v in node.inputs))


def _descendants_in(graph, name: str, inside: set[str]) -> set[str]:
    """The nodes of ``inside`` that read, directly or not, what node ``name`` computes."""
    found, stack = set(), [name]
    while stack:
        for value in graph.node(stack.pop()).outputs:
            for reader in graph.index.consumers.get(value, ()):
                if reader.name in inside and reader.name not in found:
                    found.add(reader.name)
                    stack.append(reader.name)
    return found


def _lays_end_to_end(graph, node) -> bool:
    out = graph.types[node.outputs[0]]
    return out.rank > 0 and math.prod(out.shape[:node.attrs["axis"] % out.rank]) == 1 and out.nbytes > 0


def may_run_in_place(plan: FusionPlan, group: Group) -> bool:
    """Whether ``group`` is a concat alone that, as far as the graph tells, runs in place
    (compile decides with :func:`concat_placements`): it needs no loop nest, so no schedule."""
    nodes = plan.nodes_of(group)
    return (group.kind == "kernel" and len(nodes) == 1 and nodes[0].op == "concat"
            and _lays_end_to_end(plan.graph, nodes[0]) and _placeable_inputs(plan.graph, nodes[0]))


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
    if len(set(inputs)) != len(inputs) or any(v not in written for v in inputs):
        return {}
    laid = _laid_out(inputs, taken)
    if laid is None:
        return {}
    found, at = {}, 0
    for value in laid:
        found[value] = Placement(node.outputs[0], at)
        at += graph.types[value].nbytes
    return found


def _laid_out(inputs: list[str], taken: dict[str, Placement]) -> list[str] | None:
    """The values ``inputs`` lays end to end, with each run of inputs that an earlier concat
    run in place holds, whole and in its order, read as that concat's output (torch's
    densenet concats every feature of a block so far, layer after layer: each concat is
    the one before plus a new feature, so the whole block lies in its last concat's bytes
    and no layer copies); None when an input is placed elsewhere."""
    held: dict[str, list[tuple[int, str]]] = {}
    for value, place in taken.items():
        held.setdefault(place.root, []).append((place.at, value))

    def leaves(root: str) -> list[str]:  # the inputs a concat run in place holds, nested ones opened
        return [leaf for _, v in sorted(held[root]) for leaf in (leaves(v) if v in held else [v])]

    laid, k = [], 0
    while k < len(inputs):
        root = inputs[k]
        while root in taken:
            root = taken[root].root
        run = leaves(root) if root != inputs[k] else [root]
        if inputs[k:k + len(run)] != run:
            return None
        laid.append(root)
        k += len(run)
    return laid


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


__all__ = ["Placement", "concat_placements", "drop_output_bound", "resolve", "split_at_concats"]
