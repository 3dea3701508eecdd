"""Polyhedral statements of one group: arrays, statements, access relations, dependences.

Every op of a group becomes isl statements built from its access spec
(:mod:`fusionlang.ops.access`):

* an op statement without reduction becomes one *compute* statement over its output box;
* a reduction becomes three: *init* (``acc[i] = identity``), *update* over the output box
  times the reduction box (``acc[i] op= body``) and *final* (``out[w(i)] = finalize(acc[i])``).

Accumulators are arrays of their own, so dependences, legality and contraction treat them
like any intermediate. Pure copies (reshape, identity, transpose, slice...) are inlined
into their readers' index expressions, so a view costs nothing inside a fused group.

Prologue inlining (``build_program(..., inline=True)``, see :func:`inline_producers`): a
cheap producer that loop fusion cannot contract, because its reader reads it at other
points than its own (a conv's window, a matmul's row, a transpose), is recomputed inside
the reader's expression instead: the reader's load of ``v[M(i)]`` becomes the producer's
body with the producer's own loads composed with ``M`` (recursively along chains such as
batch norm's sub, mul, add, then relu). A padded read keeps yielding its pad outside the
bounds. Recompute is the price (a 3x3 conv with 32 output channels evaluates each input's
prologue 9 * 32 times: on the CPU such a kernel runs up to 1.5x slower than a separate
prologue kernel and the conv), so :mod:`.schedule` inlines only where the group does not
fuse as well otherwise.

Names that reach isl or generated code are generated here (``S3``, ``A7``, ``i0``...);
graph names never do. This module knows nothing about schedules: :mod:`.fusion` decides
which loops are shared, :mod:`.schedule` builds and checks the isl schedule.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from functools import cached_property
from functools import reduce as _fold

import islpy as isl
import numpy as np
import sympy as sp

from fusionlang.engine.plan import boundary
from fusionlang.errors import CodegenError
from fusionlang.ir.float8 import NARROW_FLOAT_DTYPES, is_narrow_float
from fusionlang.ir.graph import Graph, Node
from fusionlang.ir.narrow_int import NARROW_INT_DTYPES
from fusionlang.ir.types import HALF_FLOATS, is_float_dtype
from fusionlang.ops.access import ACC, Read, Stmt, as_expr, i_sym, r_sym, v_sym
from fusionlang.ops.checking import op_call
from fusionlang.ops.interpreter import registry_of
from fusionlang.ops.scalar import NegativeZero

#: the value a reduction starts from
IDENTITY = {"sum": sp.Integer(0), "prod": sp.Integer(1), "max": -sp.oo, "min": sp.oo}

#: dtypes generated code can hold (float16 and bfloat16 as bit patterns, see backend.half; the narrow
#: storage types as bytes, see backend.storage_codecs)
SUPPORTED_DTYPES = (("float32", "float64", "int64", "int32", "int8", "uint8", "bool", "float16", "bfloat16",
                     "int16", "uint16", "uint32", "uint64") + NARROW_FLOAT_DTYPES + NARROW_INT_DTYPES)


def _start(reduce: str, dtype: str, empty: bool) -> sp.Expr:
    """A reduction's starting value: its identity, but for bool, where -oo and oo would be
    stored as true (a max over nothing is false, a min over nothing true), and a float sum
    over nothing, which is +0 (onnxruntime's, ONNX's)."""
    if dtype == "bool" and reduce in ("max", "min"):
        return sp.Integer(0 if reduce == "max" else 1)
    if np.dtype(dtype).kind in "iu" and reduce in ("max", "min"):
        info = np.iinfo(dtype)
        return sp.Integer(int(info.min if reduce == "max" else info.max))
    if reduce == "sum" and dtype.startswith(("float", "bfloat")) and not empty:
        # IEEE's additive identity: -0 + x is x for every x, where 0 + -0 is +0 (a sum or
        # running sum of -0.0s is -0.0 in the reference and onnxruntime)
        return NegativeZero()
    return IDENTITY[reduce]


def _accumulator_dtype(reduce: str, out_dtype: str, compute_dtype: str, finalized: bool) -> str:
    """The dtype a reduction accumulates in. An integer result of a plain sum, product, max
    or min accumulates in 64-bit integers, exactly as the reference does: a double loses
    int64 and uint64 values past 2**53, and converting an overflowed sum back is undefined.
    Sums and products in uint64 (they wrap, and the low bits are the narrower type's result);
    max and min in the signedness of the result. A finalized one (a mean) stays in double."""
    kind = np.dtype(out_dtype).kind
    if reduce == "prod" and out_dtype in HALF_FLOATS and not finalized:
        # a float32 product of float16 values over- and underflows by the order of its
        # factors (SIMD lanes reorder them: inf * 0 gave NaN where onnxruntime gives -inf);
        # in double, up to 40 float16 factors stay in range whatever their order
        return "float64"
    if kind not in "iu" or finalized:
        return compute_dtype
    if reduce in ("sum", "prod"):
        return "uint64"
    return "uint64" if kind == "u" else "int64"


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
    #: (node name, op) of the read, for errors generated code reports (a bad gather index)
    origin: tuple[str, str] | None = None

    @property
    def guarded(self) -> bool:
        return bool(self.guard) or self.cond is not None

    def is_indirect(self) -> bool:
        return any(s.name.startswith("v") for e in self.index for s in as_expr(e).free_symbols)


@dataclass(frozen=True, eq=False)
class _Recomputed(Access):
    """A read of ``value``, whose producer is inlined, so it has no array (``array`` is
    None): :meth:`_Builder.expand` replaces it by the producer's expression and loads."""

    value: str = ""


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
    #: every statement stores somewhere (keyword-only: it follows fields with defaults)
    write: Access = field(kw_only=True)
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
    #: nodes that inlining would recompute inside their readers (see inline_producers)
    inlinable: tuple[str, ...] = ()
    #: nodes recomputed inside their readers in this program (they have no statement)
    inlined: tuple[str, ...] = ()
    #: what the program was built with, to build it again with inlining
    registry: object = None
    constants: dict | None = None

    # The domain and dependences are computed on first use: the GEMM template only reads
    # a program's statements, and dependence analysis was most of building one.
    @property
    def domain(self) -> isl.UnionSet:
        found = self.__dict__.get("_domain")
        if found is None:
            found = self.__dict__["_domain"] = domain_of(self)
        return found

    @property
    def deps_data(self) -> isl.UnionMap:
        """Flow dependences on non-accumulator arrays."""
        return self._dependences()["data"]

    @property
    def deps_acc(self) -> isl.UnionMap:
        """Flow dependences through accumulators."""
        return self._dependences()["acc"]

    @property
    def deps_acc_carried(self) -> isl.UnionMap:
        """Accumulator dependences from update to update only."""
        return self._dependences()["acc_carried"]

    @property
    def deps(self) -> isl.UnionMap:
        return self.deps_data.union(self.deps_acc)

    def _dependences(self) -> dict:
        found = self.__dict__.get("_flow")
        if found is None:
            found = self.__dict__["_flow"] = compute_dependences(self)
        return found

    def stmt(self, name: str) -> PolyStmt:
        # by name through an index: scanning the list made scheduling a concat of
        # thousands of slices quadratic
        index = self.__dict__.get("_stmt_index")
        if index is None or len(index) != len(self.stmts):
            index = self.__dict__["_stmt_index"] = {}
            for s in self.stmts:
                index.setdefault(s.name, s)
        return index[name]

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
    e = as_expr(e)
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
    if as_expr(s.body) != v_sym(0):
        return False
    src = node.inputs[read.source]
    return bool(src) and graph.types[src].dtype == graph.types[node.outputs[0]].dtype


def _compute_dtype(dtype: str) -> str:
    if dtype in HALF_FLOATS:
        return "float32"  # stored in 16 bits, computed in float32 (backend.half)
    if dtype in NARROW_FLOAT_DTYPES:  # stored as a byte, computed on as float32 (backend.storage_codecs)
        return "float32"
    return dtype if dtype in ("float32", "float64") else "float64"


def _integer_array(a: Access) -> bool:
    return a.array is not None and np.dtype(a.array.dtype).kind in "iu"


def _needed_reads(spec: Stmt, expr: sp.Expr) -> list[int]:
    """Read positions an expression needs, with reads used inside other reads' indices."""
    want = {int(s.name[1:]) for s in as_expr(expr).free_symbols if s.name.startswith("v") and s.name[1:].isdigit()}
    frontier = list(want)
    while frontier:
        k = frontier.pop()
        for e in spec.reads[k].index:
            for s in as_expr(e).free_symbols:
                if s.name.startswith("v") and s.name[1:].isdigit() and int(s.name[1:]) not in want:
                    want.add(int(s.name[1:]))
                    frontier.append(int(s.name[1:]))
    return sorted(want)


def _recomputable(graph: Graph, node: Node, specs: list[Stmt], group_outputs: list[str]) -> bool:
    """A producer its readers can recompute: one statement computing its whole float output
    without reduction, lookup tables or data-dependent reads, and no use outside the group."""
    if len(specs) != 1 or len(node.outputs) != 1 or node.outputs[0] in group_outputs:
        return False
    spec, out = specs[0], graph.types[node.outputs[0]]
    return (spec.reduce is None and spec.write is None and spec.output == 0 and not spec.aux
            and tuple(spec.domain) == tuple(out.shape) and all(n > 0 for n in spec.domain)
            and out.dtype in ("float32", "float64") and not any(r.is_indirect() for r in spec.reads))


def _at_own_point(spec: Stmt, index: tuple[sp.Expr, ...], shape: tuple[int, ...]) -> bool:
    """The reader reads element ``(i0, i1, ...)`` at its point ``(i0, i1, ...)`` (0 along
    a dimension of one): loop fusion contracts such a value to a scalar, no inlining needed."""
    if len(index) != len(shape) or len(spec.domain) < len(shape):
        return False
    return all(spec.domain[k] == n and (as_expr(e) == i_sym(k) or (n == 1 and as_expr(e) == 0))
               for k, (e, n) in enumerate(zip(index, shape)))


def _statement_reads(spec: Stmt) -> list[int]:
    """Read positions any statement built from ``spec`` loads."""
    exprs = [spec.body] + ([spec.finalize] if spec.finalize is not None else [])
    return sorted({k for e in exprs for k in _needed_reads(spec, e)})


def _used_as_index(spec: Stmt, k: int) -> bool:
    return any(v_sym(k) in as_expr(e).free_symbols for r in spec.reads for e in r.index)


def _composed(read, point: dict, vsym: sp.Symbol):
    """``read`` (in its producer's dims) as seen from a reader that evaluates the producer at
    ``point`` (producer dim -> reader expression), its value renamed ``vsym``."""
    return dataclasses.replace(read, vsym=vsym,
                               index=tuple(as_expr(e).xreplace(point) for e in read.index),
                               guard=tuple((as_expr(e).xreplace(point), n) for e, n in read.guard),
                               cond=as_expr(read.cond).xreplace(point) if read.cond is not None else None)


def substituted(expr: sp.Expr, mapping: dict) -> sp.Expr:
    """``expr.xreplace(mapping)`` without evaluating the arithmetic that is rebuilt: sympy
    takes milliseconds to re-simplify ``Max(0, g*(x - m) + b)`` each time a chain is
    inlined, the printers fold what is constant anyway, and sympy's algebra is not IEEE's
    (it makes ``x * 0`` 0 and ``x / 0`` zoo, where inf * 0 is NaN). Comparisons and logic
    of numbers are decided (exact either way; an undecided ``Ne(0, 0)`` confuses
    Piecewise), except comparisons with NaN, which sympy refuses."""
    if expr in mapping:
        return mapping[expr]
    if not expr.args:
        return expr
    args = [substituted(a, mapping) for a in expr.args]
    if all(a is b for a, b in zip(args, expr.args)):
        return expr
    if isinstance(expr, sp.logic.boolalg.Boolean):
        try:
            return expr.func(*args)
        except TypeError:  # Lt(nan, 1): left to the printed code, which compares as IEEE does
            pass
    try:
        return expr.func(*args, evaluate=False)
    except TypeError:  # (a few sympy classes take no evaluate flag)
        return expr.func(*args)


def _inside(read) -> sp.Basic:
    """Where a guarded read really reads (elsewhere it yields its pad)."""
    parts = [sp.And(sp.Ge(e, 0), sp.Lt(e, n)) for e, n in read.guard]
    return sp.And(*parts, read.cond if read.cond is not None else sp.true)


class _Builder:
    def __init__(self, graph: Graph, names: list[str], registry=None, constants=None, inline: bool = False):
        self.graph = graph
        self.constants = graph.constants if constants is None else constants
        self.registry = registry_of(graph, registry)
        order = graph.index.position
        missing = [n for n in names if n not in order]
        if missing:
            raise CodegenError(f"node {missing[0]!r} is not in graph {graph.name!r}")
        self.nodes = [graph.index.by_name[n] for n in sorted(set(names), key=order.__getitem__)]
        self.inputs, self.outputs = boundary(graph, {n.name for n in self.nodes})
        self.arrays: list[Array] = []
        self.by_value: dict[str, Array] = {}
        self.alias: dict[str, tuple[str, tuple[sp.Expr, ...]]] = {}
        #: pure copies read through (they have no statement)
        self.copies: set[str] = set()
        self.inline = inline
        #: nodes inlining would recompute in their readers; with ``inline``, value -> (node, spec)
        self.inlinable: list[str] = []
        self.inlined: dict[str, tuple[Node, Stmt]] = {}
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
    def through_copies(self, value: str, index: tuple[sp.Expr, ...]) -> tuple[str, tuple[sp.Expr, ...]]:
        """The tensor and index a read really touches: reads through pure copies go to the
        copied tensor."""
        while value in self.alias:
            src, copy_index = self.alias[value]
            sub = {i_sym(j): e for j, e in enumerate(index)}
            index = tuple(as_expr(e).xreplace(sub) for e in copy_index)
            value = src
        return value, index

    def read_access(self, node: Node, spec: Stmt, k: int, aux_arrays: dict) -> Access:
        read: Read = spec.reads[k]
        index = tuple(as_expr(e) for e in read.index)
        if isinstance(read.source, str):
            if read.source not in spec.aux:
                raise CodegenError(f"node {node.name!r} ({node.op}): read of unknown aux array {read.source!r}")
            array = aux_arrays[read.source]
            value = ""  # not read: the aux array is known
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
            value, index = self.through_copies(value, index)
            if value in self.inlined:
                # no array until expand() replaces it by the producer's expression
                return _Recomputed(None, index, v_sym(k), guard, read.cond, read.pad,  # type: ignore[arg-type]
                                   (node.name, node.op), value=value)
            array = self.value_array(value)
        if len(index) != len(array.shape):
            raise CodegenError(f"node {node.name!r} ({node.op}): read index rank {len(index)} does not match "
                               f"{len(array.shape)}-d input")
        return Access(array, index, v_sym(k), guard, read.cond, read.pad, (node.name, node.op))

    def build(self) -> None:
        specs = {node.name: self.specs_of(node) for node in self.nodes}
        chosen = self.choose_inlined(specs)
        self.inlinable = [n.name for n in self.nodes if n.name in chosen]
        if self.inline:
            self.inlined = {n.outputs[0]: (n, specs[n.name][0]) for n in self.nodes if n.name in chosen}
        for node in self.nodes:
            if node.name in self.copies or (self.inline and node.name in chosen):
                continue  # readers see through it, or recompute it
            for spec in specs[node.name]:
                self.add_spec(node, spec)

    def specs_of(self, node: Node) -> list[Stmt]:
        """The node's access spec; a pure copy is recorded as an alias of its source."""
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
            self.alias[node.outputs[0]] = (src, tuple(as_expr(e) for e in specs[0].reads[0].index))
            if node.outputs[0] not in self.outputs:
                self.copies.add(node.name)  # an output copy still writes its array
        return specs

    def choose_inlined(self, specs: dict[str, list[Stmt]]) -> set[str]:
        """Nodes inlining recomputes in their readers: recomputable producers (see
        :func:`_recomputable`) every read of which is by a node recomputed itself, or reads
        other points than the reader's own (a window, a row, a transpose) straight from
        the reader's expression, in the producer's dtype."""
        readers: dict[str, list[tuple[str, bool, bool]]] = {}
        for node in self.nodes:
            if node.name in self.copies:
                continue
            for spec in specs[node.name]:
                dtype = _compute_dtype(self.graph.types[node.outputs[spec.output]].dtype)
                for k in _statement_reads(spec):
                    read = spec.reads[k]
                    if isinstance(read.source, str) or read.source >= len(node.inputs) or not node.inputs[read.source]:
                        continue
                    value, index = self.through_copies(node.inputs[read.source], tuple(read.index))
                    shape = self.graph.types[value].shape
                    takes = not (read.is_indirect() or _used_as_index(spec, k) or _at_own_point(spec, index, shape))
                    readers.setdefault(value, []).append((node.name, takes, self.graph.types[value].dtype == dtype))
        chosen: set[str] = set()
        for node in reversed(self.nodes):
            if node.name in self.copies or not _recomputable(self.graph, node, specs[node.name], self.outputs):
                continue
            reads = readers.get(node.outputs[0], [])
            if reads and all(same_dtype and (reader in chosen or takes) for reader, takes, same_dtype in reads):
                chosen.add(node.name)
        return chosen

    def expand(self, reads: list[Access], expr: sp.Expr, fresh) -> tuple[list[Access], sp.Expr]:
        """Reads of inlined values replaced by their producers' loads and expressions."""
        loads = []
        for a in reads:
            if isinstance(a, _Recomputed):
                inner_loads, inner = self.recompute(a, fresh)
                loads.extend(inner_loads)
                expr = substituted(expr, {a.vsym: inner})
            else:
                loads.append(a)
        return loads, expr

    def recompute(self, at: _Recomputed, fresh) -> tuple[list[Access], sp.Expr]:
        """The producer of ``at.value`` evaluated at ``at.index`` (reader dims), with fresh
        names (``fresh`` counts) for its loads. Where a padded read would fall outside its
        tensor the expression yields the pad (a conv pads with 0, never with relu(bn(0)))."""
        node, spec = self.inlined[at.value]
        point = {i_sym(j): e for j, e in enumerate(at.index)}
        needed = _needed_reads(spec, spec.body)
        names = {v_sym(k): v_sym(next(fresh)) for k in needed}
        reads = [_composed(self.read_access(node, spec, k, {}), point, names[v_sym(k)]) for k in needed]
        body = as_expr(spec.body).xreplace({**names, **point})
        reads, body = self.inline_scalars(reads, body)
        reads, body = self.expand(reads, body, fresh)
        if not at.guarded:
            return reads, body
        # the loads sit in the taken branch of a conditional, so they never leave the bounds
        pad = as_expr(at.pad if at.pad is not None else 0.0)
        return reads, sp.Piecewise((body, _inside(at)), (pad, True), evaluate=False)

    def inline_scalars(self, reads: list[Access], expr: sp.Expr) -> tuple[list[Access], sp.Expr]:
        """Reads of one-element constants become literals in the expression (no load, and
        the compiler can fold ``x * 0.5``). Not an integer one beside integer loads: literals
        print as doubles, and integer arithmetic in double is inexact past 2**53 (uint64 and
        int64 values), so it stays a load of its own C type."""
        kept = []
        for a in reads:
            constant = a.array is not None and a.array.role == "input" and a.array.value
            value = self.constants.get(constant) if constant else None
            used_in_index = any(a.vsym in as_expr(e).free_symbols for b in reads for e in b.index)
            beside_integers = value is not None and np.asarray(value).dtype.kind in "iu" \
                and any(_integer_array(b) for b in reads if b is not a)
            if value is None or np.size(value) != 1 or a.guarded or used_in_index or beside_integers:
                kept.append(a)
                continue
            v = np.asarray(value).reshape(-1)[0]
            is_float = is_float_dtype(np.asarray(value).dtype) or is_narrow_float(np.asarray(value).dtype)
            literal = sp.Float(float(v)) if is_float else sp.Integer(int(v))
            # not simplified: sympy's x * 0 = 0 and x / 0 = zoo are not IEEE (inf * 0 is NaN)
            expr = substituted(expr, {a.vsym: literal})
        return kept, expr

    def loads(self, node: Node, spec: Stmt, expr: sp.Expr, aux_arrays: dict, fresh) -> tuple[list[Access], sp.Expr]:
        """The loads of one statement computing ``expr``: one-element constants as literals,
        inlined producers expanded (with their own constants as literals)."""
        reads = [self.read_access(node, spec, k, aux_arrays) for k in _needed_reads(spec, expr)]
        reads, expr = self.inline_scalars(reads, as_expr(expr))
        return self.expand(reads, expr, fresh)

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
        write_index = tuple(as_expr(e) for e in spec.write_index)
        if len(write_index) != len(out.shape):
            raise CodegenError(f"node {node.name!r} ({node.op}): write index rank does not match its output")
        dtype = _compute_dtype(out.dtype)
        order = len(self.stmts)
        base = f"S{order}"
        out_extents = tuple(int(n) for n in spec.domain)
        # names for the loads of inlined producers, after the spec's own v0..v{n-1}
        fresh = itertools.count(len(spec.reads))
        if spec.reduce is None:
            reads, body = self.loads(node, spec, spec.body, aux_arrays, fresh)
            self.stmts.append(PolyStmt(base, "compute", node, order, out_extents, reads=reads,
                                       write=Access(out, write_index), expr=body, compute_dtype=dtype))
            return
        red_extents = tuple(int(n) for n in spec.reduce_extents)
        acc = self.new_array(out_extents, _accumulator_dtype(spec.reduce, out.dtype, dtype, spec.finalize is not None),
                             "acc")
        acc_at = Access(acc, tuple(i_sym(k) for k in range(len(out_extents))), ACC)
        start = _start(spec.reduce, out.dtype, empty=0 in red_extents)
        self.stmts.append(PolyStmt(base + "_init", "init", node, order, out_extents, write=acc_at,
                                   expr=start, acc=acc, compute_dtype=dtype))
        body = as_expr(spec.body)
        reads = [self.read_access(node, spec, k, aux_arrays) for k in _needed_reads(spec, body)]
        reads, body = self.inline_scalars(reads, body)
        constraints, kept = [], []
        dims = {d.name for d in (tuple(i_sym(k) for k in range(len(out_extents)))
                                 + tuple(r_sym(k) for k in range(len(red_extents))))}
        for a in reads:
            # a padded read whose pad leaves the accumulator unchanged: drop those iterations
            # from the domain instead of testing the bounds in the innermost loop (an inlined
            # producer is then evaluated in bounds only)
            if a.guarded and a.pad is not None and _pad_is_neutral(body, a.vsym, a.pad, spec.reduce):
                try:
                    constraints.append(guard_text(a, dims))
                    kept.append(dataclasses.replace(a, guard=(), cond=None, pad=None))
                    continue
                except NotAffine:
                    pass
            kept.append(a)
        kept, body = self.expand(kept, body, fresh)
        self.stmts.append(PolyStmt(base + "_update", "update", node, order, out_extents, red_extents,
                                   tuple(constraints), reads=kept + [acc_at], write=acc_at, expr=body,
                                   reduce=spec.reduce, acc=acc, compute_dtype=dtype))
        finalize = as_expr(spec.finalize) if spec.finalize is not None else ACC
        freads, finalize = self.loads(node, spec, finalize, aux_arrays, fresh)
        for a in freads:
            if any(s.name.startswith("r") for e in a.index for s in as_expr(e).free_symbols):
                raise CodegenError(f"node {node.name!r} ({node.op}): finalize reads depend on reduction indices")
        self.stmts.append(PolyStmt(base + "_final", "final", node, order, out_extents, reads=freads + [acc_at],
                                   write=Access(out, write_index), expr=finalize, acc=acc, compute_dtype=dtype))


def _pad_is_neutral(body: sp.Expr, vsym: sp.Symbol, pad: float, reduce: str) -> bool:
    value = sp.oo if pad == float("inf") else (-sp.oo if pad == float("-inf") else as_expr(pad))
    substituted = body.subs(vsym, value)
    if substituted == IDENTITY[reduce]:
        return True
    return bool(value.is_finite) and sp.simplify(substituted - IDENTITY[reduce]) == 0


def build_program(graph: Graph, names: list[str], registry=None, constants=None, *,
                  inline: bool = False) -> PolyProgram:
    """Statements, arrays and dependences of the group made of ``names``.

    ``constants``: values known at compile time (default: the graph's constants);
    one-element ones are inlined as literals. ``inline``: recompute the producers listed
    in the program's ``inlinable`` inside their readers (see the module docstring).
    """
    b = _Builder(graph, names, registry, constants, inline)
    b.build()
    # values a group output aliases (a view that is an output) still need their array
    for value in b.outputs:
        if value not in b.by_value:
            b.value_array(value)
    touched = {a.array.id for s in b.stmts for a in s.reads + [s.write]}
    arrays = [a for a in b.arrays if a.role != "input" or a.id in touched]
    prog = PolyProgram(graph, b.nodes, arrays, b.stmts, b.inputs, b.outputs, isl.Context(),
                       inlinable=tuple(b.inlinable), inlined=tuple(n.name for n, _ in b.inlined.values()),
                       registry=b.registry, constants=constants)
    return prog


def inline_producers(prog: PolyProgram) -> PolyProgram:
    """``prog`` built again with its ``inlinable`` producers recomputed inside their readers,
    so a group that loop fusion cannot contract (bn + relu before a conv) is one nest."""
    return build_program(prog.graph, [n.name for n in prog.nodes], prog.registry, prog.constants, inline=True)


# ----- dependences ---------------------------------------------------------------------


def domain_of(prog: PolyProgram, stmts=None) -> isl.UnionSet:
    """Union of the statements' iteration domains (each parsed once per program)."""
    stmts = prog.stmts if stmts is None else stmts
    cache = prog.__dict__.setdefault("_domains", {})
    for s in stmts:
        if s.name not in cache:
            cache[s.name] = isl.UnionSet.read_from_str(prog.ctx, "{ " + s.domain_text() + " }")
    return _union_all([cache[s.name] for s in stmts], isl.UnionSet.empty(isl.Space.params_alloc(prog.ctx, 0)))


def _union_all(parts: list, empty):
    """The union of ``parts``, joined pairwise in rounds: each union copies both operands,
    so adding one part at a time to a growing union was quadratic in the parts."""
    while len(parts) > 1:
        parts = [parts[k].union(parts[k + 1]) if k + 1 < len(parts) else parts[k] for k in range(0, len(parts), 2)]
    return parts[0] if parts else empty


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


def compute_dependences(prog: PolyProgram) -> dict[str, isl.UnionMap]:
    """Flow dependences of ``prog`` in its original order: "data", "acc" (through
    accumulators) and "acc_carried" (update to update)."""
    reads: dict[str, list[str]] = {"data": [], "acc": []}
    writes: dict[str, list[str]] = {"data": [], "acc": []}
    for s in prog.stmts:
        for a in s.reads:
            if a.array.role != "input":
                reads["acc" if a.array.role == "acc" else "data"].append(access_map_text(s, a))
        writes["acc" if s.write.array.role == "acc" else "data"].append(access_map_text(s, s.write))
    deps = {kind: flow_dependences(prog, _union_map(prog, reads[kind]).intersect_domain(prog.domain),
                                   _union_map(prog, writes[kind]).intersect_domain(prog.domain),
                                   accumulators=kind == "acc")
            for kind in ("data", "acc")}
    updates = domain_of(prog, [s for s in prog.stmts if s.kind == "update"])
    deps["acc_carried"] = deps["acc"].intersect_domain(updates).intersect_range(updates)
    return deps


def flow_dependences(prog: PolyProgram, reads: isl.UnionMap, writes: isl.UnionMap, *,
                     accumulators: bool) -> isl.UnionMap:
    """Flow dependences from ``writes`` to ``reads`` (statement instances to array elements)
    in the original order, for the questions asked of them: is each distance
    lexicographically positive in a schedule, is it zero along a loop of a legal one.

    isl's flow analysis (the last write before each read) cost densenet121 1.4 s of its 4.6 s
    of planning, nearly all of it on accumulators, and none of it is needed here:

    * a data array whose every element is written by one instance at most (each node's
      output, a concat's slices) has, for each read, exactly one write: the pairs of a
      write and a later read of the same element are the flow dependences themselves;
    * an accumulator is written by its init and every update and read by the next update
      and the final, so the write-then-read pairs are the transitive closure of its flow
      dependences, and both give the same answers to those questions.

    Data written twice is left to isl's flow analysis."""
    if accumulators or _written_once(writes):
        return _write_then_read(prog, reads, writes)
    flow = isl.UnionAccessInfo.from_sink(reads).set_must_source(writes).set_schedule_map(original_order(prog))
    return flow.compute_flow().get_must_dependence()


def _maps(union: isl.UnionMap) -> list[isl.Map]:
    found = union.get_map_list()
    return [found.get_at(k) for k in range(found.n_map())]


def _written_once(writes: isl.UnionMap) -> bool:
    """Is every array element the image of one statement instance at most?"""
    ranges: dict[str, list[isl.Set]] = {}
    for m in _maps(writes):
        if not m.is_injective():
            return False
        ranges.setdefault(m.get_tuple_name(isl.dim_type.out), []).append(m.range())
    return all(_pairwise_disjoint(sets) for sets in ranges.values())


def _pairwise_disjoint(sets: list[isl.Set]) -> bool:
    """Do no two of ``sets`` share an element? Their bounding boxes are swept along one
    axis, so only sets whose boxes overlap are intersected: testing each set against the
    union of those before it cost a 5,000-input concat 22 s (quadratic in its slices)."""
    boxes = [_bounding_box(s) for s in sets]
    if any(box is False for box in boxes):
        return _disjoint_one_by_one(sets)
    kept = [k for k, box in enumerate(boxes) if box is not None]  # empty sets overlap nothing
    if not kept:
        return True
    axis = max(range(len(boxes[kept[0]])), key=lambda d: len({boxes[k][d][0] for k in kept}))
    open_boxes: list[int] = []
    for k in sorted(kept, key=lambda k: boxes[k][axis][0]):
        start = boxes[k][axis][0]
        open_boxes = [j for j in open_boxes if boxes[j][axis][1] >= start]
        for j in open_boxes:
            if _boxes_meet(boxes[j], boxes[k]) and not sets[j].intersect(sets[k]).is_empty():
                return False
        open_boxes.append(k)
    return True


def _bounding_box(s: isl.Set):
    """[(min, max)] per axis of ``s``; None when ``s`` is empty, False when unbounded."""
    if s.dim(isl.dim_type.set) == 0:  # a scalar: its one element, as one point on one axis
        return None if s.is_empty() else [(0, 0)]
    box = []
    for d in range(s.dim(isl.dim_type.set)):
        low, high = s.dim_min_val(d), s.dim_max_val(d)
        if low.is_nan() or high.is_nan():
            return None
        if not (low.is_int() and high.is_int()):
            return False
        box.append((low.to_python(), high.to_python()))
    return box


def _boxes_meet(a, b) -> bool:
    return all(lo_a <= hi_b and lo_b <= hi_a for (lo_a, hi_a), (lo_b, hi_b) in zip(a, b))


def _disjoint_one_by_one(sets: list[isl.Set]) -> bool:
    seen = None
    for s in sets:
        if seen is not None and not seen.intersect(s).is_empty():
            return False
        seen = s if seen is None else seen.union(s)
    return True


def _write_then_read(prog: PolyProgram, reads: isl.UnionMap, writes: isl.UnionMap) -> isl.UnionMap:
    """Pairs (writer, reader) of one element where the write comes first in the original
    order: statements run in turn, each over its box lexicographically."""
    position = {s.name: k for k, s in enumerate(prog.stmts)}
    kept = []
    for m in _maps(writes.apply_range(reads.reverse())):
        source, sink = position[m.get_tuple_name(isl.dim_type.in_)], position[m.get_tuple_name(isl.dim_type.out)]
        if source == sink:
            m = m.intersect(isl.Map.lex_lt(m.get_space().domain()))
        if source <= sink:
            kept.append(isl.UnionMap.from_map(m))
    return _union_all(kept, isl.UnionMap.empty(writes.get_space()))


__all__ = ["Access", "Array", "NotAffine", "PolyProgram", "PolyStmt", "build_program", "flow_dependences",
           "inline_producers", "isl_constraint", "isl_expr", "substituted"]
