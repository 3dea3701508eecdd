"""Apollo's upward feedback: can a set of nodes be fused into one loop nest?

The partitioner calls :func:`check_group` (through a callback the API hands it) on every
candidate group; a group that does not fuse into one legal nest gets a one-line reason and
is split by the partitioner. So does a group holding two ops that each run as a compute
template (:data:`TEMPLATE_OPS`): it could be one nest, but a slow one. Only the
polyhedral part runs here (statements, dependences, fused tree, legality): no AST, no code,
so it is cheap enough to call per merge.

Verdicts are values (:class:`Verdict`) holding the schedule selected for the group, kept
twice: per graph object and node set (the partitioner asks again each round), and, as
that schedule, per *structure* of the group (:mod:`.schedule_store`, keyed by
:func:`.signature.group_signature`), so the blocks a model repeats (ResNet-50's
bottlenecks: 21 schedules for 50 questions) are scheduled once, and compile replays the
schedule instead of selecting it again.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from fusionlang.backend.poly import build_program
from fusionlang.backend.schedule import ScheduleChoice
from fusionlang.backend.schedule_store import forget_choices, known_choice, schedule_key, select
from fusionlang.backend.signature import group_signature, in_graph_order
from fusionlang.backend.template import COMPLEX_OPS, POOL_TAPS, split_epilogue
from fusionlang.errors import FuseError
from fusionlang.ir.graph import Graph

_VERDICTS: "weakref.WeakKeyDictionary[Graph, dict]" = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Verdict:
    """The loop fuser's answer on a group: ``reason`` is None when it fuses into one legal
    loop nest, else one line saying why not; ``schedule`` is the schedule selected for it
    (None when there was nothing to select: one statement, or a program that could not be
    built)."""

    reason: str | None
    schedule: ScheduleChoice | None = None


#: ops the CPU backend runs as compute templates (backend.template), one per group
TEMPLATE_OPS = frozenset(COMPLEX_OPS) | frozenset(POOL_TAPS)


def check_group(graph: Graph, node_names: list[str]) -> str | None:
    """None if the nodes fuse into one legal loop nest (and hold at most one compute
    template op), else a one-line reason.

    Verdicts are remembered per graph object (the partitioner asks again each round) and
    per group structure (:func:`group_signature`); a graph edited in place should be
    copied first, as the engine does.
    """
    return verdict(graph, node_names).reason


def verdict(graph: Graph, node_names: list[str]) -> Verdict:
    """:func:`check_group`'s answer with the schedule selected for the group."""
    memo = _VERDICTS.setdefault(graph, {})
    key = frozenset(node_names)
    if key not in memo:
        memo[key] = _verdict(graph, list(node_names))
    return memo[key]


def forget_verdicts() -> None:
    """Drop every remembered verdict and schedule: needed after changing a fusion policy at
    run time (``fusion.SMALL_GROUP``, say), since the remembered ones were judged under the
    old."""
    _VERDICTS.clear()
    forget_choices()


def _verdict(graph: Graph, node_names: list[str]) -> Verdict:
    refused = _templates_together(graph, node_names)
    if refused is not None:
        return Verdict(refused)
    key = schedule_key(graph, node_names)  # None for a node not in the graph: build_program says which
    choice = known_choice(graph, key)
    if choice is None:
        try:
            prog = build_program(graph, node_names)
            if len(prog.stmts) <= 1 or _complex_op_with_epilogue(prog):
                return Verdict(None)
            choice = select(prog, key)[-1]
        except FuseError as exc:
            return Verdict(str(exc).splitlines()[0])  # names a node: not shared between groups
    return Verdict(_reason(graph, node_names, choice), choice)


def _templates_together(graph: Graph, node_names: list[str]) -> str | None:
    """Why a group holding two ops that each run as a compute template (a conv, matmul or
    gemm; a max or average pool) is refused, or None. A group runs at most one template, so
    the others would become loop nests, several times slower: shufflenet's max pool fused
    with the average pool reading it ran in 2.0 ms as one loop nest, 0.23 ms as two pooling
    templates."""
    try:
        nodes = [n for n in in_graph_order(graph, node_names) if n.op in TEMPLATE_OPS]
    except KeyError:
        return None  # a name not in the graph: build_program reports it
    if len(nodes) < 2:
        return None
    a, b = nodes[:2]
    return (f"{a.name} ({a.op}) and {b.name} ({b.op}) each run as a compute template in a group of their own; "
            f"together one would be a loop nest, several times slower")


def _complex_op_with_epilogue(prog) -> bool:
    """One conv, matmul or gemm and an epilogue of it (:func:`.template.split_epilogue`):
    one loop nest by construction (every statement after the reduction reads and writes
    only its own output element), so no schedule search is needed to say so; compile
    schedules it only if it does not run as the CPU template (inception_v1: 48 conv + relu
    groups took 1.0 s of its 1.6 s of planning)."""
    complex_nodes = {s.node.name: s.node for s in prog.stmts if s.node.op in COMPLEX_OPS}
    # a prologue (bn + relu before the conv, recomputed in its reads) is no epilogue: searched
    return len(complex_nodes) == 1 and split_epilogue(prog, next(iter(complex_nodes.values()))) is not None


def _reason(graph: Graph, node_names: list[str], choice: ScheduleChoice) -> str | None:
    """None if the group compiles to one legal loop nest (as built, or else with its
    producers inlined: :func:`.schedule.select_program`), else why not: every fused
    schedule breaks a dependence, or its statements share no loop."""
    if choice.nests <= 1:
        return None
    nodes = in_graph_order(graph, node_names)
    ops = ", ".join(f"{n.name} ({n.op})" for n in nodes[:6]) + (" ..." if len(nodes) > 6 else "")
    if choice.violates:
        return f"no legal single loop nest for {ops}: every fused schedule violates a dependence"
    return f"no loop shared by all of {ops}: they would need separate loop nests"


__all__ = ["Verdict", "check_group", "forget_verdicts", "group_signature", "verdict"]
