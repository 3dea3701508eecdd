"""From isl's AST to the loop IR: statements become stores, intermediates are contracted.

Contraction: an intermediate array dimension can be dropped when every access to the
array indexes that dimension with the same loop iterator, of a loop that encloses all
those accesses (or when it has extent 1). Each iteration then touches its own elements
only, so one slot serves them all. An array left with no dimension is a scalar; one with
some is a local buffer. Neither ever reaches global memory.

Declaration scope: a contracted array is declared inside the deepest shared loop across
whose iterations no value of it flows (checked with isl on the array's own dependences), so
C block scoping makes it private to a parallel or SIMD iteration.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl
import sympy as sp

from fusionlang.backend.loopir import Assign, For, If, Load, Storage, walk
from fusionlang.backend.poly import (Access, Array, PolyProgram, PolyStmt, _union_map, access_map_text, domain_of,
                                     flow_dependences, isl_expr, substituted)
from fusionlang.backend.schedule import Scheduled
from fusionlang.errors import CodegenError
from fusionlang.ops.access import ACC, as_expr


@dataclass(eq=False)
class LoweredGroup:
    prog: PolyProgram
    scheduled: Scheduled
    body: list
    storage: dict[int, Storage]
    #: kernel parameters: global arrays, inputs first then outputs
    params: list[Array]
    #: array id -> tree loop id whose body declares it (None: the kernel's top)
    scope: dict[int, int | None] = field(default_factory=dict)

    @property
    def nests(self) -> int:
        return self.scheduled.nests

    @property
    def strategy(self) -> str:
        return self.scheduled.tree.strategy

    @property
    def loops(self):
        return self.scheduled.tree.loops

    def locals(self) -> list[Storage]:
        return [st for st in self.storage.values() if st.kind != "global"]


# ----- contraction -------------------------------------------------------------------


def _accesses(prog: PolyProgram, array: Array) -> list[tuple[PolyStmt, Access]]:
    found = []
    for s in prog.stmts:
        if s.write.array is array:
            found.append((s, s.write))
        for a in s.reads:
            if a.array is array:
                found.append((s, a))
    return found


def _common_prefix(paths: list[list[tuple[int, sp.Expr]]]) -> list[int]:
    common = []
    for level in zip(*paths):
        ids = {lid for lid, _ in level}
        if len(ids) != 1:
            break
        common.append(level[0][0])
    return common


def plan_storage(prog: PolyProgram, scheduled: Scheduled) -> tuple[dict[int, Storage], dict[int, int | None]]:
    tree = scheduled.tree
    storage: dict[int, Storage] = {}
    scope: dict[int, int | None] = {}
    for array in prog.arrays:
        if not array.internal:
            storage[array.id] = Storage(array, "global", (True,) * len(array.shape))
            continue
        accesses = _accesses(prog, array)
        if not accesses:
            continue
        paths = [tree.paths[s.name] for s, _ in accesses]
        common = _common_prefix(paths)
        kept = []
        for j, n in enumerate(array.shape):
            if n == 1:
                kept.append(False)
                continue
            dropped = False
            for lid in common:
                loop = tree.loops[lid]
                if all(not a.is_indirect() and sp.expand(as_expr(a.index[j]) - loop.exprs[s.name]) == 0
                       for s, a in accesses):
                    dropped = True
                    break
            kept.append(not dropped)
        kept = tuple(kept)
        storage[array.id] = Storage(array, "local" if any(kept) else "scalar", kept)
        scope[array.id] = _scope(prog, array, accesses, [tree.loops[lid] for lid in common])
    return storage, scope


def _scope(prog: PolyProgram, array: Array, accesses, common_loops) -> int | None:
    """The deepest shared loop no value of ``array`` flows across (None: kernel scope)."""
    if not common_loops:
        return None
    stmts = {s.name: s for s, _ in accesses}
    reads = [access_map_text(s, a) for s, a in accesses if a is not s.write]
    writes = [access_map_text(s, s.write) for s in stmts.values() if s.write.array is array]
    if not reads:
        return common_loops[-1].id
    dom = domain_of(prog, list(stmts.values()))
    deps = flow_dependences(prog, _union_map(prog, reads).intersect_domain(dom),
                            _union_map(prog, writes).intersect_domain(dom), accumulators=array.role == "acc")
    best = None
    zero = isl.UnionSet.read_from_str(prog.ctx, "{ [0] }")
    for loop in common_loops:
        if not deps.is_empty():
            parts = []
            for name, s in stmts.items():
                parts.append(f"{s.tuple_text()} -> [({isl_expr(loop.exprs[name], {d.name for d in s.dims})})]")
            m = isl.UnionMap.read_from_str(prog.ctx, "{ " + "; ".join(parts) + " }")
            if not deps.apply_domain(m).apply_range(m).deltas().is_subset(zero):
                break
        best = loop.id
    return best


# ----- isl AST -> loop IR ----------------------------------------------------------


_OT = isl.ast_expr_op_type


class _Lowerer:
    def __init__(self, prog: PolyProgram):
        self.prog = prog
        self.env: dict[str, sp.Symbol] = {}
        self.nload = 0

    def expr(self, e) -> sp.Expr:
        t = e.get_type()
        if t == isl.ast_expr_type.int:
            return sp.Integer(int(e.get_val().to_python()))
        if t == isl.ast_expr_type.id:
            name = e.get_id().get_name()
            if name not in self.env:
                raise CodegenError(f"isl AST uses unknown iterator {name!r}")
            return self.env[name]
        op = e.get_op_type()
        args = [self.expr(e.get_op_arg(k)) for k in range(e.get_op_n_arg())]
        if op == _OT.add:
            return args[0] + args[1]
        if op == _OT.sub:
            return args[0] - args[1]
        if op == _OT.mul:
            return args[0] * args[1]
        if op == _OT.minus:
            return -args[0]
        if op in (_OT.div, _OT.fdiv_q, _OT.pdiv_q):
            return sp.floor(args[0] / args[1])
        if op in (_OT.pdiv_r, _OT.zdiv_r):
            return sp.Mod(args[0], args[1])
        if op in (_OT.max, _OT.min):
            # as with the relations below: isl leaves only bounds it could not compare, and
            # sympy's search for comparable arguments (its assumptions, per pair) cost
            # zfnet512's two LRN kernels 0.03 s of code generation
            fn = sp.Max if op == _OT.max else sp.Min
            return fn(*args, evaluate=all(a.is_Integer for a in args))
        if op in (_OT.cond, _OT.select):
            return sp.Piecewise((args[1], args[0]), (args[2], True))
        rel = {_OT.eq: sp.Eq, _OT.le: sp.Le, _OT.lt: sp.Lt, _OT.ge: sp.Ge, _OT.gt: sp.Gt}
        if op in rel:
            # isl already decided what it could: asking sympy's assumptions again cost a
            # tenth of a small model's code generation
            return rel[op](args[0], args[1], evaluate=False)
        if op in (_OT.and_, _OT.and_then):  # type: ignore[attr-defined]  # not in islpy's stubs
            return sp.And(*args)
        if op in (_OT.or_, _OT.or_else):  # type: ignore[attr-defined]  # not in islpy's stubs
            return sp.Or(*args)
        raise CodegenError(f"unsupported isl AST operation {op}")

    def node(self, n) -> list:
        t = n.get_type()
        if t == isl.ast_node_type.block:
            children = n.block_get_children()
            out = []
            for k in range(children.n_ast_node()):
                out.extend(self.node(children.get_at(k)))
            return out
        if t == isl.ast_node_type.mark:
            name = n.mark_get_id().get_name()
            body = self.node(n.mark_get_node())
            if name.startswith("L"):
                _tag(body, int(name[1:]))
            return body
        if t == isl.ast_node_type.for_:  # type: ignore[attr-defined]  # not in islpy's stubs
            it = n.for_get_iterator().get_id().get_name()
            init = self.expr(n.for_get_init())
            nonneg = bool(init.is_nonnegative)
            var = sp.Symbol(it, integer=True, nonnegative=True) if nonneg else sp.Symbol(it, integer=True)
            saved = self.env.get(it)
            self.env[it] = var
            cond = self.expr(n.for_get_cond())
            step = int(n.for_get_inc().get_val().to_python())
            body = self.node(n.for_get_body())
            if saved is None:
                del self.env[it]
            else:
                self.env[it] = saved
            return [For(var, init, cond, step, body)]
        if t == isl.ast_node_type.if_:  # type: ignore[attr-defined]  # not in islpy's stubs
            cond = self.expr(n.if_get_cond())
            then = self.node(n.if_get_then_node())
            orelse = self.node(n.if_get_else_node()) if n.if_has_else_node() else []
            return [If(cond, then, orelse)]
        if t == isl.ast_node_type.user:
            return [self.user(n.user_get_expr())]
        raise CodegenError(f"unsupported isl AST node {t}")

    def user(self, e) -> Assign:
        name = e.get_op_arg(0).get_id().get_name()
        stmt = self.prog.stmt(name)
        args = [self.expr(e.get_op_arg(k)) for k in range(1, e.get_op_n_arg())]
        sub = dict(zip(stmt.dims, args))
        placeholders = {}
        for a in stmt.reads:
            self.nload += 1
            placeholders[a] = sp.Symbol(f"_ld{self.nload}")
        by_v = {a.vsym: placeholders[a] for a in stmt.reads if a.vsym is not None and a.vsym != ACC}
        loads = {}
        value = as_expr(stmt.expr)
        for a in stmt.reads:
            ph = placeholders[a]
            index = tuple(as_expr(e).xreplace(sub).xreplace(by_v) for e in a.index)
            guard = tuple((as_expr(g).xreplace(sub).xreplace(by_v), n) for g, n in a.guard)
            cond = as_expr(a.cond).xreplace(sub).xreplace(by_v) if a.cond is not None else None
            loads[ph] = Load(a.array, index, guard, cond, a.pad, a.origin)
            value = substituted(value, {a.vsym: ph})
        # (not simplified: a literal 0 from a folded constant must stay, inf * 0 is NaN)
        value = substituted(value, {d: sub[d] for d in stmt.dims})
        index = tuple(as_expr(e).xreplace(sub) for e in stmt.write.index)
        return Assign(stmt, stmt.write.array, index, value, loads, stmt.reduce if stmt.kind == "update" else None)


def _tag(body: list, loop_id: int) -> None:
    for node in body:
        if isinstance(node, For):
            if node.loop is None:
                node.loop = loop_id
        elif isinstance(node, If):
            _tag(node.then, loop_id)
            _tag(node.orelse, loop_id)


def lower(scheduled: Scheduled) -> LoweredGroup:
    prog = scheduled.prog
    storage, scope = plan_storage(prog, scheduled)
    body = _Lowerer(prog).node(scheduled.ast) if prog.stmts else []
    inputs = [a for a in prog.arrays if a.role == "input"]
    outputs = [a for a in prog.arrays if a.role == "output"]
    return LoweredGroup(prog, scheduled, body, storage, inputs + outputs, scope)


def declaration_sites(group: LoweredGroup) -> tuple[list[Storage], dict[int, list[Storage]]]:
    """(kernel-level declarations, id(For) -> declarations at the top of that loop's body).

    An array goes in the deepest For on the common path of all its accesses whose tree
    loop is at or outside its allowed scope.
    """
    allowed: dict[int, set] = {}
    tree = group.scheduled.tree
    for aid, lid in group.scope.items():
        ids = set()
        if lid is not None:
            some = next(s for s in group.prog.stmts if any(l == lid for l, _ in tree.paths[s.name]))
            for l, _ in tree.paths[some.name]:
                ids.add(l)
                if l == lid:
                    break
        allowed[aid] = ids
    stacks: dict[int, list | None] = {}

    def visit(body, stack):
        for node in body:
            if isinstance(node, For):
                visit(node.body, stack + [node])
            elif isinstance(node, If):
                visit(node.then, stack)
                visit(node.orelse, stack)
            elif isinstance(node, Assign):
                touched = [node.array] + [ld.array for ld in node.loads.values()]
                for arr in touched:
                    if arr.id not in group.storage or group.storage[arr.id].kind == "global":
                        continue
                    prev = stacks.get(arr.id)
                    if prev is None:
                        stacks[arr.id] = list(stack)
                    else:
                        k = 0
                        while k < min(len(prev), len(stack)) and prev[k] is stack[k]:
                            k += 1
                        stacks[arr.id] = prev[:k]

    visit(group.body, [])
    top: list[Storage] = []
    inner: dict[int, list[Storage]] = {}
    for st in group.locals():
        stack = stacks.get(st.array.id)
        if stack is None:
            continue  # never accessed in the AST
        site = None
        for f in stack:
            if f.loop is not None and f.loop in allowed.get(st.array.id, set()):
                site = f
        if site is None:
            top.append(st)
        else:
            inner.setdefault(id(site), []).append(st)
    return top, inner


__all__ = ["LoweredGroup", "declaration_sites", "lower", "plan_storage", "walk"]
