"""The isl side of a fused tree: build the schedule, check it, find parallel loops, make the AST.

A hand-built tree (:mod:`.fusion`) becomes an isl schedule tree with one single-member band
per loop, each under a mark ``L<id>`` so the generated AST says which loop is which.
Legality is isl's: every flow dependence must go forward in the schedule
(``deps ⊆ lex_lt(schedule)``). A loop is *parallel* (coincident) when no dependence between
instances of the same outer iteration crosses its iterations; it is a *SIMD reduction* when
the only such dependences are an accumulator's ``acc op= ...`` chain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import islpy as isl

from fusionlang.backend.fusion import FusedTree, TBand, TLeaf, candidate_trees, tree_stmts
from fusionlang.backend.poly import Array, PolyProgram, domain_of, inline_producers, isl_expr
from fusionlang.errors import CodegenError


@dataclass
class Scheduled:
    prog: PolyProgram
    tree: FusedTree
    schedule: isl.Schedule | None
    ast: isl.AstNode | None
    #: why more fused candidates were rejected (for reports and check_group)
    rejected: list[str]
    #: how the schedule was selected, to replay it (None: nothing was selected)
    choice: "ScheduleChoice | None" = None

    @property
    def nests(self) -> int:
        return self.tree.nests


def _mupa(prog: PolyProgram, loop, names: list[str]) -> isl.MultiUnionPwAff:
    parts = []
    for name in names:
        s = prog.stmt(name)
        expr = loop.exprs[name]
        parts.append(f"{s.tuple_text()} -> [({isl_expr(expr, {d.name for d in s.dims})})]")
    return isl.MultiUnionPwAff.read_from_str(prog.ctx, "[{ " + "; ".join(parts) + " }]")


def _insert(prog: PolyProgram, node: isl.ScheduleNode, t) -> isl.ScheduleNode:
    """Insert tree ``t`` at leaf ``node``; returns the node now at that position."""
    if isinstance(t, TLeaf):
        return node
    if isinstance(t, TBand):
        node = node.insert_partial_schedule(_mupa(prog, t.loop, tree_stmts(t)))
        child = _insert(prog, node.child(0), t.child)
        node = child.parent()
        return node.insert_mark(isl.Id(f"L{t.loop.id}", context=prog.ctx))
    filters = isl.UnionSetList.alloc(prog.ctx, len(t.children))
    for c in t.children:
        filters = filters.add(domain_of(prog, [prog.stmt(n) for n in tree_stmts(c)]))
    node = node.insert_sequence(filters)
    for k, c in enumerate(t.children):
        top = _insert(prog, node.child(k).child(0), c)
        node = top.parent().parent()
    return node


def to_isl(prog: PolyProgram, tree: FusedTree) -> isl.Schedule:
    node = isl.Schedule.from_domain(prog.domain).get_root().child(0)
    node = _insert(prog, node, tree.root)
    return node.get_schedule()


def is_legal(prog: PolyProgram, schedule: isl.Schedule) -> bool:
    """Every dependence goes forward: its distance in schedule space is lexicographically
    positive (the same test as ``deps ⊆ lex_lt(schedule)``, without pairing every
    statement with every other)."""
    deps = prog.deps
    if deps.is_empty():
        return True
    smap = schedule.get_map().intersect_domain(prog.domain)
    moved = deps.apply_domain(smap).apply_range(smap)
    spaces = []
    moved.foreach_map(lambda m: spaces.append(m.dim(isl.dim_type.out)))
    if len(set(spaces)) != 1:
        return deps.is_subset(smap.lex_lt_union_map(smap))
    n = spaces[0]
    pieces = []
    for k in range(n):
        cons = [f"d{j} = 0" for j in range(k)] + [f"d{k} >= 1"]
        pieces.append("[" + ", ".join(f"d{j}" for j in range(n)) + "] : " + " and ".join(cons))
    positive = isl.UnionSet.read_from_str(prog.ctx, "{ " + "; ".join(pieces) + " }")
    return moved.deltas().is_subset(positive)


def _zero_distance(deps: isl.UnionMap, band: isl.ScheduleNode) -> bool:
    dom = band.get_domain()
    prefix = band.get_prefix_schedule_union_map()
    same = prefix.apply_range(prefix.reverse())
    d = deps.intersect(same).intersect_domain(dom).intersect_range(dom)
    if d.is_empty():
        return True
    partial = band.band_get_partial_schedule_union_map()
    dist = d.apply_domain(partial).apply_range(partial).deltas()
    zero = isl.UnionSet.read_from_str(band.get_ctx(), "{ [0] }")
    return dist.is_subset(zero)


def mark_parallel(prog: PolyProgram, schedule: isl.Schedule, tree: FusedTree) -> None:
    """Set ``coincident`` and ``simd_accs`` on every loop of the tree."""
    all_deps = prog.deps
    no_carried = prog.deps_data.union(prog.deps_acc.subtract(prog.deps_acc_carried))

    def visit(node: isl.ScheduleNode):
        if node.get_type() == isl.schedule_node_type.mark:
            name = node.mark_get_id().get_name()
            if name.startswith("L"):
                loop = tree.loops[int(name[1:])]
                band = node.child(0)
                loop.coincident = _zero_distance(all_deps, band)
                if not loop.coincident and _zero_distance(no_carried, band):
                    names = set(tree_stmts_under(band))
                    loop.simd_accs = tuple(sorted({cast(Array, prog.stmt(n).acc).id for n in names
                                                   if prog.stmt(n).kind == "update"}))
        for k in range(node.n_children()):
            visit(node.child(k))

    visit(schedule.get_root())


def tree_stmts_under(node: isl.ScheduleNode) -> list[str]:
    names = []
    node.get_domain().foreach_set(lambda s: names.append(s.get_tuple_name()))
    return names


def build_ast(prog: PolyProgram, schedule: isl.Schedule) -> isl.AstNode:
    build = isl.AstBuild.from_context(isl.Set.read_from_str(prog.ctx, "{ : }"))
    return build.node_from_schedule(schedule)


@dataclass(frozen=True)
class ScheduleChoice:
    """The schedule :func:`select_program` chose, as the decisions that lead to it and no
    names, so a program of the same structure (a repeated block, or the same group built
    again for compiling) gets it back with :func:`replay_program` instead of a search:
    whether producers were inlined, the legality answers the candidate generator's probes
    got, and which candidate was taken. ``nests`` and ``strategy`` check the replay;
    ``rejected``: why more fused candidates were not taken; ``violates``: some fused
    candidate of the program as built broke a dependence."""

    inline: bool
    candidate: int
    probes: tuple[bool, ...]
    nests: int
    strategy: str
    rejected: tuple[str, ...]
    violates: bool


def _search_tree(prog: PolyProgram, target: str, fuse: bool):
    """(tree, isl schedule, rejected, candidate index, probe answers): the first legal
    candidate that is one loop nest, else the first legal one (the most fused)."""
    rejected, probes = [], []
    first = None

    def legal(tree) -> bool:
        probes.append(is_legal(prog, to_isl(prog, tree)))
        return probes[-1]

    for k, tree in enumerate(candidate_trees(prog, target, fuse, legal)):
        sched = to_isl(prog, tree)
        if not is_legal(prog, sched):
            rejected.append(f"{tree.strategy}: violates a dependence")
            continue
        if tree.nests == 1:
            return tree, sched, rejected, k, tuple(probes)
        if first is None:
            first = (tree, sched, k, len(probes))
        rejected.append(f"{tree.strategy}: {tree.nests} loop nests")
    if first is None:
        raise CodegenError("no legal schedule found (the unfused order should always be legal)")
    tree, sched, k, asked = first
    return tree, sched, rejected, k, tuple(probes[:asked])


def select_tree(prog: PolyProgram, target: str = "c", fuse: bool = True):
    """(tree, isl schedule, rejected): the first legal candidate that is one loop nest,
    else the first legal one (the most fused)."""
    tree, sched, rejected, _, _ = _search_tree(prog, target, fuse)
    return tree, sched, rejected


def select_program(prog: PolyProgram, target: str = "c", fuse: bool = True):
    """(program, tree, isl schedule, rejected, choice): as :func:`select_tree`, or with
    ``prog``'s producers inlined (:func:`.poly.inline_producers`) where that schedules
    better: fewer loop nests, or on the GPU as many nests with more parallel outer loops (a
    thread per output point of a matmul rather than per row). Inlining recomputes the
    producers, so on the CPU a group that fuses by contraction or shifted placement keeps
    its program. ``choice`` replays the selection (:func:`replay_program`)."""
    tree, sched, rejected, k, probes = _search_tree(prog, target, fuse)
    violates = any("violates" in r for r in rejected)
    plain = (prog, tree, sched, rejected,
             ScheduleChoice(False, k, probes, tree.nests, tree.strategy, tuple(rejected), violates))
    if not fuse or not prog.inlinable or (tree.nests <= 1 and target == "c"):
        return plain
    inlined = inline_producers(prog)
    tree_i, sched_i, rejected_i, k_i, probes_i = _search_tree(inlined, target, fuse)
    if _rank(tree_i, target) < _rank(tree, target):
        return inlined, tree_i, sched_i, rejected_i, ScheduleChoice(True, k_i, probes_i, tree_i.nests,
                                                                     tree_i.strategy, tuple(rejected_i), violates)
    return plain


def replay_program(prog: PolyProgram, choice: ScheduleChoice, target: str = "c", fuse: bool = True):
    """(program, tree, isl schedule) as ``choice`` selected them for a program of the same
    structure as ``prog``, with no search: one candidate is built and its legality checked
    once. None when the replay does not give the recorded tree or a legal one (then
    search)."""
    if choice.inline:
        if not prog.inlinable:
            return None
        prog = inline_producers(prog)
    answers = iter(choice.probes)
    tree = None
    try:
        for k, candidate in enumerate(candidate_trees(prog, target, fuse, lambda _: next(answers))):
            if k == choice.candidate:
                tree = candidate
                break
    except StopIteration:  # asked more than the recorded search did: not the same structure
        return None
    if tree is None or tree.nests != choice.nests or tree.strategy != choice.strategy:
        return None
    sched = to_isl(prog, tree)
    if not is_legal(prog, sched):
        return None
    return prog, tree, sched


def _rank(tree: FusedTree, target: str) -> tuple[int, int]:
    """Lower is better: fewer loop nests, then on the GPU (a thread per outer iteration)
    more parallel outer loops."""
    return tree.nests, (0 if target == "c" else -tree.outer_depth)


def schedule_program(prog: PolyProgram, target: str = "c", fuse: bool = True) -> Scheduled:
    """The most fused legal schedule of ``prog`` (with its AST and parallel loops); its
    ``prog`` is the program scheduled, which may have producers inlined (see
    :func:`select_program`)."""
    if not prog.stmts:  # nothing to compute (every tensor empty, or only views)
        return Scheduled(prog, FusedTree(TLeaf([]), {}, {}, 0, "empty"), None, None, [])
    prog, tree, sched, rejected, choice = select_program(prog, target, fuse)
    return finish_schedule(prog, tree, sched, rejected, choice)


def finish_schedule(prog: PolyProgram, tree: FusedTree, sched: isl.Schedule, rejected: list[str],
                    choice: ScheduleChoice | None = None) -> Scheduled:
    """The selected schedule with its parallel loops marked and its AST built."""
    mark_parallel(prog, sched, tree)
    return Scheduled(prog, tree, sched, build_ast(prog, sched), rejected, choice)


__all__ = ["ScheduleChoice", "Scheduled", "build_ast", "finish_schedule", "is_legal", "mark_parallel", "replay_program",
           "schedule_program", "select_program", "select_tree", "to_isl"]
