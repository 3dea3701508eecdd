"""Which loops the statements of a group share: the fused schedule tree, built by hand.

isl's own scheduler is unpredictable on these groups (on Apollo's bias + pool example it
searches for seconds and returns a skewed nest), so the tree is built from the access
specs and isl only *checks* it (``deps ⊆ lex_lt``, see :mod:`.schedule`).

The tree has two levels:

* the **outer band**: loops every statement shares. Its dimensions are equivalence classes
  of statement dimensions linked by identity accesses (``y[i0, i1]`` written where the
  reader reads ``y[i0, i1]``), taken in the order of the group's largest statement and
  stopping at the first dimension some statement lacks. Every outer loop is parallel.
* below it, a **sequence** of statements in dataflow order, where consecutive statements
  whose remaining dimensions line up are *clustered* under shared inner loops: by identity
  (softmax's ``sub, exp, reduce_sum`` over a row) or *shifted* (Apollo: a window reduction
  placed at the point where the element it reads is produced, ``PU[oh, r] at 2*oh + r``).

Target policy: on the CPU a contraction-like reduction (conv, matmul) whose last output
dimension gives better strides than its reduction dimensions gets that dimension moved
inside the reduction loops (``for ic, kh, kw: for ow: acc[ow] += x*w``), which makes the
inner loop vectorizable and hoists the weight read; on the GPU every output point stays in
the outer band (one thread per output point).

When a candidate tree is illegal, less fused ones are tried: without shifted placements,
then with fewer outer loops, down to one loop nest per statement (always legal).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from fusionlang.backend.poly import NotAffine, PolyProgram, PolyStmt, isl_expr
from fusionlang.ops.access import as_expr

#: a moved inner dimension must give at least this many iterations of work per pass
_TRIP_CAP = 16
#: a group without a shared outer loop still counts as one nest when it is this small:
#: one GPU block runs it whole (a softmax over a single row, say)
SMALL_GROUP = 1 << 16


@dataclass
class Loop:
    """One schedule dimension (a band member): its expression in each statement's dims."""

    id: int
    exprs: dict[str, sp.Expr]
    level: str  # "outer" | "cluster" | "inner"
    coincident: bool = False
    #: accumulators whose update is the only thing this loop carries (SIMD reduction)
    simd_accs: tuple = ()


@dataclass
class TBand:
    loop: Loop
    child: "TNode"


@dataclass
class TSeq:
    children: list


@dataclass
class TLeaf:
    stmts: list[str]


TNode = TBand | TSeq | TLeaf


def tree_stmts(node) -> list[str]:
    if isinstance(node, TLeaf):
        return list(node.stmts)
    if isinstance(node, TBand):
        return tree_stmts(node.child)
    return [s for c in node.children for s in tree_stmts(c)]


@dataclass
class FusedTree:
    root: object
    loops: dict[int, Loop]
    paths: dict[str, list[tuple[int, sp.Expr]]]
    nests: int
    strategy: str
    outer_depth: int = 0
    shifted: bool = False


class _UnionFind:
    def __init__(self):
        self.parent: dict = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb


def dimension_classes(prog: PolyProgram) -> _UnionFind:
    """Link (statement, dim) pairs that an identity access ties together."""
    uf = _UnionFind()
    writers: dict[int, list[PolyStmt]] = {}
    for s in prog.stmts:
        writers.setdefault(s.write.array.id, []).append(s)
    for ws in writers.values():
        # statements writing parts of one array (concat) share its other dimensions
        for w in ws[1:]:
            for j, (p, q) in enumerate(zip(ws[0].write.index, w.write.index)):
                if (isinstance(p, sp.Symbol) and isinstance(q, sp.Symbol) and p in ws[0].dims and q in w.dims
                        and ws[0].extent_of(p) == w.extent_of(q)):
                    uf.union((ws[0].name, p.name), (w.name, q.name))
    for s in prog.stmts:
        for a in s.reads:
            if a.array.role == "input":
                continue
            for w in writers.get(a.array.id, []):
                for j, (g, wj) in enumerate(zip(a.index, w.write.index)):
                    if (isinstance(g, sp.Symbol) and isinstance(wj, sp.Symbol) and g in s.dims and wj in w.dims
                            and s.extent_of(g) == w.extent_of(wj) == a.array.shape[j]):
                        uf.union((s.name, g.name), (w.name, wj.name))
    return uf


# ----- CPU locality: which output dimension moves inside a reduction ----------------------


def _linear(a, stmt: PolyStmt) -> sp.Expr:
    strides, step = [], 1
    for n in reversed(a.array.shape):
        strides.append(step)
        step *= n
    strides.reverse()
    expr = sp.Integer(0)
    for e, st in zip(a.index, strides):
        expr += as_expr(e) * st
    return sp.expand(expr)


def _stride_score(a, stmt: PolyStmt, dim: sp.Symbol) -> int:
    lin = _linear(a, stmt)
    if lin.has(sp.floor, sp.Mod, sp.Min, sp.Max, sp.ceiling):
        return 0
    try:
        coeff = sp.diff(lin, dim)
    except (TypeError, ValueError):
        return 0
    if not coeff.is_Integer:
        return 0
    c = abs(int(coeff))
    return 2 if c <= 1 else (1 if c <= 4 else 0)


def moved_dims(prog: PolyProgram, windows: bool = False) -> dict[str, sp.Symbol]:
    """update statement -> output dim to iterate inside its reduction loops (CPU).
    ``windows``: also a sum that is not a contraction (see below). A nest of its own and a
    fused tree of one op's statements take it; a tree of several ops does not: there the
    moved dim leaves the band they share, which costs more (LRN after a max pool: two
    shared loops become one)."""
    moved = {}
    for s in prog.stmts:
        if s.kind != "update":
            continue
        rdims = [d for d, n in zip(s.red_dims, s.red_extents) if n > 1]
        rreads = [a for a in s.reads if a.array.role != "acc" and not a.is_indirect()
                  and any(as_expr(e).has(*rdims) for e in a.index)] if rdims else []
        volume = 1
        for n in s.red_extents:
            volume *= n
        odims = [(d, n) for d, n in zip(s.out_dims, s.out_extents) if n > 1]
        if not rreads or not odims:
            continue
        q, qn = odims[-1]
        if len(rreads) < 2 or volume < 16:
            if not windows:
                continue
            # not a contraction: a window or strided sum (LRN's 5 channels) moves its
            # contiguous output dim inside only when no read is contiguous along the
            # reduction, so the inner loop becomes a vector loop it could not be
            # (zfnet512's first LRN: 109-wide rows inside its 5 taps)
            if all(_stride_score(a, s, q) == 2 and all(_stride_score(a, s, d) == 0 for d in rdims)
                   for a in rreads):
                moved[s.name] = q
            continue
        rl = rdims[-1]
        rn = s.extent_of(rl)

        def eff(dim, n):
            return sum(_stride_score(a, s, dim) for a in rreads) * min(n, _TRIP_CAP)

        if eff(q, qn) > eff(rl, rn):
            moved[s.name] = q
    return moved


# ----- the tree ------------------------------------------------------------------------


class _TreeBuilder:
    def __init__(self, prog: PolyProgram, target: str, shift: bool):
        self.prog = prog
        self.target = target
        self.shift = shift
        self.uf = dimension_classes(prog)
        self.loops: dict[int, Loop] = {}
        self.paths: dict[str, list] = {s.name: [] for s in prog.stmts}
        self.used_shift = False

    def new_loop(self, exprs: dict[str, sp.Expr], level: str) -> Loop:
        loop = Loop(len(self.loops), exprs, level)
        self.loops[loop.id] = loop
        for name, e in exprs.items():
            self.paths[name].append((loop.id, e))
        return loop

    def cls(self, s: PolyStmt, d: sp.Symbol):
        return self.uf.find((s.name, d.name))

    # outer band
    def outer_classes(self, moved: dict[str, sp.Symbol], strict: bool = True) -> list:
        """Dimension classes every statement has exactly once, in the order of the largest
        statement's dims. ``strict``: stop at the first dim that is not such a class
        (keeps row-major order); else skip it."""
        stmts = self.prog.stmts
        candidates = [s for s in stmts if s.kind != "init"] or stmts
        if not candidates:
            return []
        position = {s.name: k for k, s in enumerate(stmts)}  # (stmts.index was quadratic in a concat's slices)
        anchor = max(candidates, key=lambda s: (s.volume, s.order, position[s.name]))
        blocked = {self.cls(self.prog.stmt(name), d) for name, d in moved.items()}
        classes = []
        for d, n in zip(anchor.out_dims, anchor.out_extents):
            if n == 1:
                continue
            c = self.cls(anchor, d)
            if c in blocked:
                break
            if all(sum(1 for e in s.out_dims if self.cls(s, e) == c) == 1 for s in stmts):
                classes.append(c)
            elif strict:
                break
        return classes

    def build(self, classes: list, moved: dict[str, sp.Symbol]):
        stmts = self.prog.stmts
        used: dict[str, set] = {s.name: set() for s in stmts}
        outer_loops = []
        for c in classes:
            exprs = {}
            for s in stmts:
                d = next(e for e in s.out_dims if self.cls(s, e) == c)
                exprs[s.name] = d
                used[s.name].add(d)
            outer_loops.append(self.new_loop(exprs, "outer"))

        def remaining(s: PolyStmt) -> list[sp.Symbol]:
            out = [d for d, n in zip(s.out_dims, s.out_extents) if n > 1 and d not in used[s.name]]
            red = [d for d, n in zip(s.red_dims, s.red_extents) if n > 1]
            m = moved.get(s.name)
            if m is not None and m in out:
                out.remove(m)
                return out + red + [m]
            return out + red

        order = [s for s in stmts if s.kind == "init"] + [s for s in stmts if s.kind != "init"]
        elements: list[PolyStmt | _Cluster] = []
        cluster = None
        for s in order:
            rem = remaining(s)
            if not rem:
                if cluster:
                    elements.append(cluster)
                cluster = None
                elements.append(s)
                continue
            if cluster is not None and cluster.try_add(s, rem):
                continue
            if cluster:
                elements.append(cluster)
            cluster = _Cluster(self, s, rem)
        if cluster:
            elements.append(cluster)

        children = [TLeaf([e.name]) if isinstance(e, PolyStmt) else e.tree() for e in elements]
        body = children[0] if len(children) == 1 else TSeq(children)
        for loop in reversed(outer_loops):
            body = TBand(loop, body)
        nests = 1 if outer_loops or self.small() else max(1, sum(1 for e in elements if isinstance(e, _Cluster)))
        return body, nests, len(outer_loops)

    def small(self) -> bool:
        total = 0
        for s in self.prog.stmts:
            n = s.volume
            for r in s.red_extents:
                n *= r
            total += n
        return total <= SMALL_GROUP

    def distributed(self, moved: dict[str, sp.Symbol] | None = None):
        children = []
        for s in self.prog.stmts:
            node = TLeaf([s.name])
            dims = [d for d, n in zip(s.dims, s.extents) if n > 1]
            m = (moved or {}).get(s.name)
            if m is not None and m in dims:  # its reduction loops around the moved dim
                dims = [d for d in dims if d != m] + [m]
            loops = [self.new_loop({s.name: d}, "cluster") for d in dims]
            for loop in reversed(loops):
                node = TBand(loop, node)
            children.append(node)
        root = children[0] if len(children) == 1 else TSeq(children)
        nests = max(1, sum(1 for c in children if isinstance(c, TBand)))
        return root, nests


class _Cluster:
    """Consecutive statements sharing inner loops (identity or shifted placement)."""

    def __init__(self, tb: _TreeBuilder, leader: PolyStmt, rem: list[sp.Symbol]):
        self.tb = tb
        self.dims = [(tb.cls(leader, d), leader.extent_of(d)) for d in rem]
        self.members: list[tuple[PolyStmt, list[sp.Expr], list[sp.Symbol]]] = []
        self.beta: dict[int, tuple] = {}
        self.written: set[int] = set()
        self._add(leader, list(rem), [])

    def _add(self, s: PolyStmt, placement, child):
        self.members.append((s, placement, child))
        self.written.add(s.write.array.id)
        if s.kind in ("compute", "final"):
            inverse = _invert_write(s)
            if inverse is not None:
                self.beta[s.write.array.id] = (inverse, placement)

    def placement_of(self, array_id: int, index) -> list[sp.Expr] | None:
        """Band coordinates at which element ``index`` of an array written here is produced."""
        if array_id not in self.beta:
            return None
        inverse, placement = self.beta[array_id]
        sub = {d: inv(index) for d, inv in inverse.items()}
        return [sp.expand(as_expr(p).xreplace(sub)) for p in placement]

    def try_add(self, s: PolyStmt, rem: list[sp.Symbol]) -> bool:
        tb = self.tb
        placement: list[sp.Symbol] | None = None
        picked = []
        for c, n in self.dims:
            found = [d for d in rem if tb.cls(s, d) == c and s.extent_of(d) == n]
            if len(found) != 1:
                break
            picked.append(found[0])
        else:
            placement = picked
        child = [d for d in rem if placement is None or d not in placement]
        local = [a for a in s.reads if a.array.id in self.written]
        if placement is None:
            if not tb.shift or not local:
                return False
            first = local[0]
            if first.is_indirect():
                return False
            placement = self.placement_of(first.array.id, first.index)
            if placement is None:
                return False
            names = {d.name for d in s.dims}
            try:
                for p in placement:
                    isl_expr(p, names)
            except NotAffine:
                return False
            bare = {p for p in placement if isinstance(p, sp.Symbol)}
            mentioned = set().union(*(as_expr(p).free_symbols for p in placement)) if placement else set()
            simple = all(len(as_expr(p).free_symbols & set(s.out_dims)) <= 1 for p in placement)
            if simple:
                child = [d for d in rem if d not in bare and (d in s.red_dims or d not in mentioned)]
            else:
                child = list(rem)
            tb.used_shift = True
        # every read of something produced in this cluster must be produced at this point
        for a in local:
            if a.is_indirect():
                return False
            where = self.placement_of(a.array.id, a.index)
            if where is None or any(sp.expand(w - p) != 0 for w, p in zip(where, placement)):
                return False
        self._add(s, placement, child)
        return True

    def tree(self):
        tb = self.tb
        loops = []
        for k in range(len(self.dims)):
            loops.append(tb.new_loop({s.name: pl[k] for s, pl, _ in self.members}, "cluster"))
        children = []
        for s, _, child in self.members:
            node = TLeaf([s.name])
            inner = [tb.new_loop({s.name: d}, "inner") for d in child]
            for loop in reversed(inner):
                node = TBand(loop, node)
            children.append(node)
        body = children[0] if len(children) == 1 else TSeq(children)
        for loop in reversed(loops):
            body = TBand(loop, body)
        return body


def _invert_write(s: PolyStmt):
    """dim -> (index -> expr) when the write index is ``dim + constant`` per component."""
    inverse = {}
    for j, w in enumerate(s.write.index):
        w = as_expr(w)
        syms = w.free_symbols
        if len(syms) != 1:
            if syms:
                return None
            continue
        (d,) = syms
        offset = sp.expand(w - d)
        if not offset.is_Integer or d in inverse:
            return None
        inverse[d] = (lambda index, j=j, off=offset: as_expr(index[j]) - off)
    if any(d not in inverse for d, n in zip(s.dims, s.extents) if n > 1):
        return None
    return {d: f for d, f in inverse.items()}


def candidate_trees(prog: PolyProgram, target: str = "c", fuse: bool = True, legal=None):
    """Fused schedule trees from most to least fused; the last is always legal.

    Outer bands tried: the row-major prefix of shared dimensions and its shorter
    prefixes; then (with ``legal``, a tree -> bool check) the shared dimensions in any
    position that keep the schedule legal, added greedily; then none.
    """
    windowed = None  # moved_dims with window sums, asked once
    if fuse and prog.stmts:
        # one op's statements (LRN's init, taps, finalize) lose no shared loop to another op
        # when a window sum's row moves inside its taps
        one_op = len({s.node.name for s in prog.stmts}) == 1
        if target != "c":
            moved = {}
        elif one_op:
            moved = windowed = moved_dims(prog, windows=True)
        else:
            moved = moved_dims(prog)
        probe = _TreeBuilder(prog, target, True)
        strict = probe.outer_classes(moved, strict=True)
        loose = probe.outer_classes(moved, strict=False)
        # on the GPU a shifted band serializes the block's threads: identity fusion only
        shifts = (True, False) if target == "c" else (False,)
        seen = set()

        def trees(classes):
            for shift in shifts:
                tb = _TreeBuilder(prog, target, shift)
                root, nests, depth_used = tb.build(classes, moved)
                key = repr(root)
                if key not in seen:
                    seen.add(key)
                    yield FusedTree(root, tb.loops, tb.paths, nests,
                                    f"fused(outer={depth_used}{', shifted' if tb.used_shift else ''})",
                                    depth_used, tb.used_shift)

        for d in range(len(strict), 0, -1):
            yield from trees(strict[:d])
        if legal is not None:
            # (only reached when no prefix was taken) keep every shared dimension that stays legal
            chosen: list = []
            for c in loose:
                tb = _TreeBuilder(prog, target, False)
                root, nests, depth = tb.build(chosen + [c], moved)
                if legal(FusedTree(root, tb.loops, tb.paths, nests, "probe", depth)):
                    chosen.append(c)
            if chosen:
                yield from trees(chosen)
        yield from trees([])
    if windowed is None:
        windowed = moved_dims(prog, windows=True) if target == "c" and prog.stmts else {}
    if windowed:
        # a nest per statement, a moved reduction's inside out: legal where its reads
        # allow it (checked like every candidate), else the plain one after it
        tb = _TreeBuilder(prog, target, False)
        root, nests = tb.distributed(windowed)
        yield FusedTree(root, tb.loops, tb.paths, nests, "distributed, reduction outside")
    tb = _TreeBuilder(prog, target, False)
    root, nests = tb.distributed()
    yield FusedTree(root, tb.loops, tb.paths, nests, "distributed")


__all__ = ["FusedTree", "Loop", "TBand", "TLeaf", "TSeq", "candidate_trees", "moved_dims", "tree_stmts"]
