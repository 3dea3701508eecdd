"""Buffers of a compiled graph: which values get memory, and which can share it.

Only values that cross group boundaries get a buffer; intermediates that fusion removed
live in registers or kernel-local buffers and are never allocated. Graph inputs are read in
place, constants are uploaded once, a view group's outputs alias their input's storage.
Every other buffer is placed in one arena: a buffer's lifetime runs from the group that
writes it to the last group that reads it (graph outputs live to the end), and buffers
whose lifetimes do not overlap may take the same bytes (greedy placement, largest first).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from fusionlang.backend.concat_inplace import Placement, resolve
from fusionlang.engine.plan import FusionPlan

ALIGN = 64


@dataclass
class Buffer:
    value: str
    nbytes: int
    #: "arena" (offset below), "input" (a feed), "const" (uploaded constant), "alias" (of ``root``)
    kind: str
    offset: int = -1
    first: int = -1
    last: int = -1
    root: str | None = None
    #: arena buffers placed on some of the same bytes (lifetimes disjoint)
    shares_with: list[str] = field(default_factory=list)
    #: the concat output whose bytes hold this arena buffer (see :mod:`.concat_inplace`)
    inside: str | None = None

    def to_dict(self) -> dict:
        return {"value": self.value, "nbytes": self.nbytes, "kind": self.kind, "offset": self.offset,
                "first": self.first, "last": self.last, "root": self.root, "shares_with": self.shares_with,
                "inside": self.inside}


@dataclass
class BufferPlan:
    buffers: dict[str, Buffer]
    arena_bytes: int
    #: bytes the arena buffers would take without sharing
    unshared_bytes: int

    @property
    def sharing(self) -> int:
        """How many arena buffers reuse bytes of another buffer."""
        return sum(1 for b in self.buffers.values() if b.shares_with)

    def root(self, value: str) -> str:
        b = self.buffers[value]
        while b.kind == "alias":
            b = self.buffers[cast(str, b.root)]  # an alias names its root
        return b.value

    def summary(self) -> str:
        n = sum(1 for b in self.buffers.values() if b.kind == "arena")
        return (f"{n} arena buffers in {self.arena_bytes / 2**20:.2f} MiB "
                f"(unshared {self.unshared_bytes / 2**20:.2f} MiB), {self.sharing} share storage")

    def to_dict(self) -> dict:
        return {"arena_bytes": self.arena_bytes, "unshared_bytes": self.unshared_bytes,
                "buffers": [b.to_dict() for b in self.buffers.values()]}


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _stored_root(value: str, aliases: dict[str, str], buffers: dict[str, Buffer]) -> str:
    """The nearest value ``value`` re-labels that has a buffer: a view group's inner views
    (transpose then flatten, say) are no group's output, so they get none."""
    root = aliases[value]
    while root not in buffers and root in aliases:
        root = aliases[root]
    return root


def plan_buffers(plan: FusionPlan, constants: dict, aliases: dict[str, str], *, share: bool = True,
                 scratch: dict[int, tuple[str, ...]] | None = None,
                 placements: dict[str, Placement] | None = None) -> BufferPlan:
    """Place every group-boundary value.

    ``constants``: value -> array known at compile time (graph constants, folded groups).
    ``aliases``: value -> value whose storage it re-labels (view groups).
    ``scratch``: group id -> values inside that group that still go through memory (a
    group run in parts, see :mod:`.template`); each lives while its group runs.
    ``placements``: value -> where it lies inside a concat output run in place (see
    :mod:`.concat_inplace`); the outermost concat output lives as long as anything inside it.
    """
    graph = plan.graph
    buffers: dict[str, Buffer] = {}
    for name in graph.inputs:
        buffers[name] = Buffer(name, graph.types[name].nbytes, "input")
    for name in constants:
        buffers[name] = Buffer(name, graph.types[name].nbytes, "const")
    position = {g.id: k for k, g in enumerate(plan.groups)}
    end = len(plan.groups)
    for g in plan.groups:
        for value in g.outputs:
            if value in buffers:
                continue
            if value in aliases:
                buffers[value] = Buffer(value, graph.types[value].nbytes, "alias",
                                        root=_stored_root(value, aliases, buffers))
            else:
                buffers[value] = Buffer(value, graph.types[value].nbytes, "arena", first=position[g.id],
                                        last=position[g.id])
    for gid, values in (scratch or {}).items():
        for value in values:
            if value not in buffers:
                buffers[value] = Buffer(value, graph.types[value].nbytes, "arena", first=position[gid],
                                        last=position[gid])
    # lifetimes: the last group reading a value (or its aliases)
    for g in plan.groups:
        for value in g.inputs:
            if value in buffers:
                b = buffers[value]
                while b.kind == "alias":
                    b = buffers[cast(str, b.root)]
                b.last = max(b.last, position[g.id])
    for value in graph.outputs:
        if value in buffers:
            b = buffers[value]
            while b.kind == "alias":
                b = buffers[cast(str, b.root)]
            b.last = end
    # where each placed value lies in its outermost concat output (a chain resolved once)
    in_concats = placements or {}
    outermost = {value: resolve(in_concats, value) for value in in_concats}
    for value, where in outermost.items():
        b = buffers[value]
        b.inside = where.root
        outer = buffers[b.inside]
        outer.first, outer.last = min(outer.first, b.first), max(outer.last, b.last)
    arena = [b for b in buffers.values() if b.kind == "arena" and b.inside is None]
    unshared = sum(_align(max(b.nbytes, 1)) for b in arena)
    placed: list[Buffer] = []
    top = 0
    for b in sorted(arena, key=lambda b: (-b.nbytes, b.first, b.value)):
        size = _align(max(b.nbytes, 1))
        if not share:
            b.offset = top
            top += size
            placed.append(b)
            continue
        busy = sorted((p.offset, p.offset + _align(max(p.nbytes, 1))) for p in placed
                      if not (p.last < b.first or b.last < p.first))
        offset = 0
        for lo, hi in busy:
            if offset + size <= lo:
                break
            offset = max(offset, hi)
        b.offset = offset
        top = max(top, offset + size)
        placed.append(b)
    for b in placed:
        lo, hi = b.offset, b.offset + _align(max(b.nbytes, 1))
        b.shares_with = sorted(p.value for p in placed
                               if p is not b and p.offset < hi and lo < p.offset + _align(max(p.nbytes, 1)))
    for value, where in outermost.items():
        buffers[value].offset = buffers[where.root].offset + where.at
    return BufferPlan(buffers, top, unshared)


__all__ = ["Buffer", "BufferPlan", "plan_buffers"]
