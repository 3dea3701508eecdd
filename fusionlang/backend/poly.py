"""Polyhedral statements of one group: arrays, statements, access relations, dependences.

Every op of a group becomes isl statements built from its access spec
(:mod:`fusionlang.ops.access`):

* an op statement without reduction becomes one *compute* statement over its output box;
* a reduction becomes three: *init* (``acc[i] = identity``), *update* over the output box
  times the reduction box (``acc[i] op= body``) and *final* (``out[w(i)] = finalize(acc[i])``).

Accumulators are arrays of their own, so dependences, legality and contraction treat them
like any intermediate. Pure copies (reshape, identity, transpose, slice...) are inlined
into their readers' index expressions, so a view costs nothing inside a fused group.

Names that reach isl or generated code are generated here (``S3``, ``A7``, ``i0``...);
graph names never do. This module knows nothing about schedules: :mod:`.fusion` decides
which loops are shared, :mod:`.schedule` builds and checks the isl schedule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from functools import reduce as _fold

import islpy as isl
import numpy as np
import sympy as sp

from fusionlang.engine.plan import boundary
from fusionlang.errors import CodegenError
from fusionlang.ir.graph import Graph, Node
from fusionlang.ops.access import ACC, Read, Stmt, i_sym, r_sym, v_sym
from fusionlang.ops.checking import op_call
from fusionlang.ops.interpreter import registry_of

#: the value a reduction starts from
IDENTITY = {"sum": sp.Integer(0), "prod": sp.Integer(1), "max": -sp.oo, "min": sp.oo}

#: dtypes generated code can hold (float16 has no portable C type)
SUPPORTED_DTYPES = ("float32", "float64", "int64", "int32", "int8", "uint8", "bool")


class NotAffine(Exception):
    """A sympy expression that isl cannot represent (quasi-affine forms only)."""


@dataclass(eq=False)
class Array:
    """One tensor a group touches.

    role: "input" (read from outside: graph input, constant, other group's output, aux
    data), "output" (written here and used after the group), "temp" (written and read only
    here) or "acc" (a reduction accumulator).
    """

    id: int
    shape: tuple[int, ...]
    dtype: str
    role: str
    value: str | None = None
    data: np.ndarray | None = None

    @property
    def name(self) -> str:
        return f"A{self.id}"

    @property
    def internal(self) -> bool:
        return self.role in ("temp", "acc")

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1


@dataclass(frozen=True, eq=False)
class Access:
    """An element of ``array`` at ``index`` (sympy, over the statement's dims; indirect
    reads also mention ``v`` symbols). A read with ``guard``/``cond`` yields ``pad``
    when some ``0 <= expr < extent`` in ``guard`` or ``cond`` is false."""

    array: Array
    index: tuple[sp.Expr, ...]
    vsym: sp.Symbol | None = None
    guard: tuple[tuple[sp.Expr, int], ...] = ()
    cond: sp.Basic | None = None
    pad: float | None = None

    @property
    def guarded(self) -> bool:
        return bool(self.guard) or self.cond is not None

    def is_indirect(self) -> bool:
        return any(s.name.startswith("v") for e in self.index for s in sp.sympify(e).free_symbols)


@dataclass(eq=False)
class PolyStmt:
    name: str
    kind: str  # compute | init | update | final
    node: Node
    order: int
    out_extents: tuple[int, ...]
    red_extents: tuple[int, ...] = ()
    #: extra isl constraints on the dims (iterations where a padded read is dropped)
    constraints: tuple[str, ...] = ()
    reads: list[Access] = field(default_factory=list)
    write: Access | None = None
    #: the value stored (compute/final), accumulated (update) or initialized (init);
    #: read k appears as its ``vsym``, the accumulator as ACC
    expr: sp.Expr = sp.Integer(0)
    reduce: str | None = None
    acc: Array | None = None
    #: the dtype the expression is computed in
    compute_dtype: str = "float32"

    # the shape of a statement never changes once built: cache what is asked often
    @cached_property
    def out_dims(self) -> tuple[sp.Symbol, ...]:
        return tuple(i_sym(k) for k in range(len(self.out_extents)))

    @cached_property
    def red_dims(self) -> tuple[sp.Symbol, ...]:
        return tuple(r_sym(k) for k in range(len(self.red_extents)))

    @cached_property
    def dims(self) -> tuple[sp.Symbol, ...]:
        return self.out_dims + self.red_dims

    @cached_property
    def extents(self) -> tuple[int, ...]:
        return self.out_extents + self.red_extents

    def extent_of(self, dim: sp.Symbol) -> int:
        return self.extents[self.dims.index(dim)]

    @property
    def volume(self) -> int:
        return int(np.prod(self.out_extents, dtype=np.int64)) if self.out_extents else 1

    def tuple_text(self) -> str:
        return f"{self.name}[{', '.join(d.name for d in self.dims)}]"

    def domain_text(self) -> str:
        cons = [f"0 <= {d.name} < {n}" for d, n in zip(self.dims, self.extents)] + list(self.constraints)
        return self.tuple_text() + (" : " + " and ".join(cons) if cons else "")

    def describe(self) -> str:
        return f"node {self.node.name!r} ({self.node.op})"


@dataclass(eq=False)
class PolyProgram:
    """All statements of one group, with their arrays and dependences."""

    graph: Graph
    nodes: list[Node]
    arrays: list[Array]
    stmts: list[PolyStmt]
    inputs: list[str]
    outputs: list[str]
    ctx: isl.Context
    domain: isl.UnionSet | None = None
    #: flow dependences on non-accumulator arrays
    deps_data: isl.UnionMap | None = None
    #: flow dependences through accumulators; "carried" = update -> update only
    deps_acc: isl.UnionMap | None = None
    deps_acc_carried: isl.UnionMap | None = None

    @property
    def deps(self) -> isl.UnionMap:
        return self.deps_data.union(self.deps_acc)

    def stmt(self, name: str) -> PolyStmt:
        for s in self.stmts:
            if s.name == name:
                return s
        raise KeyError(name)

    def array_of(self, value: str) -> Array | None:
        for a in self.arrays:
            if a.value == value:
                return a
        return None

    def writers(self, array: Array) -> list[PolyStmt]:
        return [s for s in self.stmts if s.write is not None and s.write.array is array]


# ----- sympy -> isl text -----------------------------------------------------------------


def isl_expr(e, dims: set[str] | None = None) -> str:
    """Print a quasi-affine sympy expression in isl syntax, or raise NotAffine."""
    e = sp.sympify(e)
    if e.is_Integer:
        return str(int(e))
    if e.is_Symbol:
        if dims is not None and e.name not in dims:
            raise NotAffine(e)
        return e.name
    if isinstance(e, sp.Add):
        return "(" + " + ".join(isl_expr(a, dims) for a in e.args) + ")"
    if isinstance(e, sp.Mul):
        coeff, rest = e.as_coeff_Mul()
        if not coeff.is_Integer or isinstance(rest, sp.Mul):  # rational factor, or two non-constants
            raise NotAffine(e)
        return f"({int(coeff)}*{isl_expr(rest, dims)})"
    if isinstance(e, sp.floor):
        num, den = sp.fraction(sp.together(e.args[0]))
        if not den.is_Integer or den <= 0:
            raise NotAffine(e)
        return f"floor(({isl_expr(sp.expand(num), dims)})/{int(den)})"
    if isinstance(e, sp.ceiling):
        return f"(-{isl_expr(sp.floor(-e.args[0]), dims)})"
    if isinstance(e, sp.Mod):
        a, m = e.args
        if not m.is_Integer or m <= 0:
            raise NotAffine(e)
        return f"(({isl_expr(a, dims)}) mod {int(m)})"
    if isinstance(e, (sp.Min, sp.Max)):
        fn = "min" if isinstance(e, sp.Min) else "max"
        parts = [isl_expr(a, dims) for a in e.args]
        return _fold(lambda x, y: f"{fn}({x}, {y})", parts)
    raise NotAffine(e)


def isl_constraint(c, dims: set[str] | None = None) -> str:
    """A sympy relation / boolean combination as isl constraint text, or NotAffine."""
    if c is sp.true or c == sp.true:
        return "true"
    if c is sp.false or c == sp.false:
        return "false"
    ops = {sp.StrictLessThan: "<", sp.LessThan: "<=", sp.StrictGreaterThan: ">", sp.GreaterThan: ">=",
           sp.Equality: "="}
    for kind, op in ops.items():
        if isinstance(c, kind):
            return f"({isl_expr(c.args[0], dims)} {op} {isl_expr(c.args[1], dims)})"
    if isinstance(c, sp.Unequality):
        return f"({isl_expr(c.args[0], dims)} != {isl_expr(c.args[1], dims)})"
    if isinstance(c, sp.And):
        return "(" + " and ".join(isl_constraint(a, dims) for a in c.args) + ")"
    if isinstance(c, sp.Or):
        return "(" + " or ".join(isl_constraint(a, dims) for a in c.args) + ")"
    if isinstance(c, sp.Not):
        return f"(not {isl_constraint(c.args[0], dims)})"
    raise NotAffine(c)


def guard_text(access: Access, dims: set[str]) -> str:
    """isl constraints under which a guarded read really reads (raises NotAffine)."""
    parts = [f"0 <= {isl_expr(e, dims)} < {n}" for e, n in access.guard]
    if access.cond is not None:
        parts.append(isl_constraint(access.cond, dims))
    return " and ".join(parts) if parts else "true"


def access_map_text(stmt: PolyStmt, access: Access) -> str:
    """isl relation text for one access; a dimension indexed non-affinely (or by loaded
    data) is left free, which over-approximates what is read: only more dependences."""
    dims = {d.name for d in stmt.dims}
    out = [f"o{k}" for k in range(len(access.array.shape))]
    cons = []
    for k, (e, n) in enumerate(zip(access.index, access.array.shape)):
        # a dimension indexed by loaded data (or non-affinely) may be any element
        try:
            cons.append(f"o{k} = {isl_expr(e, dims)}")
        except NotAffine:
            cons.append(f"0 <= o{k} < {n}")
    try:
        if access.guarded:
            cons.append(guard_text(access, dims))
    except NotAffine:
        pass  # reading more than really read only adds dependences
    # (the statement's domain is intersected by the caller)
    return (f"{{ {stmt.tuple_text()} -> {access.array.name}[{', '.join(out)}]"
            + (" : " + " and ".join(cons) if cons else "") + " }")


# ----- building statements ------------------------------------------------------------


def _is_pure_copy(graph: Graph, node: Node, stmts: list[Stmt]) -> bool:
    if len(stmts) != 1 or len(node.outputs) != 1:
        return False
    s = stmts[0]
    if s.reduce is not None or s.write is not None or len(s.reads) != 1 or s.output != 0:
        return False
    read = s.reads[0]
    if read.pad is not None or read.cond is not None or isinstance(read.source, str) or read.is_indirect():
        return False
    if sp.sympify(s.body) != v_sym(0):
        return False
    src = node.inputs[read.source]
    return bool(src) and graph.types[src].dtype == graph.types[node.outputs[0]].dtype


def _compute_dtype(dtype: str) -> str:
    return dtype if dtype in ("float32", "float64") else "float64"


def _needed_reads(spec: Stmt, expr: sp.Expr) -> list[int]:
    """Read positions an expression needs, with reads used inside other reads' indices."""
    want = {int(s.name[1:]) for s in sp.sympify(expr).free_symbols if s.name.startswith("v") and s.name[1:].isdigit()}
    frontier = list(want)
    while frontier:
        k = frontier.pop()
        for e in spec.reads[k].index:
            for s in sp.sympify(e).free_symbols:
                if s.name.startswith("v") and s.name[1:].isdigit() and int(s.name[1:]) not in want:
                    want.add(int(s.name[1:]))
                    frontier.append(int(s.name[1:]))
    return sorted(want)


class _Builder:
    def __init__(self, graph: Graph, names: list[str], registry=None, constants=None):
        self.graph = graph
        self.constants = graph.constants if constants is None else constants
        self.registry = registry_of(graph, registry)
        order = {n.name: k for k, n in enumerate(graph.nodes)}
        missing = [n for n in names if n not in order]
        if missing:
            raise CodegenError(f"node {missing[0]!r} is not in graph {graph.name!r}")
        self.nodes = [graph.nodes[order[n]] for n in sorted(set(names), key=order.__getitem__)]
        self.inputs, self.outputs = boundary(graph, {n.name for n in self.nodes})
        self.arrays: list[Array] = []
        self.by_value: dict[str, Array] = {}
        self.alias: dict[str, tuple[str, tuple[sp.Expr, ...]]] = {}
        self.stmts: list[PolyStmt] = []

    # arrays
    def new_array(self, shape, dtype, role, value=None, data=None) -> Array:
        if dtype not in SUPPORTED_DTYPES:
            raise CodegenError(f"value {value!r}: dtype {dtype} is not supported by the code generators")
        a = Array(len(self.arrays), tuple(int(d) for d in shape), dtype, role, value, data)
        self.arrays.append(a)
        return a

    def value_array(self, value: str) -> Array:
        if value not in self.by_value:
            t = self.graph.types[value]
            role = "output" if value in self.outputs else ("input" if value in self.inputs else "temp")
            self.by_value[value] = self.new_array(t.shape, t.dtype, role, value)
        return self.by_value[value]

    # reads
    def read_access(self, node: Node, spec: Stmt, k: int, aux_arrays: dict) -> Access:
        read: Read = spec.reads[k]
        index = tuple(sp.sympify(e) for e in read.index)
        if isinstance(read.source, str):
            if read.source not in spec.aux:
                raise CodegenError(f"node {node.name!r} ({node.op}): read of unknown aux array {read.source!r}")
            array = aux_arrays[read.source]
            value = None
        else:
            if read.source >= len(node.inputs) or not node.inputs[read.source]:
                raise CodegenError(f"node {node.name!r} ({node.op}): access spec reads missing input {read.source}")
            value = node.inputs[read.source]
            array = None
        guard = ()
        if read.pad is not None:
            shape = array.shape if array is not None else self.graph.types[value].shape
            if len(index) != len(shape):
                raise CodegenError(f"node {node.name!r} ({node.op}): read index rank {len(index)} != rank {len(shape)}")
            guard = tuple((e, n) for e, n in zip(index, shape))
        if array is None:
            # reads through pure copies go straight to the copied tensor
            while value in self.alias:
                src, copy_index = self.alias[value]
                sub = {i_sym(j): e for j, e in enumerate(index)}
                index = tuple(sp.sympify(e).xreplace(sub) for e in copy_index)
                value = src
            array = self.value_array(value)
        if len(index) != len(array.shape):
            raise CodegenError(f"node {node.name!r} ({node.op}): read index rank {len(index)} does not match "
                               f"{len(array.shape)}-d input")
        return Access(array, index, v_sym(k), guard, read.cond, read.pad)

    def build(self) -> None:
        for node in self.nodes:
            opdef = self.registry.get(node.op, f"node {node.name!r}")
            if opdef.compound:
                raise CodegenError(f"node {node.name!r} ({node.op}) is a compound op: decompose it before code "
                                   f"generation")
            if opdef.access is None:
                raise CodegenError(f"node {node.name!r} ({node.op}) has no access spec, so no loop form")
            call = op_call(self.graph, node, self.registry)
            specs = list(opdef.access(call))
            if _is_pure_copy(self.graph, node, specs):
                src = node.inputs[specs[0].reads[0].source]
                self.alias[node.outputs[0]] = (src, tuple(sp.sympify(e) for e in specs[0].reads[0].index))
                if node.outputs[0] not in self.outputs:
                    continue  # readers see through it; nothing to compute
            for spec in specs:
                self.add_spec(node, spec)

    def inline_scalars(self, reads: list[Access], expr: sp.Expr) -> tuple[list[Access], sp.Expr]:
        """Reads of one-element constants become literals in the expression (no load, and
        the compiler can fold ``x * 0.5``)."""
        kept = []
        for a in reads:
            value = self.constants.get(a.array.value) if a.array.role == "input" and a.array.value else None
            used_in_index = any(a.vsym in sp.sympify(e).free_symbols for b in reads for e in b.index)
            if value is None or np.size(value) != 1 or a.guarded or used_in_index:
                kept.append(a)
                continue
            v = np.asarray(value).reshape(-1)[0]
            literal = sp.Float(float(v)) if np.asarray(value).dtype.kind == "f" else sp.Integer(int(v))
            expr = expr.xreplace({a.vsym: literal})
        return kept, expr

    def add_spec(self, node: Node, spec: Stmt) -> None:
        if spec.output >= len(node.outputs):
            raise CodegenError(f"node {node.name!r} ({node.op}): access spec writes output {spec.output}")
        value = node.outputs[spec.output]
        out = self.value_array(value)
        if any(n == 0 for n in spec.domain) or any(n == 0 for n in spec.reduce_extents):
            if spec.reduce is None or any(n == 0 for n in spec.domain):
                return  # no instances
        aux_arrays = {name: self.new_array(np.asarray(arr).shape, np.asarray(arr).dtype.name, "input", None,
                                           np.ascontiguousarray(arr)) for name, arr in spec.aux.items()}
        write_index = tuple(sp.sympify(e) for e in spec.write_index)
        if len(write_index) != len(out.shape):
            raise CodegenError(f"node {node.name!r} ({node.op}): write index rank does not match its output")
        dtype = _compute_dtype(out.dtype)
        order = len(self.stmts)
        base = f"S{order}"
        out_extents = tuple(int(n) for n in spec.domain)
        if spec.reduce is None:
            reads = [self.read_access(node, spec, k, aux_arrays) for k in _needed_reads(spec, spec.body)]
            reads, body = self.inline_scalars(reads, sp.sympify(spec.body))
            self.stmts.append(PolyStmt(base, "compute", node, order, out_extents, reads=reads,
                                       write=Access(out, write_index), expr=body, compute_dtype=dtype))
            return
        red_extents = tuple(int(n) for n in spec.reduce_extents)
        acc = self.new_array(out_extents, dtype, "acc")
        acc_at = Access(acc, tuple(i_sym(k) for k in range(len(out_extents))), ACC)
        self.stmts.append(PolyStmt(base + "_init", "init", node, order, out_extents, write=acc_at,
                                   expr=IDENTITY[spec.reduce], acc=acc, compute_dtype=dtype))
        body = sp.sympify(spec.body)
        reads = [self.read_access(node, spec, k, aux_arrays) for k in _needed_reads(spec, body)]
        reads, body = self.inline_scalars(reads, body)
        constraints, kept = [], []
        dims = {d.name for d in (tuple(i_sym(k) for k in range(len(out_extents)))
                                 + tuple(r_sym(k) for k in range(len(red_extents))))}
        for a in reads:
            # a padded read whose pad leaves the accumulator unchanged: drop those iterations
            # from the domain instead of testing the bounds in the innermost loop
            if a.guarded and a.pad is not None and _pad_is_neutral(body, a.vsym, a.pad, spec.reduce):
                try:
                    constraints.append(guard_text(a, dims))
                    kept.append(Access(a.array, a.index, a.vsym))
                    continue
                except NotAffine:
                    pass
            kept.append(a)
        self.stmts.append(PolyStmt(base + "_update", "update", node, order, out_extents, red_extents,
                                   tuple(constraints), reads=kept + [acc_at], write=acc_at, expr=body,
                                   reduce=spec.reduce, acc=acc, compute_dtype=dtype))
        finalize = sp.sympify(spec.finalize) if spec.finalize is not None else ACC
        freads = [self.read_access(node, spec, k, aux_arrays) for k in _needed_reads(spec, finalize)]
        freads, finalize = self.inline_scalars(freads, finalize)
        for a in freads:
            if any(s.name.startswith("r") for e in a.index for s in sp.sympify(e).free_symbols):
                raise CodegenError(f"node {node.name!r} ({node.op}): finalize reads depend on reduction indices")
        self.stmts.append(PolyStmt(base + "_final", "final", node, order, out_extents, reads=freads + [acc_at],
                                   write=Access(out, write_index), expr=finalize, acc=acc, compute_dtype=dtype))


def _pad_is_neutral(body: sp.Expr, vsym: sp.Symbol, pad: float, reduce: str) -> bool:
    value = sp.oo if pad == float("inf") else (-sp.oo if pad == float("-inf") else sp.sympify(pad))
    substituted = body.subs(vsym, value)
    if substituted == IDENTITY[reduce]:
        return True
    return bool(value.is_finite) and sp.simplify(substituted - IDENTITY[reduce]) == 0


def build_program(graph: Graph, names: list[str], registry=None, constants=None) -> PolyProgram:
    """Statements, arrays and dependences of the group made of ``names``.

    ``constants``: values known at compile time (default: the graph's constants);
    one-element ones are inlined as literals.
    """
    b = _Builder(graph, names, registry, constants)
    b.build()
    # values a group output aliases (a view that is an output) still need their array
    for value in b.outputs:
        if value not in b.by_value:
            b.value_array(value)
    touched = {a.array.id for s in b.stmts for a in s.reads + [s.write]}
    arrays = [a for a in b.arrays if a.role != "input" or a.id in touched]
    prog = PolyProgram(graph, b.nodes, arrays, b.stmts, b.inputs, b.outputs, isl.Context())
    compute_dependences(prog)
    return prog


# ----- dependences ---------------------------------------------------------------------


def domain_of(prog: PolyProgram, stmts=None) -> isl.UnionSet:
    """Union of the statements' iteration domains (each parsed once per program)."""
    stmts = prog.stmts if stmts is None else stmts
    cache = prog.__dict__.setdefault("_domains", {})
    result = isl.UnionSet.empty(isl.Space.params_alloc(prog.ctx, 0))
    for s in stmts:
        if s.name not in cache:
            cache[s.name] = isl.UnionSet.read_from_str(prog.ctx, "{ " + s.domain_text() + " }")
        result = result.union(cache[s.name])
    return result


def _union_map(prog: PolyProgram, texts: list[str]) -> isl.UnionMap:
    """One union map from relation texts ``{ ... }`` (parsed in one go)."""
    if not texts:
        return isl.UnionMap.empty(isl.Space.params_alloc(prog.ctx, 0))
    inner = "; ".join(t.strip()[1:-1] for t in texts)
    return isl.UnionMap.read_from_str(prog.ctx, "{ " + inner + " }")


def original_order(prog: PolyProgram) -> isl.UnionMap:
    """The unfused execution order: statements in turn, each over its box lexicographically."""
    depth = max((len(s.dims) for s in prog.stmts), default=0)
    texts = []
    for k, s in enumerate(prog.stmts):
        coords = [str(k)] + [d.name for d in s.dims] + ["0"] * (depth - len(s.dims))
        texts.append(f"{{ {s.tuple_text()} -> [{', '.join(coords)}] }}")
    return _union_map(prog, texts)


def compute_dependences(prog: PolyProgram) -> None:
    prog.domain = domain_of(prog)
    order = original_order(prog)
    reads = {"data": [], "acc": []}
    writes = {"data": [], "acc": []}
    for s in prog.stmts:
        for a in s.reads:
            if a.array.role != "input":
                reads["acc" if a.array.role == "acc" else "data"].append(access_map_text(s, a))
        kind = "acc" if s.write.array.role == "acc" else "data"
        writes[kind].append(access_map_text(s, s.write))
    deps = {}
    for kind in ("data", "acc"):
        sink = _union_map(prog, reads[kind]).intersect_domain(prog.domain)
        source = _union_map(prog, writes[kind]).intersect_domain(prog.domain)
        flow = (isl.UnionAccessInfo.from_sink(sink).set_must_source(source)
                .set_schedule_map(order).compute_flow())
        deps[kind] = flow.get_must_dependence()
    prog.deps_data = deps["data"]
    prog.deps_acc = deps["acc"]
    updates = domain_of(prog, [s for s in prog.stmts if s.kind == "update"])
    prog.deps_acc_carried = deps["acc"].intersect_domain(updates).intersect_range(updates)


__all__ = ["Access", "Array", "NotAffine", "PolyProgram", "PolyStmt", "build_program", "isl_constraint",
           "isl_expr"]
