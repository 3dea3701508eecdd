"""Each group structure is scheduled once per process: the feedback check and compile share
the schedule isl selected.

The partitioner's feedback (:mod:`.feedback`) asks whether a group fuses into one loop nest;
answering means selecting its schedule, a search over fused candidate trees with an isl
legality check for each. The selection is kept here as a :class:`.schedule.ScheduleChoice`,
keyed by the group's signature (:mod:`.signature`, no names: a repeated block shares it),
and compile replays it (:func:`.schedule.replay_program`: one candidate built and checked)
instead of searching again. :data:`SEARCHES` counts the searches per key, so tests can see
that each fused group was scheduled once.
"""

from __future__ import annotations

import weakref
from collections import Counter

from fusionlang.backend.poly import PolyProgram
from fusionlang.backend.schedule import (ScheduleChoice, Scheduled, finish_schedule, replay_program, schedule_program,
                                         select_program)
from fusionlang.backend.signature import group_signature
from fusionlang.instrument import timed
from fusionlang.ir.graph import Graph
from fusionlang.stages import CODEGEN
from fusionlang.ops.interpreter import registry_of

#: op registry -> (signature, target, fuse) -> the schedule selected for it
_CHOICES: "weakref.WeakKeyDictionary[object, dict]" = weakref.WeakKeyDictionary()
#: choices remembered per registry (the oldest are forgotten first)
CHOICE_LIMIT = 20000
#: (signature, target, fuse) -> schedule searches made for it (tests: one per fused group);
#: like the choices, at most CHOICE_LIMIT keys
SEARCHES: Counter = Counter()


def schedule_key(graph: Graph, names: list[str], constants: dict | None = None, target: str = "c",
                 fuse: bool = True) -> tuple | None:
    """The key a group's schedule is kept under (None for names not in ``graph``)."""
    try:
        return group_signature(graph, names, constants), target, fuse
    except KeyError:
        return None


def known_choice(graph: Graph, key: tuple | None) -> ScheduleChoice | None:
    return _CHOICES.get(registry_of(graph), {}).get(key) if key is not None else None


def select(prog: PolyProgram, key: tuple | None, target: str = "c", fuse: bool = True):
    """:func:`.schedule.select_program` on ``prog``, counted and kept under ``key``."""
    with timed(CODEGEN, "schedule: search", detail=f"{len(prog.stmts)} statements, target {target}"):
        selected = select_program(prog, target, fuse)
    if key not in SEARCHES and len(SEARCHES) >= CHOICE_LIMIT:
        del SEARCHES[next(iter(SEARCHES))]  # bounded like the choices: a long process forgets the oldest
    SEARCHES[key] += 1
    if key is not None:
        known = _CHOICES.setdefault(registry_of(prog.graph), {})
        if len(known) >= CHOICE_LIMIT:
            del known[next(iter(known))]
        known[key] = selected[-1]
    return selected


def scheduled_group(prog: PolyProgram, key: tuple | None, target: str = "c", fuse: bool = True) -> Scheduled:
    """``prog`` (a whole group, as built for compiling) scheduled: the kept choice replayed
    when there is one that replays, else selected now (and kept)."""
    if not prog.stmts:  # nothing to select
        return schedule_program(prog, target, fuse)
    choice = known_choice(prog.graph, key)
    replayed = None
    if choice is not None:
        with timed(CODEGEN, "schedule: replay", detail=f"{len(prog.stmts)} statements"):
            replayed = replay_program(prog, choice, target, fuse)
    if replayed is not None:
        scheduled_prog, tree, sched = replayed
        return finish_schedule(scheduled_prog, tree, sched, list(choice.rejected), choice)
    return finish_schedule(*select(prog, key, target, fuse))


def forget_choices() -> None:
    """Drop every kept schedule and the search counts."""
    _CHOICES.clear()
    SEARCHES.clear()


__all__ = ["CHOICE_LIMIT", "SEARCHES", "forget_choices", "known_choice", "schedule_key", "scheduled_group", "select"]
