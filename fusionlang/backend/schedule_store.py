"""The schedules one fuse-and-compile selected, each group structure searched once.

The partitioner's feedback (:mod:`.feedback`) asks whether a group fuses into one loop nest;
answering means selecting its schedule, a search over fused candidate trees with an isl
legality check for each. The selection is kept as a :class:`.schedule.ScheduleChoice`
keyed by the group's signature (:mod:`.signature`, no names: a repeated block shares it),
the target and whether loops fuse, and compile replays it (:func:`.schedule.replay_program`:
one candidate built and checked) instead of searching again.

A :class:`ScheduleStore` belongs to one call: ``fusionlang.fuse`` makes one for its
feedback check, the plan it returns carries the choices for its groups
(``FusionPlan.schedules``), and ``compile`` seeds its own store from them. Nothing is kept
between calls, so what one plan decided cannot leak into another's compile.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from fusionlang.backend.poly import PolyProgram
from fusionlang.backend.schedule import (ScheduleChoice, Scheduled, finish_schedule, replay_program, schedule_program,
                                         select_program)
from fusionlang.backend.signature import group_signature
from fusionlang.instrument import timed
from fusionlang.ir.graph import Graph
from fusionlang.stages import CODEGEN


def schedule_target(target: str) -> str:
    """The target a schedule is selected for: "c", or "cuda" for the GPU and its emulator."""
    return "c" if target == "c" else "cuda"


def schedule_key(graph: Graph, names: list[str], constants: dict | None = None, target: str = "c",
                 fuse: bool = True) -> tuple | None:
    """The key a group's schedule is kept under (None for names not in ``graph``)."""
    try:
        return group_signature(graph, names, constants), target, fuse
    except KeyError:
        return None


@dataclass
class ScheduleStore:
    """Schedule choices by :func:`schedule_key`, and the searches made for each key (tests:
    one per group structure)."""

    choices: dict[tuple, ScheduleChoice] = field(default_factory=dict)
    searches: Counter = field(default_factory=Counter)

    def known(self, key: tuple | None) -> ScheduleChoice | None:
        return self.choices.get(key) if key is not None else None

    def keep(self, key: tuple | None, choice: ScheduleChoice) -> None:
        if key is not None:
            self.choices[key] = choice

    def select(self, prog: PolyProgram, key: tuple | None, target: str = "c", fuse: bool = True):
        """:func:`.schedule.select_program` on ``prog``, counted and kept under ``key``."""
        with timed(CODEGEN, "schedule: search", detail=f"{len(prog.stmts)} statements, target {target}"):
            selected = select_program(prog, target, fuse)
        self.searches[key] += 1
        self.keep(key, selected[-1])
        return selected

    def scheduled(self, prog: PolyProgram, key: tuple | None, target: str = "c", fuse: bool = True,
                  planned: ScheduleChoice | None = None) -> Scheduled:
        """``prog`` (a whole group, as built for compiling) scheduled: the ``planned``
        choice (the plan's, for this group) or the kept one replayed when it replays, else
        one selected now (and kept)."""
        if not prog.stmts:  # nothing to select
            return schedule_program(prog, target, fuse)
        choice = planned or self.known(key)
        replayed = None
        if choice is not None:
            with timed(CODEGEN, "schedule: replay", detail=f"{len(prog.stmts)} statements"):
                replayed = replay_program(prog, choice, target, fuse)
        if replayed is not None and choice is not None:
            scheduled_prog, tree, sched = replayed
            return finish_schedule(scheduled_prog, tree, sched, list(choice.rejected), choice)
        return finish_schedule(*self.select(prog, key, target, fuse))

    @property
    def search_count(self) -> int:
        return sum(self.searches.values())


__all__ = ["ScheduleStore", "schedule_key", "schedule_target"]
