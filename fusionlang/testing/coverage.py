"""Coverage of a rule's instances: which shape-relation classes were tried.

An instance's *class* is what distinguishes one shape situation from another for the
rule: the rank of every pattern variable, for every broadcasting node the way each
operand meets the result (``=`` the same shape, ``b`` a size-1 axis grown, ``-`` axes
it lacks, ``-b`` both), and for the ``dim(v, i)`` the guard names, which are 1 and which
pairs are equal. A per-row scale ``c[N, 1]`` against a product ``[M, N]`` (guard
``dim(c, 0) == dim(w, 1)``) is a different class when N == 1 than when N > 1, so
drawing goes on until both were tried.

The target is met when at least ``min_instances`` instances satisfied the guard and the
classes look exhausted: the Good-Turing estimate of the chance that the next instance
falls in a class not seen yet (classes seen once, over instances) is at most
``MISSING``. A rule that spends its budget of rounds (``ROUND_BUDGET``) first is
*under-covered*.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from fusionlang.ir.graph import Graph


def _broadcast_axes(operand: tuple[int, ...], result: tuple[int, ...]) -> str | None:
    """``=``/``b``/``-`` per result axis for an operand broadcast into ``result``; None
    when the operand does not broadcast into it (a matmul's operand, a reduction's)."""
    if len(operand) > len(result):
        return None
    padded = (None,) * (len(result) - len(operand)) + tuple(operand)
    marks = []
    for mine, theirs in zip(padded, result):
        if mine is None:
            marks.append("-")
        elif mine == theirs:
            marks.append("=")
        elif mine == 1:
            marks.append("b")
        else:
            return None
    return "".join(marks)


def _operand_case(axes: str) -> str:
    """``=`` same shape, ``b`` a size-1 axis grown, ``-`` axes missing, ``-b`` both."""
    case = ("-" if "-" in axes else "") + ("b" if "b" in axes else "")
    return case or "="


def broadcast_class(graph: Graph) -> tuple[str, ...]:
    """How each operand of each multi-input node meets its result: the same shape, a
    size-1 axis grown, axes missing, or both."""
    marks = []
    for node in graph.nodes:
        inputs = node.present_inputs()
        if len(inputs) < 2 or not node.outputs:
            continue
        result = graph.types[node.outputs[0]].shape
        axes = [_broadcast_axes(graph.types[v].shape, result) for v in inputs]
        if all(a is not None for a in axes):
            marks.append(node.op + ":" + ",".join(_operand_case(a) for a in axes if a is not None))
    return tuple(marks)


#: the largest estimated chance of an untried class at which coverage is complete
MISSING = 0.05

#: rounds of drawing a rewrite or decomposition may take toward the target before it is
#: under-covered (``check --budget``). Counted, never timed: a verdict must not depend on
#: the machine's speed or load.
ROUND_BUDGET = 12


def is_broadcast(cls: tuple) -> bool:
    return any("b" in m or "-" in m for m in cls[1])


@dataclass
class Coverage:
    """What a rule's drawing tried: counts, distinct shapes and classes, the seed."""

    seed: int
    drawn: int = 0
    satisfied: int = 0
    shapes: set = field(default_factory=set)
    #: class -> instances in it
    classes: Counter = field(default_factory=Counter)
    #: the target: at least this many instances satisfying the guard (and MISSING)
    min_instances: int = 0

    def add(self, shapes: tuple, ranks: tuple, broadcasts: tuple, dim_relations: tuple) -> bool:
        """Record one instance that satisfied the guard; True if its class is new."""
        self.satisfied += 1
        self.shapes.add(shapes)
        cls = (ranks, broadcasts, dim_relations)
        new = cls not in self.classes
        self.classes[cls] += 1
        return new

    @property
    def missing(self) -> float:
        """Good-Turing: the estimated chance that another instance is of an untried class."""
        if not self.satisfied:
            return 1.0
        return sum(1 for n in self.classes.values() if n == 1) / self.satisfied

    @property
    def saturated(self) -> bool:
        return self.satisfied > 0 and self.missing <= MISSING

    @property
    def reached(self) -> bool:
        return self.satisfied >= self.min_instances and self.saturated

    @property
    def rank_cases(self) -> int:
        return len({cls[0] for cls in self.classes})

    @property
    def broadcast_cases(self) -> int:
        return len({cls[1] for cls in self.classes if is_broadcast(cls)})

    def summary(self) -> str:
        text = (f"{self.drawn} drawn, {self.satisfied} matched the pattern and guard, {len(self.shapes)} distinct shapes, "
                f"{len(self.classes)} shape classes ({self.broadcast_cases} broadcasting, "
                f"{self.rank_cases} rank cases), seed {self.seed}")
        if not self.reached:
            missing = []
            if self.satisfied < self.min_instances:
                missing.append(f"{self.satisfied} of {self.min_instances} instances")
            if not self.saturated:
                missing.append(f"new shape classes still turning up (estimated {self.missing:.0%} of instances)")
            text += "; target not met: " + ", ".join(missing)
        return text

    def to_dict(self) -> dict:
        return {"seed": self.seed, "drawn": self.drawn, "satisfied": self.satisfied,
                "distinct_shapes": len(self.shapes), "shape_classes": len(self.classes),
                "broadcast_cases": self.broadcast_cases, "rank_cases": self.rank_cases,
                "min_instances": self.min_instances, "missing": round(self.missing, 4), "reached": self.reached}


__all__ = ["Coverage", "MISSING", "broadcast_class", "is_broadcast"]
