"""Apollo's upward feedback: can a set of nodes be fused into one loop nest?

The partitioner calls a :class:`FeedbackCheck` (a callback the API hands it) on every
candidate group; a group that does not fuse into one legal nest gets a one-line reason and
is split by the partitioner. So does a group holding two ops that each run as a compute
template (:data:`TEMPLATE_OPS`): it could be one nest, but a slow one (on the C target
an attention block, two matmuls around a softmax, is accepted when it runs as the
attention kernel of :mod:`.attention_template`). Only the polyhedral part runs here (statements, dependences, fused tree, legality): no AST, no code,
so it is cheap enough to call per merge.

Verdicts are values (:class:`Verdict`) holding the schedule selected for the group. One
FeedbackCheck serves one ``fuse`` call, for one target: it remembers its verdicts per graph
and node set (the partitioner asks again each round), and the schedules per *structure* of
the group in its :class:`.schedule_store.ScheduleStore` (keyed by
:func:`.signature.group_signature`), so the blocks a model repeats (ResNet-50's bottlenecks:
21 schedules for 50 questions) are scheduled once. :meth:`FeedbackCheck.schedules_for`
then gives the plan the schedule of each of its groups, and
:meth:`FeedbackCheck.template_schedules_for` those of the loop nests around a group's
compute template, which compile replays.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

from fusionlang.backend.attention_template import attention_applies
from fusionlang.backend.concat_inplace import may_run_in_place
from fusionlang.backend.poly import build_program
from fusionlang.backend.schedule import ScheduleChoice
from fusionlang.backend.schedule_store import ScheduleStore, schedule_key
from fusionlang.backend.signature import group_signature, in_graph_order
from fusionlang.backend.template import (COMPLEX_OPS, POOL_TAPS, PartSchedules, epilogue_split, part_schedules,
                                         plan_template, template_candidate)
from fusionlang.engine.plan import FusionPlan
from fusionlang.errors import FuseError
from fusionlang.ir.graph import Graph


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


@dataclass
class FeedbackCheck:
    """The backend's verdicts on groups for one fuse call and ``target``: called as
    ``check(graph, node_names)``, it returns None if the nodes fuse into one legal loop nest
    (and hold at most one compute template op), else a one-line reason. A graph asked about
    must not be edited in place afterwards (the engine asks about its own copies)."""

    target: str = "c"
    store: ScheduleStore = field(default_factory=ScheduleStore)
    #: graph -> node set -> verdict (weak: a graph the partitioner let go takes its verdicts along)
    _verdicts: "weakref.WeakKeyDictionary[Graph, dict]" = field(default_factory=weakref.WeakKeyDictionary)

    def __call__(self, graph: Graph, node_names: list[str]) -> str | None:
        return self.verdict(graph, node_names).reason

    def verdict(self, graph: Graph, node_names: list[str]) -> Verdict:
        """The answer with the schedule selected for the group."""
        memo = self._verdicts.setdefault(graph, {})
        key = frozenset(node_names)
        if key not in memo:
            memo[key] = self._verdict(graph, list(node_names))
        return memo[key]

    def _verdict(self, graph: Graph, node_names: list[str]) -> Verdict:
        if self.target == "c" and attention_applies(graph, node_names):
            return Verdict(None)  # both matmuls and the softmax are one direct kernel: no loop nest
        refused = _templates_together(graph, node_names)
        if refused is not None:
            return Verdict(refused)
        try:
            choice = self._schedule(graph, node_names, skip=_one_statement_or_epilogue)
        except FuseError as exc:
            return Verdict(str(exc).splitlines()[0])  # names a node: not shared between groups
        return Verdict(None) if choice is None else Verdict(_reason(graph, node_names, choice), choice)

    def _schedule(self, graph: Graph, node_names: list[str], skip=lambda prog: not prog.stmts
                  ) -> ScheduleChoice | None:
        """The schedule kept for a group of this structure, else one selected now (and kept);
        None for a program ``skip`` says needs none (by default one with no statement)."""
        key = schedule_key(graph, node_names, target=self.target)  # None for a node not in the graph
        choice = self.store.known(key)
        if choice is None:
            prog = build_program(graph, node_names)
            if skip(prog):
                return None
            choice = self.store.select(prog, key, self.target)[-1]
        return choice

    def schedules_for(self, plan: FusionPlan) -> dict[int, ScheduleChoice]:
        """Group id -> the schedule selected for it, for each kernel group of ``plan``
        (selected now where the partitioner never asked, or asked of one statement: a group
        it formed without a question, as one opened compound op). A group compile runs as
        a compute template, or a concat it runs in place, needs none."""
        schedules = {}
        for group in plan.groups:
            if group.kind != "kernel" or _templates_together(plan.graph, group.nodes) is not None \
                    or template_candidate(plan, group, self.target) is not None or may_run_in_place(plan, group):
                continue
            choice = self._schedule(plan.graph, group.nodes)
            if choice is not None:
                schedules[group.id] = choice
        return schedules

    def template_schedules_for(self, plan: FusionPlan) -> dict[int, dict[str, ScheduleChoice]]:
        """Group id -> part ("before", "after") -> the schedule selected for that part's
        loop nest, for each group of ``plan`` that runs as a compute template with loop
        nests around it: its parts planned as compile plans them, so compile replays
        their schedules too."""
        schedules = {}
        for group in plan.groups:
            if group.kind != "kernel" or self._one_template_call(plan.graph, group.nodes) \
                    or template_candidate(plan, group, self.target) is None:
                continue
            planned = plan_template(plan, group, plan.graph.constants, target=self.target,
                                    parts=PartSchedules(self.store))
            parts = part_schedules(planned) if planned is not None else {}
            if parts:
                schedules[group.id] = parts
        return schedules

    def _one_template_call(self, graph: Graph, node_names: list[str]) -> bool:
        """Whether the check found the nodes to be a compute template op and its epilogue
        (fused, with no schedule to select: :func:`_complex_op_with_epilogue`), so nothing
        around the template call is a loop nest. Planning every templated group again to
        find out took 0.36 s of a 0.9 s fuse of 12 conv blocks (0.04 s with this check)."""
        verdict = self._verdicts.get(graph, {}).get(frozenset(node_names))
        return verdict is not None and verdict.reason is None and verdict.schedule is None


def check_group(graph: Graph, node_names: list[str], target: str = "c") -> str | None:
    """One question to a fresh :class:`FeedbackCheck`: None if the nodes fuse into one
    legal loop nest for ``target``, else a one-line reason."""
    return FeedbackCheck(target)(graph, node_names)


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


def _one_statement_or_epilogue(prog) -> bool:
    """Whether a verdict needs no schedule search: a program of at most one statement is
    one loop nest, and so is :func:`_complex_op_with_epilogue`."""
    return len(prog.stmts) <= 1 or _complex_op_with_epilogue(prog)


def _complex_op_with_epilogue(prog) -> bool:
    """One conv, matmul or gemm and an epilogue of it (:func:`.template.epilogue_split`):
    one loop nest by construction (every statement after the reduction reads and writes
    only its own output element), so no schedule search is needed to say so; compile
    schedules it only if it does not run as the CPU template (inception_v1: 48 conv + relu
    groups took 1.0 s of its 1.6 s of planning)."""
    complex_nodes = {s.node.name: s.node for s in prog.stmts if s.node.op in COMPLEX_OPS}
    # a prologue (bn + relu before the conv, recomputed in its reads) is no epilogue: searched
    return len(complex_nodes) == 1 and not isinstance(epilogue_split(prog, next(iter(complex_nodes.values()))), str)


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


__all__ = ["FeedbackCheck", "TEMPLATE_OPS", "Verdict", "check_group", "group_signature"]
