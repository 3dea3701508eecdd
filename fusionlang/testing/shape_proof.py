"""Proofs for every rank and size: a rewrite or decomposition over elementwise ops,
reductions and transposes, proved without drawing a shape (issue 36 item 7; the bar
TensorRight set, POPL'25).

A tensor is modelled by its value at a symbolic index and its shape as a *join* of
shape atoms. Numpy broadcasting makes the shape of an elementwise result the least
upper bound of its operands' shapes in the "broadcasts to" order, and each operand is
read at its projection of the result's index, so

* a leaf (pattern variable, pattern literal, ``_``) is a real symbol read at the current
  index and a shape atom of its own (a pattern literal matches a constant of any shape);
  a leaf the guard pins to rank 0 (``rank(c) == 0``) adds no atom: it broadcasts into
  everything;
* an elementwise op is its scalar formula (the op's own access body, as
  :mod:`fusionlang.testing.symbolic` uses), its shape the union of its operands' atoms;
* a reduction is an uninterpreted function, keyed by its axes, keepdims and input
  shape, of its body; sums and means are normalized by linearity (terms split, factors
  that do not depend on the reduced index pulled out, the sum of such a factor is it
  times a positive count), nested reductions of one kind over literal axes merge into
  one over the union of their axes; a mean is a sum over its count;
* a transpose is an uninterpreted function keyed by its permutation (a literal one, the
  default reversal, or one the pattern binds, known by its name); two compose, the
  identity (the reversal twice, a bound perm the guard says is ``range(0, rank(x))``)
  vanishes, and an elementwise op of operands transposed alike is the transpose of the op.

Shapes are compared as joins: an atom is dropped from a union when it is below the
rest, by the guard's ``same_shape`` facts or because it is a keepdims reduction of the
rest. Values are compared with sympy over the reals.

Soundness first: the proof is over the reals (float32 overflow and cancellation stay
the sampled check's verdicts); every partial function (a divisor, a sqrt's or log's
argument, a non-integer power's base) must be shown inside its domain from the guard's
facts (``value(c) > 0``, ``value(c) != 0``) or the expression itself, else the rule is
"not proved"; sizes are taken positive (a mean is a sum over a positive count).
Anything this module cannot model makes the rule "not proved", with the reason
(``outside the fragment (op matmul)``). Nothing is parsed from text: the sympy objects
are built node by node.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp
from sympy.core.function import AppliedUndef

from fusionlang.lang import ast as A
from fusionlang.lang.patterns import PLit, POp, PVar
from fusionlang.ir.types import TensorType
from fusionlang.ops.access import broadcast_index, v_sym
from fusionlang.ops.registry import OpCall, OpRegistry
from fusionlang.testing.guardshapes import conjuncts
from fusionlang.testing.symbolic import call_attrs, infix_op, run_body, same_function, scalar_formula

REDUCTIONS = ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod")
#: reductions that are sums (linear in their body)
_LINEAR = ("reduce_sum", "reduce_mean")
#: sympy functions defined (and real) for every real argument
_TOTAL = (sp.exp, sp.sin, sp.cos, sp.tanh, sp.sinh, sp.cosh, sp.atan, sp.erf, sp.Abs, sp.Max, sp.Min, sp.sign,
          sp.floor, sp.ceiling, sp.Piecewise, sp.Heaviside)
#: what ``value(c) OP 0`` in a guard tells about the symbol of ``c``
_SIGNS = {">": {"positive": True}, ">=": {"nonnegative": True}, "<": {"negative": True},
          "<=": {"nonpositive": True}, "!=": {"nonzero": True}}

PROVED = "proved for all non-empty shapes over the reals"


class NotProved(Exception):
    """Why no proof for every shape is claimed."""


def _outside(op: str) -> NotProved:
    return NotProved(f"outside the fragment (op {op})")


@dataclass(frozen=True)
class ShapeProof:
    proved: bool
    #: why not (empty when proved)
    reason: str = ""

    def __str__(self) -> str:
        return PROVED if self.proved else f"not proved: {self.reason}"

    def to_dict(self) -> dict:
        return {"proved": self.proved, "note": str(self)}


@dataclass(frozen=True)
class Sym:
    """An attribute value the pattern binds but does not pin (``{axes=a}``)."""

    name: str


@dataclass(frozen=True)
class PermWord:
    """Bound perms applied one after the other (each known only by its name)."""

    names: tuple[str, ...]


@dataclass(frozen=True)
class Tensor:
    #: the value at the current (symbolic) index
    value: sp.Expr
    #: shape atoms whose broadcast join is the shape; empty for rank 0
    shape: frozenset


@dataclass(frozen=True)
class _Reduction:
    """What a reduction function symbol stands for."""

    kind: str
    axes: object  # "all", a sorted tuple of literal axes, or a Sym
    keepdims: object
    noop: object
    #: the atoms of the reduced input's shape
    source: frozenset

    @property
    def scalar(self) -> bool:
        """Is every element of the result the same value (all axes reduced)?"""
        return self.axes == "all"


@dataclass(frozen=True)
class _Guard:
    """What the guard's top-level conjuncts say, by variable name."""

    rank0: frozenset = frozenset()
    #: one-element tensors: their value does not depend on the index
    uniform: frozenset = frozenset()
    signs: tuple = ()
    same: tuple = ()
    #: (p, v) for ``perm(p, rank(v)) == range(0, rank(v))``
    identity_perms: tuple = ()


def read_guard(guard) -> _Guard:
    rank0: set[str] = set()
    uniform: set[str] = set()
    signs: list[tuple[str, str]] = []
    same: list[tuple[str, ...]] = []
    identities = []
    for part in conjuncts(guard):
        identity = _identity_perm(part)
        if identity is not None:
            identities.append(identity)
        elif isinstance(part, A.Call) and part.func.text == "same_shape":
            same.append(tuple(a.name for a in part.args if isinstance(a, A.Var)))
        elif isinstance(part, A.Call) and part.func.text == "is_scalar" and (name := _var_of(part)) is not None:
            uniform.add(name)
        elif isinstance(part, A.Compare):
            _read_compare(part, rank0, uniform, signs)
    return _Guard(frozenset(rank0), frozenset(uniform), tuple(signs), tuple(same), tuple(identities))


def _perm_of_rank(e) -> tuple[str, str] | None:
    """(p, v) for ``perm(p, rank(v))``, the perm a transpose by ``p`` of ``v`` applies."""
    if isinstance(e, A.Call) and e.func.text == "perm" and len(e.args) == 2 and isinstance(e.args[0], A.Var):
        rank = e.args[1]
        if isinstance(rank, A.Call) and rank.func.text == "rank" and (name := _var_of(rank)) is not None:
            return e.args[0].name, name
    return None


def _identity_perm(part) -> tuple[str, str] | None:
    """(p, v) for the conjunct ``perm(p, rank(v)) == range(0, rank(v))``."""
    if not (isinstance(part, A.Compare) and part.op == "=="):
        return None
    perm, whole = _perm_of_rank(part.left), part.right
    if perm is None or not (isinstance(whole, A.Call) and whole.func.text == "range" and len(whole.args) == 2):
        return None
    start, stop = whole.args
    if isinstance(start, A.Num) and start.value == 0 and isinstance(stop, A.Call) and stop.func.text == "rank" \
            and _var_of(stop) == perm[1]:
        return perm
    return None


def _var_of(call: A.Call) -> str | None:
    return call.args[0].name if call.args and isinstance(call.args[0], A.Var) else None


def _read_compare(part: A.Compare, rank0: set, uniform: set, signs: list) -> None:
    left, right = part.left, part.right
    if not (isinstance(left, A.Call) and isinstance(right, A.Num) and not isinstance(right.value, bool)):
        return
    name = _var_of(left)
    if name is None:
        return
    if left.func.text == "rank" and part.op == "==" and right.value == 0:
        rank0.add(name)
    elif left.func.text == "value":
        uniform.add(name)
        if right.value == 0 and part.op in _SIGNS:
            signs.append((name, part.op))


class _Builder:
    """Both sides of a rule as Tensors over shared symbols."""

    def __init__(self, registry: OpRegistry, guard: _Guard, facts: tuple = ()):
        self.registry = registry
        self.guard = guard
        self.facts = facts
        self.tensors: dict[str, Tensor] = {}
        self.statics: dict[str, object] = {}
        self.rests: dict[str, dict] = {}
        self.reductions: dict[str, _Reduction] = {}
        #: keepdims atoms, each below the join of its source's atoms
        self.premises: dict[str, frozenset] = {}
        #: transpose function name -> (perm, atoms of the input's shape)
        self.transposes: dict[str, tuple[object, frozenset]] = {}
        #: bound perm -> the pattern variable whose rank the transpose by it has
        self.perm_ranks: dict[str, str] = {}
        self.fresh = 0

    # ----- leaves ------------------------------------------------------------------------
    def leaf(self, name: str) -> Tensor:
        if name not in self.tensors:
            assumptions = {"real": True}
            for var, op in self.guard.signs:
                if var == name:
                    assumptions.update(_SIGNS[op])
            shape = frozenset() if name in self.guard.rank0 else frozenset({name})
            self.tensors[name] = Tensor(sp.Symbol(name, **assumptions), shape)
        return self.tensors[name]

    def anonymous(self, value: sp.Expr | None = None) -> Tensor:
        self.fresh += 1
        atom = f"_{self.fresh}"
        return Tensor(sp.Symbol(atom, real=True) if value is None else value, frozenset({atom}))

    def independent_symbol(self, symbol: sp.Symbol) -> bool:
        name = symbol.name
        return (name in self.guard.rank0 or name in self.guard.uniform or name.startswith("n[")
                or name.startswith("@"))

    # ----- shapes -------------------------------------------------------------------------
    def below(self, atom: str, rest: frozenset, seen: frozenset = frozenset()) -> bool:
        """Is ``atom`` below the join of ``rest`` (by keepdims premises and guard facts)?"""
        if atom in rest:
            return True
        if atom in seen:
            return False
        seen = seen | {atom}
        if atom in self.premises and all(self.below(a, rest, seen) for a in self.premises[atom]):
            return True
        for first, second in self.facts:
            for low, high in ((first, second), (second, first)):
                if atom in low and all(self.below(a, rest, seen) for a in high):
                    return True
        return False

    def canon(self, shape: frozenset) -> frozenset:
        """The representative of ``shape``'s join: its atoms without those below the
        others, or the smallest side of a guard fact with the same join."""
        least = self.minimal(shape)
        for side in (side for fact in self.facts for side in fact):
            other = self.minimal(side)
            if (len(other), self.key(other)) < (len(least), self.key(least)) and self.same_join(other, least):
                least = other
        return least

    def minimal(self, shape: frozenset) -> frozenset:
        atoms = set(shape)
        for atom in sorted(shape):
            if self.below(atom, frozenset(atoms - {atom})):
                atoms.discard(atom)
        return frozenset(atoms)

    def same_join(self, first: frozenset, second: frozenset) -> bool:
        return all(self.below(a, second) for a in first) and all(self.below(a, first) for a in second)

    @staticmethod
    def key(shape: frozenset) -> str:
        return "{" + ",".join(sorted(shape)) + "}"

    # ----- elementwise ops ----------------------------------------------------------------
    def elementwise(self, op: str, operands: list[Tensor], attrs: dict) -> Tensor:
        formula = scalar_formula(self.registry, op, len(operands), attrs)
        if formula is None or not broadcasts_elementwise(self.registry, op, len(operands)):
            raise _outside(op)
        common = self.common_transpose(operands)
        if common is not None:
            # f(T(a), T(b)) is T(f(a, b)): the same perm of the same shape on every operand
            perm, source = common
            inner = [t.value.args[0] if t.shape else t.value for t in operands]
            binding = {v_sym(k): value for k, value in enumerate(inner)}
            _require_domain(op, formula, binding)
            return self.make_transpose(formula.xreplace(binding), source, perm)
        binding = {v_sym(k): t.value for k, t in enumerate(operands)}
        _require_domain(op, formula, binding)
        shape = frozenset().union(*(t.shape for t in operands))
        return Tensor(formula.xreplace(binding), self.canon(shape))

    def common_transpose(self, operands: list[Tensor]):
        """(perm, input shape) when every operand but rank-0 ones is a transpose by one
        perm of one shape, else None."""
        found = set()
        for t in operands:
            if not t.shape:
                continue  # rank 0: the same value at every index, transposed or not
            spec = self.transposes.get(t.value.func.__name__) if isinstance(t.value, AppliedUndef) else None
            if spec is None or self.canon(t.shape) != frozenset({_transpose_atom(spec[0], spec[1], self.key)}):
                return None
            found.add((_show(spec[0]), spec))
        return next(iter(found))[1] if len(found) == 1 else None

    # ----- reductions -----------------------------------------------------------------------
    def reduce(self, op: str, x: Tensor, attrs: dict) -> Tensor:
        axes, keepdims, noop = attrs["axes"], attrs["keepdims"], attrs["noop_with_empty_axes"]
        if axes == () and noop == 1:
            return x  # ONNX: reducing no axis is the identity
        if axes == () and noop != 0:
            raise NotProved(f"{op} of no listed axis: all axes or none, by an unknown noop_with_empty_axes")
        if axes == ():
            axes = "all"
        elif isinstance(axes, tuple):
            axes = _literal_axes(axes)
        # noop_with_empty_axes only says what an empty axes list means
        spec = _Reduction(op, axes, keepdims, noop if isinstance(axes, Sym) else 0, self.canon(x.shape))
        body = x.value
        merged = self.merge(spec, body)
        if merged is not None:
            spec, body = merged
        value = self.reduce_value(spec, body)
        if spec.scalar and keepdims == 0:
            return Tensor(value, frozenset())
        atom = self.atom(spec)
        if keepdims == 1:
            self.premises[atom] = spec.source
        return Tensor(value, frozenset({atom}))

    def atom(self, spec: _Reduction) -> str:
        """The shape atom of a reduction's result."""
        return f"reduce({_show(spec.axes)};{_show(spec.keepdims)};{_show(spec.noop)};{self.key(spec.source)})"

    def reduce_value(self, spec: _Reduction, body: sp.Expr) -> sp.Expr:
        if spec.kind not in _LINEAR:
            return self.nonlinear(spec, body)
        total = sp.Integer(0)
        for term in sp.Add.make_args(sp.expand_mul(body)):
            factors = sp.Mul.make_args(term)
            outside = sp.Mul(*[f for f in factors if self.independent(f, spec)])
            inside = sp.Mul(*[f for f in factors if not self.independent(f, spec)])
            total += outside * (self.count(spec) if inside == 1 else self.apply(spec, inside))
        return total / self.count(spec) if spec.kind == "reduce_mean" else total

    def nonlinear(self, spec: _Reduction, body: sp.Expr) -> sp.Expr:
        if self.independent(body, spec):
            if spec.kind == "reduce_prod":
                return body ** self.count(spec)
            return body  # the max (min) of copies of one value, over a positive count
        return self.apply(spec, body)

    def count(self, spec: _Reduction) -> sp.Symbol:
        """The number of elements one output element reduces (positive: sizes are)."""
        name = f"n[{_show(spec.axes)};{_show(spec.noop)};{self.key(spec.source)}]"
        return sp.Symbol(name, positive=True, integer=True)

    def apply(self, spec: _Reduction, body: sp.Expr) -> sp.Expr:
        kind = "sum" if spec.kind in _LINEAR else spec.kind
        name = f"{kind}[{_show(spec.axes)};{_show(spec.keepdims)};{_show(spec.noop)};{self.key(spec.source)}]"
        self.reductions[name] = spec
        # a reduction of positive (nonnegative) values over a positive count is one too
        sign = {"positive": True} if body.is_positive else {"nonnegative": True} if body.is_nonnegative else {}
        return sp.Function(name, real=True, **sign)(body)

    def merge(self, outer: _Reduction, body: sp.Expr):
        """A reduction of a reduction of the same kind (the outer one reading exactly the
        inner one's result) is one reduction over both axis sets, when they are literal."""
        if not isinstance(body, AppliedUndef) or body.func.__name__ not in self.reductions:
            return None
        inner = self.reductions[body.func.__name__]
        # a linear reduction's function is the plain sum (a mean divides it by its count
        # outside); a mean of sums is not the mean over both axis sets
        same_kind = (outer.kind == "reduce_sum" and inner.kind in _LINEAR) or \
            (outer.kind not in _LINEAR and inner.kind == outer.kind)
        if not same_kind or inner.keepdims != outer.keepdims or inner.keepdims not in (0, 1):
            return None
        if outer.source != frozenset({self.atom(inner)}):
            return None  # the outer one reads other operands too
        axes = _union_axes(inner.axes, outer.axes, inner.keepdims)
        if axes is None:
            return None
        return _Reduction(outer.kind, axes, inner.keepdims, 0, inner.source), body.args[0]

    def independent(self, expr: sp.Expr, spec: _Reduction) -> bool:
        """Is ``expr`` the same at every index the reduction ``spec`` runs over?"""
        if isinstance(expr, AppliedUndef):
            inner = self.reductions.get(expr.func.__name__)
            return inner is not None and _constant_along(inner, spec)
        if isinstance(expr, sp.Symbol):
            return self.independent_symbol(expr)
        return all(self.independent(arg, spec) for arg in expr.args)

    # ----- transposes -------------------------------------------------------------------------
    def transpose(self, x: Tensor, perm) -> Tensor:
        if isinstance(perm, Sym):
            perm = self.bound_perm(perm.name)
        elif not isinstance(perm, (tuple, PermWord)):
            raise NotProved("a transpose perm that is not a list")
        elif isinstance(perm, tuple) and sorted(perm) != list(range(len(perm))):
            raise NotProved(f"transpose perm {list(perm)} is not a permutation")
        if perm == ():
            perm = "reverse"  # ONNX's default reverses the axes, whatever the rank
        inner = self.transposes.get(x.value.func.__name__) if isinstance(x.value, AppliedUndef) else None
        if inner is not None and self.canon(x.shape) == frozenset({_transpose_atom(inner[0], inner[1], self.key)}):
            composed = _compose(inner[0], perm)
            if composed is None:
                raise NotProved("transposes of different ranks composed")
            return self.make_transpose(x.value.args[0], inner[1], composed)
        return self.make_transpose(x.value, self.canon(x.shape), perm)

    def bound_perm(self, name: str):
        """The perm a pattern bound (``{perm=p}``): the identity where the guard says so
        of the very tensor it transposes, else a permutation known only by its name."""
        if (name, self.perm_ranks.get(name)) in self.guard.identity_perms:
            return "identity"
        return PermWord((name,))

    def make_transpose(self, body: sp.Expr, source: frozenset, perm) -> Tensor:
        if perm == "identity" or perm == PermWord(()) or (isinstance(perm, tuple) and perm == tuple(range(len(perm)))):
            return Tensor(body, source)
        name = f"transpose[{_show(perm)};{self.key(source)}]"
        self.transposes[name] = (perm, source)
        return Tensor(sp.Function(name, real=True)(body), frozenset({_transpose_atom(perm, source, self.key)}))

    # ----- the pattern ----------------------------------------------------------------------
    def pattern(self, p) -> Tensor:
        if isinstance(p, PVar):
            return self.anonymous() if p.anonymous else self.leaf(p.name)
        if isinstance(p, PLit):
            return self.anonymous(_number(p.value))
        if not isinstance(p, POp):
            raise NotProved(f"pattern node {type(p).__name__}")
        pinned = {}
        for attr in p.attrs:
            if attr.kind == "lit":
                pinned[attr.name] = attr.value
            else:
                pinned[attr.name] = self.statics.setdefault(attr.value, Sym(attr.value))
                if p.op == "transpose" and (witness := _rank_witness(p.operands[0])) is not None:
                    self.perm_ranks[attr.value] = witness
        attrs = self.open_attrs(p.op, pinned, p.rest)
        value = self.op(p.op, [self.pattern(o) for o in p.operands], attrs)
        if p.bind is not None:
            self.tensors[p.bind] = value
        return value

    def open_attrs(self, op: str, pinned: dict, rest: str | None) -> dict:
        """Every attribute of ``op``: pinned ones, the others bound but unknown (a pattern
        matches every value of an attribute it does not pin)."""
        opdef = self.registry.lookup(op)
        if opdef is None:
            raise _outside(op)
        attrs, spread = {}, {}
        for name in opdef.attrs:
            if name in pinned:
                attrs[name] = pinned[name]
            else:
                self.fresh += 1
                attrs[name] = spread[name] = Sym(f"{op}.{name}#{self.fresh}")
        if rest is not None:
            self.rests[rest] = spread
        return attrs

    def op(self, op: str, operands: list[Tensor], attrs: dict) -> Tensor:
        if op in REDUCTIONS and len(operands) == 1:
            return self.reduce(op, operands[0], attrs)
        if op == "transpose" and len(operands) == 1:
            return self.transpose(operands[0], attrs["perm"])
        return self.elementwise(op, operands, {k: _scalar_attr(v) for k, v in attrs.items()})

    # ----- replacements and bodies --------------------------------------------------------------
    def expr(self, e, env: dict) -> Tensor:
        if isinstance(e, A.Num) and not isinstance(e.value, bool):
            return Tensor(_number(e.value), frozenset())
        if isinstance(e, A.Var):
            return self.var(e.name, env)
        operator = infix_op(e)
        if operator is not None:
            return self.op(operator[0], [self.expr(o, env) for o in operator[1]], {})
        if isinstance(e, A.Call):
            return self.call(e, env)
        raise NotProved(f"a {type(e).__name__} expression")

    def var(self, name: str, env: dict) -> Tensor:
        value = env.get(name)
        if isinstance(value, Tensor):
            return value
        if isinstance(value, Sym):
            # a bound attribute used as an operand: one number, the same at every index
            return Tensor(sp.Symbol("@" + value.name, real=True), frozenset())
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return Tensor(_number(value), frozenset())
        raise NotProved(f"{name!r} is not a tensor here")

    def call(self, e: A.Call, env: dict) -> Tensor:
        op = e.func.text
        opdef = self.registry.lookup(op)
        if opdef is None:
            raise _outside(op)
        try:
            attrs = call_attrs(opdef, e, self.rests, lambda v: self.static(v, env))
        except LookupError as exc:
            raise NotProved(f"{op} needs attribute {exc.args[0]!r}") from None
        return self.op(op, [self.expr(a, env) for a in e.args], attrs)

    def static(self, e, env: dict):
        """An attribute value of the replacement: a literal, a bound attribute, or the
        perm functions over bound perms (``compose(perm(p, rank(x)), perm(q, rank(x)))``)."""
        if isinstance(e, (A.Num, A.Str)):
            return e.value
        if isinstance(e, A.Neg) and isinstance(e.operand, A.Num):
            return -e.operand.value
        if isinstance(e, A.ListE):
            return tuple(self.static(item, env) for item in e.items)
        if isinstance(e, A.Var) and isinstance(env.get(e.name), Sym):
            return env[e.name]
        perm = _perm_of_rank(e)
        if perm is not None and isinstance(env.get(perm[0]), Sym) and self.perm_ranks.get(perm[0]) == perm[1]:
            return self.bound_perm(perm[0])
        if isinstance(e, A.Call) and e.func.text == "compose" and len(e.args) == 2:
            composed = _compose(self.static(e.args[0], env), self.static(e.args[1], env))
            if composed is not None:
                return composed
        raise NotProved("an attribute value computed from shapes or bound values")

    def body(self, stmts, env: dict) -> Tensor:
        values = run_body(stmts, env, self.expr, NotProved)
        if len(values) != 1:
            raise NotProved("a multi-output decomposition")
        return values[0]


def broadcasts_elementwise(registry: OpRegistry, op: str, n_inputs: int) -> bool:
    """Does ``op`` read each input at its numpy-broadcast projection of the output index
    (and broadcast every way)? Its scalar formula alone does not say: on rank-0 operands
    a reshape or a slice looks elementwise too. Probed on small shapes."""
    opdef = registry.lookup(op)
    if opdef is None or opdef.access is None or opdef.compound or n_inputs < 1:
        return False
    try:
        attrs = opdef.normalize_attrs({}, op)
    except Exception:  # an op with required attributes: not one of ours
        return False
    full: tuple[int, ...] = (2, 3)
    row: tuple[int, ...] = (3,)
    column: tuple[int, ...] = (2, 1)
    one_row: tuple[int, ...] = (1, 3)
    probes: list[list[tuple[int, ...]]] = [[full] * n_inputs, [row] + [full] * (n_inputs - 1)]
    if n_inputs > 1:
        probes.append([full] + [row] * (n_inputs - 1))
        probes.append([column] + [one_row] * (n_inputs - 1))
    return all(_probe(opdef, op, attrs, shapes) for shapes in probes)


def _probe(opdef, op: str, attrs: dict, shapes: list) -> bool:
    for dtype in ("float32", "bool"):
        types = [TensorType(shape, dtype if k == 0 else "float32") for k, shape in enumerate(shapes)]
        try:
            call = OpCall(op, op, dict(attrs), list(types))
            call.out_types = opdef.infer(call)
            stmts = opdef.access(call)
        except Exception:  # this probe's dtypes or shapes are not the op's: try the next dtypes
            continue
        out = call.out_types[0].shape
        rank = max(len(shape) for shape in shapes)
        expected = tuple(max(shape[k - rank + len(shape)] if k - rank + len(shape) >= 0 else 1 for shape in shapes)
                         for k in range(rank))
        return (len(stmts) == 1 and out == expected and stmts[0].reduce is None and stmts[0].domain == out
                and [r.index for r in stmts[0].reads] == [broadcast_index(t.shape, rank) for t in types])
    return False


def _number(value) -> sp.Expr:
    return sp.Integer(value) if isinstance(value, int) else sp.Float(value)


def _show(value) -> str:
    if isinstance(value, Sym):
        return "$" + value.name
    if isinstance(value, tuple):
        return "[" + ",".join(str(v) for v in value) + "]"
    if isinstance(value, PermWord):
        return "$" + ".".join(value.names)
    return str(value)


def _scalar_attr(value):
    """An attribute value as an elementwise formula takes it (a bound one is a symbol)."""
    if isinstance(value, Sym):
        return sp.Symbol("@" + value.name, real=True)
    return value


def _rank_witness(p) -> str | None:
    """A pattern variable with the rank of pattern node ``p`` (transposes keep it)."""
    if isinstance(p, PVar) and not p.anonymous:
        return p.name
    if isinstance(p, POp) and p.op == "transpose" and p.operands:
        return _rank_witness(p.operands[0])
    return None


def _literal_axes(axes: tuple) -> tuple:
    if not all(isinstance(a, int) for a in axes):
        raise NotProved(f"axes {list(axes)} are not integers")
    if len(set(axes)) != len(axes):
        raise NotProved(f"axes {list(axes)} repeat an axis")
    if not (all(a < 0 for a in axes) or all(a >= 0 for a in axes)):
        # which axes -1 and 0 name depends on the rank
        raise NotProved(f"axes {list(axes)} mix negative and non-negative axes")
    return tuple(sorted(axes))


def _constant_along(inner: _Reduction, outer: _Reduction) -> bool:
    """Is the result of ``inner`` (read broadcast) the same at every index ``outer``
    reduces over? Yes when inner reduced all axes, or kept as size 1 every (negative,
    so right-aligned the same) axis outer reduces."""
    if inner.scalar and inner.keepdims in (0, 1):
        return True
    if inner.keepdims != 1 or not isinstance(inner.axes, tuple) or not isinstance(outer.axes, tuple):
        return False
    return all(a < 0 for a in inner.axes) and set(outer.axes) <= set(inner.axes)


def _union_axes(inner, outer, keepdims: int):
    """The axes of the input two nested reductions reduce, or None when that depends on
    the rank."""
    if outer == "all":
        return "all"
    if not isinstance(inner, tuple) or not isinstance(outer, tuple):
        return None
    negative = all(a < 0 for a in inner)
    if any((a < 0) != negative for a in outer):
        return None
    if keepdims == 1:
        return tuple(sorted(set(inner) | set(outer)))
    # without keepdims the outer axes number the axes inner left, from its side
    step = -1 if negative else 1
    start = -1 if negative else 0
    left: list[int] = []
    position = start
    while len(left) < max(abs(a) for a in outer) + 1:
        if position not in inner:
            left.append(position)
        position += step
    mapped = [left[abs(a) - 1] if negative else left[a] for a in outer]
    return tuple(sorted(set(inner) | set(mapped)))


def _transpose_atom(perm, source: frozenset, key) -> str:
    return f"transpose({_show(perm)};{key(source)})"


def _compose(first, second):
    """``transpose(transpose(x){perm=first}){perm=second}`` as one perm ("reverse" is
    ONNX's default, "identity" what two of them make at any rank), or None."""
    if first == "identity" or second == "identity":
        return second if first == "identity" else first
    if isinstance(first, PermWord) and isinstance(second, PermWord):
        return PermWord(first.names + second.names)
    if isinstance(first, PermWord) or isinstance(second, PermWord):
        return None  # a bound perm and a literal one: their product is not known
    if first == "reverse" and second == "reverse":
        return "identity"
    rank = len(second if first == "reverse" else first)
    first = tuple(reversed(range(rank))) if first == "reverse" else first
    second = tuple(reversed(range(rank))) if second == "reverse" else second
    if len(first) != len(second):
        return None
    return tuple(first[k] for k in second)


def _require_domain(op: str, formula: sp.Expr, binding: dict) -> None:
    """Every partial function in ``op``'s formula gets an argument inside its domain, as
    the operands and the guard's facts show; checked before sympy's own simplification
    can cancel it (``x * c / c`` is ``x`` to sympy, NaN at c = 0)."""
    for node in sp.preorder_traversal(formula):
        if isinstance(node, sp.Pow):
            _require_power(op, node, binding)
        elif isinstance(node, sp.log):
            _require(op, node.args[0].xreplace(binding), "positive")
        elif isinstance(node, sp.Function) and not isinstance(node, _TOTAL) and type(node).__name__ != "Sigmoid":
            raise NotProved(f"{op} ({type(node).__name__}) is not defined for every real input")


def _require_power(op: str, node: sp.Pow, binding: dict) -> None:
    base, exponent = node.base.xreplace(binding), node.exp.xreplace(binding)
    if exponent.is_Integer:
        if exponent < 0:
            _require(op, base, "nonzero")
        return
    if exponent.is_Rational and exponent.free_symbols == set():
        _require(op, base, "nonnegative" if exponent > 0 else "positive")
        return
    _require(op, base, "positive")


def _require(op: str, value: sp.Expr, condition: str) -> None:
    if getattr(value, f"is_{condition}") is not True:
        raise NotProved(f"{op} needs {value} {condition}, which is not known")


# ----- proofs ---------------------------------------------------------------------------------


def prove_rewrite_all_shapes(rule, registry: OpRegistry) -> ShapeProof:
    """Prove a rewrite for every rank and size, or say why not."""
    guard = read_guard(rule.guard)
    try:
        builder = _with_facts(registry, guard, lambda b: b.pattern(rule.compiled))
        lhs = builder.pattern(rule.compiled)
        env = {**builder.statics, **builder.tensors}
        rhs = builder.expr(rule.replacement, env)
        if _is_static(rule.replacement, env):
            rhs = Tensor(rhs.value, lhs.shape)  # a constant replacement takes the matched node's shape
        return _compare(builder, lhs, rhs)
    except NotProved as exc:
        return ShapeProof(False, str(exc))
    except Exception as exc:  # sympy or an op's formula on symbols: the proof is an extra, never a crash of check
        return _unmodelled(exc)


def prove_decomposition_all_shapes(case, registry: OpRegistry) -> ShapeProof:
    """Prove a decomposition case for every rank and size, or say why not."""
    builder = _Builder(registry, _Guard())
    try:
        args = [builder.leaf(p) for p in case.params]
        pinned = dict(case.requires)
        for attr, var in case.binds:
            pinned[attr] = builder.statics[var] = Sym(var)
        lhs = builder.op(case.op, args, builder.open_attrs(case.op, pinned, None))
        env = {**builder.statics, **dict(zip(case.params, args))}
        return _compare(builder, lhs, builder.body(case.body, env))
    except NotProved as exc:
        return ShapeProof(False, str(exc))
    except Exception as exc:  # as in prove_rewrite_all_shapes
        return _unmodelled(exc)


def _unmodelled(exc: Exception) -> ShapeProof:
    return ShapeProof(False, f"the prover could not model the rule ({type(exc).__name__}: {exc})")


def _with_facts(registry: OpRegistry, guard: _Guard, build, passes: int = 2) -> _Builder:
    """A builder that knows the guard's ``same_shape`` facts: the shapes of bound names
    are only known once the pattern is built, so it is built (with the facts found so
    far) ``passes`` times."""
    facts: tuple = ()
    for _ in range(passes):
        builder = _Builder(registry, guard, facts)
        build(builder)
        found: list[tuple[frozenset, frozenset]] = []
        for group in guard.same:
            shapes = [builder.tensors[name].shape for name in group if name in builder.tensors]
            found.extend((shapes[0], other) for other in shapes[1:])
        facts = tuple(dict.fromkeys(facts + tuple(found)))
    return _Builder(registry, guard, facts)


def _is_static(e, env: dict) -> bool:
    """Does the replacement name no tensor (it is folded into one constant)?"""
    return not any(isinstance(sub, A.Call) or (isinstance(sub, A.Var) and isinstance(env.get(sub.name), Tensor))
                   for sub in A.walk(e))


def _compare(builder: _Builder, lhs: Tensor, rhs: Tensor) -> ShapeProof:
    left, right = builder.canon(lhs.shape), builder.canon(rhs.shape)
    if left != right:
        raise NotProved(f"the shapes may differ (the broadcast of {builder.key(left)} against that of "
                        f"{builder.key(right)})")
    proved, closed = same_function(lhs.value, rhs.value)
    if not proved:
        raise NotProved("sympy could not show the values equal")
    if closed:
        # 0.7071067811865476 is not sqrt(2)/2: equal only after reading it so is no proof
        raise NotProved("equal only with decimal constants read as the closed forms they round")
    return ShapeProof(True)


__all__ = ["PROVED", "REDUCTIONS", "ShapeProof", "prove_decomposition_all_shapes", "prove_rewrite_all_shapes"]
