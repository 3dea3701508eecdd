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

import numpy as np

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


def _place(order: list[Buffer], share: bool) -> int:
    """Give each buffer of ``order`` the lowest offset free of the bytes of the buffers
    placed before it whose lifetimes overlap its own (end to end without ``share``);
    returns the arena's size. The placed buffers are held in arrays: a Python scan of every
    placed buffer for each new one took 10.8 s for 5,000 buffers (a concat of 5,000 inputs)."""
    count = len(order)
    first = np.array([b.first for b in order], np.int64)
    last = np.array([b.last for b in order], np.int64)
    size = np.array([_align(max(b.nbytes, 1)) for b in order], np.int64)
    offset = np.zeros(count, np.int64)
    if not share:
        offset[1:] = np.cumsum(size)[:-1]
    by_offset = np.zeros(0, np.int64)  # the placed buffers, lowest offset first
    for k in range(count if share else 0):
        live = by_offset[(first[by_offset] <= last[k]) & (last[by_offset] >= first[k])]
        offset[k] = _first_fit(offset[live], offset[live] + size[live], size[k])
        by_offset = np.insert(by_offset, np.searchsorted(offset[by_offset], offset[k], side="right"), k)
    for b, at in zip(order, offset.tolist()):
        b.offset = at
    return int((offset + size).max()) if count else 0


def _first_fit(lo: np.ndarray, hi: np.ndarray, size: int) -> int:
    """The lowest offset at which ``size`` bytes miss every busy range [lo, hi), the ranges
    sorted by start: walking them, the candidate is the highest end seen so far (the first
    range that starts ``size`` bytes past it leaves the gap; among ranges of one start only
    the first can, so their order does not matter)."""
    if not len(lo):
        return 0
    candidate = np.concatenate(([0], np.maximum.accumulate(hi)[:-1]))
    fits = np.flatnonzero(candidate + size <= lo)
    return int(candidate[fits[0]]) if len(fits) else int(max(0, hi.max()))


def _note_sharing(placed: list[Buffer]) -> None:
    """Fill each buffer's ``shares_with``: the others placed on some of its bytes."""
    lo = np.array([b.offset for b in placed], np.int64)
    hi = lo + np.array([_align(max(b.nbytes, 1)) for b in placed], np.int64)
    names = [b.value for b in placed]
    by_start = np.argsort(lo, kind="stable")
    for k, b in enumerate(placed):
        # only buffers starting below this one's end can overlap it
        starts_below = by_start[:np.searchsorted(lo[by_start], hi[k], side="left")]
        overlap = starts_below[(hi[starts_below] > lo[k]) & (starts_below != k)]
        b.shares_with = sorted(names[j] for j in overlap.tolist())


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
    order = sorted(arena, key=lambda b: (-b.nbytes, b.first, b.value))
    top = _place(order, share)
    _note_sharing(order)
    for value, where in outermost.items():
        buffers[value].offset = buffers[where.root].offset + where.at
    return BufferPlan(buffers, top, unshared)


__all__ = ["Buffer", "BufferPlan", "plan_buffers"]
