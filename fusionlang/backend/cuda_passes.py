"""The CUDA-only codegen decisions, as passes over a planned group's loop IR: how it splits
into units (one kernel each), which arrays several units share through the scratch area,
how each unit's outer points map to the GPU (a thread, a warp or a block per point) and
which of a thread-mapped unit's rows move as float4. :mod:`.emit_cuda` prints what they
decide.

A unit is the outer band (perfectly nested parallel loops with constant bounds) and what
runs inside one of its points. With an outer band the whole group is one unit; without
one, each top-level nest is its own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import cast

import sympy as sp

from fusionlang.backend.codegen_passes import itemsize
from fusionlang.backend.loopir import Assign, For, If, Storage, walk
from fusionlang.backend.lower import LoweredGroup, declaration_sites

BLOCK = 256
#: warps per block; in warp mode each is one outer point's team
WARPS = BLOCK // 32
#: shared memory a kernel may use for per-point buffers (the reduction scratch is apart)
SHARED_LIMIT = 40 * 1024
#: elementwise (thread-mapped) units of at least VECTOR_MIN_POINTS points run VECTOR
#: innermost neighbours per thread, so their float loads and stores are 16 bytes wide
VECTOR, VECTOR_MIN_POINTS = 4, 1 << 16
#: a unit with cooperative loops and at most this many statement instances per outer point
#: (rows of up to ~512 elements) runs a warp per point; longer ones a block per point
WARP_WORK = 2048
#: largest per-thread buffer kept in (local) memory
THREAD_BUFFER_LIMIT = 256


@dataclass
class Unit:
    outer: list[For]
    inner: list


@dataclass(frozen=True)
class UnitFacts:
    """What a unit's printing needs to know before it picks a mode: its outer loops' (first
    value, trips) and trips, its point count, the arrays declared per point and at kernel
    scope, and those shared with other units through the scratch area."""

    bounds: list[tuple[int, int]]
    extents: list[int]
    npoints: int
    level_arrays: list[Storage]
    tops: list[Storage]
    cross: list[Storage]


def _bounds(f: For) -> tuple[int, int] | None:
    """(first value, trip count) of a loop with constant bounds."""
    if not isinstance(f.init, sp.Integer) or f.step <= 0:
        return None
    cond = f.cond
    if isinstance(cond, (sp.Le, sp.Lt)) and cond.args[0] == f.var and isinstance(cond.args[1], sp.Integer):
        last = int(cond.args[1]) - (1 if isinstance(cond, sp.Lt) else 0)
        trips = max(0, (last - int(f.init)) // f.step + 1)
        return int(f.init), trips
    return None


def split_units(group: LoweredGroup) -> list[Unit]:
    loops = group.loops

    def chain(n):
        outer = []
        node = [n]
        while len(node) == 1 and isinstance(node[0], For) and node[0].loop is not None \
                and loops[node[0].loop].coincident and _bounds(node[0]) is not None:
            outer.append(node[0])
            node = node[0].body
        return outer, node

    body = group.body
    if len(body) == 1 and isinstance(body[0], For):
        outer, inner = chain(body[0])
        if outer and all(loops[f.loop].level == "outer" for f in outer):
            return [Unit(outer, inner)]
    if group.nests == 1 and group.scheduled.tree.outer_depth == 0:
        return [Unit([], body)]  # small enough for one block
    units: list[Unit] = []
    pending: list = []
    for n in body:
        if isinstance(n, For):
            if pending:
                units.append(Unit([], pending))
                pending = []
            outer, inner = chain(n)
            units.append(Unit(outer, inner) if outer else Unit([], [n]))
        else:
            pending.append(n)
    if pending:
        units.append(Unit([], pending))
    return units


def _trips(f: For) -> int:
    b = _bounds(f)
    return b[1] if b else 64


def _work(nodes: list, scale: int = 1) -> int:
    total = 0
    for n in nodes:
        if isinstance(n, Assign):
            total += scale
        elif isinstance(n, For):
            total += _work(n.body, scale * _trips(n))
        elif isinstance(n, If):
            total += max(_work(n.then, scale), _work(n.orelse, scale))
    return total


@dataclass(frozen=True)
class VectorAccesses:
    """The rows a thread-mapped unit moves as float4: id(load) -> (array id, offset), and
    array id -> offset of its one store (see :func:`vector_accesses`)."""

    loads: dict
    stores: dict


@dataclass(frozen=True)
class UnitPlan:
    """How a unit runs: ``mode`` "thread" (a thread per outer point: elementwise chains),
    "warp" (a warp per point: short rows, reduced by shuffles alone; the printer falls back
    to "block" when its buffers do not fit a warp's share of shared memory) or "block" (a
    block per point: long rows, reduced through shared memory); ``vector``: its float4 rows."""

    mode: str
    vector: VectorAccesses | None = None
    #: block or warp mode: the point's buffers kept in shared memory (array ids); its other
    #: buffers live in the scratch area
    shared: frozenset[int] = frozenset()


def cross_arrays(group: LoweredGroup, units: list[Unit]) -> tuple[dict[int, int], int]:
    """Kernel-scope arrays several units touch (a global sum read by the next kernel), by
    array id -> offset in the scratch area, and the bytes they take."""
    top, _ = declaration_sites(group)
    users: dict[int, int] = {}
    for u in units:
        ids = {id(n) for n in walk(u.inner) if isinstance(n, Assign)}
        for st in top:
            if accessed_in(group, st, ids):
                users[st.array.id] = users.get(st.array.id, 0) + 1
    offsets, offset = {}, 0
    for st in top:
        if users.get(st.array.id, 0) > 1:
            offsets[st.array.id] = offset
            offset += (st.size * itemsize(st.array.dtype) + 15) // 16 * 16
    return offsets, offset


def unit_facts(group: LoweredGroup, u: Unit, cross: dict[int, int]) -> UnitFacts:
    top, inner = declaration_sites(group)
    bounds = [cast(tuple[int, int], _bounds(f)) for f in u.outer]  # constant: see split_units
    extents = [b[1] for b in bounds]
    npoints = 1
    for e in extents:
        npoints *= e
    # arrays declared at the top of the innermost outer loop, or at kernel scope
    level_arrays = [st for f in u.outer for st in inner.get(id(f), [])]
    unit_nodes = {id(n) for n in walk(u.inner)}
    tops = [st for st in top if accessed_in(group, st, unit_nodes)]
    # arrays shared with other units (kernels) live in the scratch area between launches
    shared = [st for st in tops if st.array.id in cross]
    tops = [st for st in tops if st.array.id not in cross]
    return UnitFacts(bounds, extents, npoints, level_arrays, tops, shared)


def plan_units(group: LoweredGroup, units: list[Unit], cross: dict[int, int]) -> list[tuple[UnitFacts, UnitPlan]]:
    """Each unit's facts and plan, in order; the loops a block or warp runs cooperatively
    are planned too (:func:`plan_block_loops`)."""
    planned = []
    for u in units:
        facts = unit_facts(group, u, cross)
        plan = plan_unit(group, u, facts)
        if plan.mode != "thread":  # (a thread runs its loops alone)
            plan = placed(plan, facts)
            plan_block_loops(group, u, facts)
        planned.append((facts, plan))
    return planned


def placed(plan: UnitPlan, facts: UnitFacts) -> UnitPlan:
    """``plan`` (block or warp mode) with its buffers placed: in shared memory while they
    fit, in order, the rest in the scratch area. A warp-mapped unit whose buffers do not all
    fit a warp's share of shared memory runs a block per point instead."""
    buffers = [st for st in facts.tops + facts.level_arrays if st.kind != "scalar"]
    if plan.mode == "warp":
        shared = place_buffers(buffers, SHARED_LIMIT // WARPS)
        if len(shared) == len(buffers):
            return replace(plan, shared=shared)
        plan = replace(plan, mode="block")
    return replace(plan, shared=place_buffers(buffers, SHARED_LIMIT))


def place_buffers(buffers: list[Storage], limit: int) -> frozenset[int]:
    """The ids of the buffers kept in ``limit`` bytes of shared memory, first come first placed."""
    shared, used = set(), 0
    for st in buffers:
        nbytes = st.size * itemsize(st.array.dtype)
        if used + nbytes <= limit:
            used += nbytes
            shared.add(st.array.id)
    return frozenset(shared)


def plan_unit(group: LoweredGroup, u: Unit, facts: UnitFacts) -> UnitPlan:
    """The mapping of ``u`` and, thread-mapped, its float4 rows."""
    mode = unit_mode(group, u, facts)
    if mode == "thread" and _vectorizable(u, facts.bounds, facts.npoints):
        return UnitPlan(mode, vector_accesses(group, u, u.outer[-1]))
    return UnitPlan(mode)


def plan_block_loops(group: LoweredGroup, u: Unit, facts: UnitFacts) -> None:
    """Record how the threads of a point's team run each loop at the unit's level (the
    loops a block- or warp-mapped unit prints cooperatively; ``For.plan.threads``): a
    parallel loop writing none of the point's scalars is shared; a loop that only
    accumulates into the point's scalars reduces per-thread partials; any other runs on
    thread 0, which broadcasts the scalars it wrote."""
    level = {st.array.id for st in facts.level_arrays + facts.tops + facts.cross}
    scalars = {aid for aid in level if group.storage[aid].kind == "scalar"}
    for f in block_nodes(u.inner):
        if isinstance(f, For):
            threads, shared = _cooperation(group, f, scalars)
            f.plan = replace(f.plan, threads=threads, block_scalars=shared)


def _cooperation(group: LoweredGroup, f: For, scalars: set[int]) -> tuple[str, tuple[int, ...]]:
    loop = group.loops.get(f.loop) if f.loop is not None else None
    written = {n.array.id for n in walk(f.body) if isinstance(n, Assign) and n.array.id in scalars}
    if loop is not None and loop.coincident and not written:
        return "split", ()
    accs = set(loop.simd_accs) if loop is not None else set()
    if accs and written <= accs and accs <= scalars:
        return "reduce", tuple(sorted(accs))
    return "one", tuple(sorted(written))


def unit_mode(group: LoweredGroup, u: Unit, facts: UnitFacts) -> str:
    coop = any(isinstance(n, For) and n.loop is not None and
               (group.loops[n.loop].coincident or group.loops[n.loop].simd_accs)
               for n in block_nodes(u.inner))
    buffers = facts.level_arrays + facts.tops
    big_buffers = any(st.kind == "local" and st.size > THREAD_BUFFER_LIMIT for st in buffers)
    work = _work(u.inner)
    if not u.outer:
        return "block"
    if coop and work <= WARP_WORK and not facts.cross:
        return "warp"
    return "block" if (coop and (facts.npoints < 8192 or work >= 4096)) or big_buffers else "thread"


def accessed_in(group: LoweredGroup, st: Storage, node_ids: set) -> bool:
    return any(isinstance(n, Assign) and id(n) in node_ids and
               (n.array.id == st.array.id or any(ld.array.id == st.array.id for ld in n.loads.values()))
               for n in walk(group.body))


def block_nodes(nodes):
    """``nodes`` and those under their ifs (not inside their loops)."""
    for n in nodes:
        yield n
        if isinstance(n, If):
            yield from block_nodes(n.then)
            yield from block_nodes(n.orelse)


def vector_accesses(group: LoweredGroup, u: Unit, last: For) -> VectorAccesses:
    """The float32 parameter rows the unit's top-level statements read or write at unit
    stride along ``last`` from a multiple of VECTOR. A row the unit also writes is not
    preloaded, and a stored row is neither read in the unit nor stored twice per point."""
    params = {a.id for a in group.params if a.dtype == "float32"}
    assigns = [n for n in walk(u.inner) if isinstance(n, Assign)]
    written = [n.array.id for n in assigns]
    read = {ld.array.id for n in assigns for ld in n.loads.values()}
    top = [n for n in u.inner if isinstance(n, Assign)]
    loads = {}
    for a in top:
        for ld in a.loads.values():
            offset = _aligned_row(group, ld.array, ld.index, last)
            if ld.array.id in params and ld.array.id not in written and not ld.guard and ld.cond is None \
                    and offset is not None:
                loads[id(ld)] = (ld.array.id, offset)
    stores = {}
    for a in top:
        offset = _aligned_row(group, a.array, a.index, last)
        if a.array.id in params and a.reduce is None and written.count(a.array.id) == 1 \
                and a.array.id not in read and offset is not None:
            stores[a.array.id] = offset
    return VectorAccesses(loads, stores)


def _aligned_row(group: LoweredGroup, array, index, last: For) -> sp.Expr | None:
    """The element offset of ``index`` when it is c + (multiples of VECTOR) with c the
    innermost outer variable (so VECTOR neighbours are one aligned float4), else None."""
    st = group.storage[array.id]
    if st.kind != "global":
        return None
    offset = sp.expand(st.offset(index))
    terms = offset.as_coefficients_dict()
    if terms.get(last.var) != 1 or last.step != 1:
        return None
    for term, coeff in terms.items():
        if term == last.var:
            continue
        if not (term == 1 or isinstance(term, sp.Symbol)) or coeff % VECTOR != 0:
            return None
    return offset


def _vectorizable(u: Unit, bounds: list[tuple[int, int]], npoints: int) -> bool:
    """A thread-mapped unit large enough to keep the GPU busy with a quarter of the threads,
    whose innermost loop runs by 1 from a multiple of :data:`VECTOR` over groups of VECTOR
    (so each group's first element is as aligned as the row it starts)."""
    if not u.outer or npoints < VECTOR_MIN_POINTS:
        return False
    first, trips = bounds[-1]
    return u.outer[-1].step == 1 and first % VECTOR == 0 and trips % VECTOR == 0


__all__ = ["BLOCK", "SHARED_LIMIT", "THREAD_BUFFER_LIMIT", "VECTOR", "WARPS", "Unit", "UnitFacts", "UnitPlan", "VectorAccesses", "cross_arrays",
           "plan_block_loops", "plan_unit", "place_buffers", "placed", "plan_units", "split_units", "unit_facts", "unit_mode", "vector_accesses"]
