"""Instances of rules: small graphs on which a rule fires, and both sides evaluated.

For a rewrite, the pattern is built bottom-up into a graph (sub-patterns first, then
the op above them, its fresh operands typed by :mod:`fusionlang.testing.opgen`), with
graph inputs or constants at the leaves: constants where the guard asks for them
(``const(w)``, ``value(c)``, ``all_equal(c, v)``) and at numeric literals, either
elsewhere. Operands of commutative ops are built in either order, since the matcher
tries both. The real matcher must then accept the graph (pattern, one-use and guard);
if it does not, the draw is rejected, not counted. The left side is the reference
interpreter on that graph; the right side is the same graph after the engine's own
``apply_match`` fired the rule at the root (so folding, splicing and naming are what
production does), run by the same interpreter.

A decomposition case is checked on one node of its op, drawn with the attributes the
case requires, opened by the engine's ``open_node``.

Every value is drawn by hypothesis (shapes, attributes, array elements), so a failure
shrinks to small shapes and simple numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, cast

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fusionlang.engine.match import Match, Matcher
from fusionlang.engine.passes import open_node
from fusionlang.engine.rewrite import apply_match, applicable
from fusionlang.engine.rewrite_index import GraphIndex
from fusionlang.engine.rewrite_trace import Recorder
from fusionlang.errors import FuseError
from fusionlang.ir.graph import Graph
from fusionlang.ir.types import TensorType
from fusionlang.lang import ast as A
from fusionlang.lang.patterns import PLit, POp, PVar
from fusionlang.ops.builder import GraphBuilder
from fusionlang.ops.checking import verify_graph
from fusionlang.ops.interpreter import run
from fusionlang.testing.coverage import broadcast_class
from fusionlang.testing.guardattrs import PROPOSALS_PER_NODE, attr_demands, solve
from fusionlang.testing.guardshapes import ShapeDemands, conjuncts, shape_demands, shape_for
from fusionlang.testing.opgen import Draw, NoProposal, propose
from fusionlang.testing.values import REAL, Domain, Mismatch, compare, input_domains, magnitude


class Reject(Exception):
    """This draw is not an instance of the rule (the pattern or guard does not hold, the
    types do not fit, the left side is not finite); hypothesis draws again."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class Leaf:
    #: pattern variable, or "" for a literal or "_"
    var: str
    value: str
    kind: str  # "input" or "const"
    ttype: TensorType
    #: every element equals this (pattern literals)
    fill: float | None = None


@dataclass
class Counterexample:
    """A shrunk instance on which the two sides of a rule differ."""

    rule: str
    where: str
    message: str
    leaves: list[tuple[Leaf, np.ndarray]] = field(default_factory=list)
    #: (node name, op, attributes) of the instance graph, in order
    nodes: list[tuple[str, str, dict]] = field(default_factory=list)
    expected: np.ndarray | None = None
    actual: np.ndarray | None = None
    #: what the two sides are called ("pattern"/"replacement", "op"/"decomposition")
    sides: tuple[str, str] = ("pattern", "replacement")

    def __str__(self) -> str:
        return f"{self.where}: {self.rule}: " + self.details()

    def details(self) -> str:
        """The message, then the instance: leaves with their values, nodes with their
        attributes, and both sides' values."""
        lines = [self.message]
        for leaf, array in self.leaves:
            label = leaf.var or ("literal" if leaf.fill is not None else "_")
            lines.append(f"    {label} = {leaf.kind} {leaf.ttype} {_show(array)}")
        for name, op, attrs in self.nodes:
            shown = ", ".join(f"{k}={_show_attr(v)}" for k, v in attrs.items())
            lines.append(f"    node {name}: {op} {{{shown}}}")
        labels = [f"{side} side" for side in self.sides]
        width = max(len(label) for label in labels)
        for label, array in zip(labels, (self.expected, self.actual)):
            if array is not None:
                lines.append(f"    {label:<{width}} = {_show(array)}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "rule": self.rule, "where": self.where, "message": self.message,
            "leaves": [{"var": leaf.var, "value": leaf.value, "kind": leaf.kind, "type": str(leaf.ttype),
                        "array": np.asarray(array).tolist()} for leaf, array in self.leaves],
            "nodes": [{"name": n, "op": op, "attrs": {k: _show_attr(v) for k, v in attrs.items()}}
                      for n, op, attrs in self.nodes],
            "expected": None if self.expected is None else np.asarray(self.expected).tolist(),
            "actual": None if self.actual is None else np.asarray(self.actual).tolist(),
        }


def _show(array) -> str:
    array = np.asarray(array)
    return np.array2string(array, precision=5, threshold=48, separator=", ", max_line_width=100000)


def _show_attr(value) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(_show_attr(v) for v in value) + "]"
    if isinstance(value, np.ndarray):
        return _show(value)
    return repr(value) if isinstance(value, str) else str(value)


# ----- values ------------------------------------------------------------------------------


def _elements(dtype: np.dtype, domain: Domain, beyond: bool = False) -> st.SearchStrategy:
    """Elements of ``dtype`` in ``domain``; with ``beyond``, float elements of a positive or
    nonzero domain are also drawn outside it (negatives, zeros), where the op is still
    defined (NaN, inf) and a rewrite must give what it gives."""
    if dtype.kind == "b":
        return st.booleans()
    if domain.kind == "index":
        n = max(1, domain.bound)
        return st.integers(-n, n - 1)
    if dtype.kind in "iu":
        if domain.kind in ("positive",) or dtype.kind == "u":
            return st.integers(1 if domain.kind != "real" else 0, 4)
        if domain.kind == "nonzero":
            return st.integers(1, 4) | st.integers(-4, -1)
        return st.integers(-4, 4)
    width: Literal[16, 32, 64] = 16 if dtype == np.float16 else (32 if dtype == np.float32 else 64)
    real = st.floats(-2.0, 2.0, width=width, allow_subnormal=False)
    if domain.kind == "positive":
        inside = st.floats(0.5, 2.0, width=width)
    elif domain.kind == "nonzero":
        inside = st.floats(0.5, 2.0, width=width) | st.floats(-2.0, -0.5, width=width)
    else:
        return real
    return inside | real | st.sampled_from([0.0, -1.0]) if beyond else inside


def draw_array(draw: Draw, ttype: TensorType, domain: Domain = REAL, *, beyond: bool = False) -> np.ndarray:
    """An array of ``ttype`` whose elements hypothesis draws (and shrinks) one by one
    (``beyond``: see :func:`_elements`)."""
    dtype = np.dtype(ttype.dtype)
    return draw(hnp.arrays(dtype, ttype.shape, elements=_elements(dtype, domain, beyond)))


# ----- the guard's demands --------------------------------------------------------------------


def _guard_facts(guard) -> tuple[set[str], list[float]]:
    """(variables the guard needs to be constants, numbers it compares with)."""
    constants: set[str] = set()
    numbers: list[float] = []
    for e in A.walk(guard) if guard is not None else ():
        if isinstance(e, A.Call) and e.func.text in ("const", "value", "all_equal"):
            args = e.args[:1] if e.func.text in ("value", "all_equal") else e.args
            constants.update(a.name for a in args if isinstance(a, A.Var))
        elif isinstance(e, A.Num) and not isinstance(e.value, bool):
            numbers.append(e.value)
        elif isinstance(e, A.Neg) and isinstance(e.operand, A.Num):
            numbers.append(-e.operand.value)
    return constants, numbers


def _value_facts(guard) -> tuple[set[str], dict[str, float]]:
    """(variables the guard reads as one element, with ``value(v)`` or ``size(v) == 1``;
    the number each conjunct ``value(v) == N`` pins ``v`` to). Drawn so, not rejected: an
    RMSNorm written ``pow(x, c) ... where value(c) == 2`` got no instance at all."""
    one = {var for e in (A.walk(guard) if guard is not None else ()) if (var := _var_read(e, "value"))}
    pinned: dict[str, float] = {}
    for part in conjuncts(guard):
        if not (isinstance(part, A.Compare) and part.op == "=="):
            continue
        for side, other in ((part.left, part.right), (part.right, part.left)):
            number, valued, sized = _number(other), _var_read(side, "value"), _var_read(side, "size")
            if valued and number is not None:
                pinned[valued] = number
            if sized and number == 1:
                one.add(sized)
    return one, pinned


def _var_read(e, function: str) -> str | None:
    """``v`` where ``e`` is the static function ``function`` of tensor variable ``v`` (``value(c)``)."""
    if isinstance(e, A.Call) and e.func.text == function and len(e.args) == 1 and isinstance(e.args[0], A.Var):
        return e.args[0].name
    return None


def _number(e) -> float | None:
    if isinstance(e, A.Num) and not isinstance(e.value, bool):
        return e.value
    if isinstance(e, A.Neg) and isinstance(e.operand, A.Num) and not isinstance(e.operand.value, bool):
        return -e.operand.value
    return None


# ----- building a pattern --------------------------------------------------------------------


class _PatternBuilder:
    def __init__(self, draw: Draw, ruleset, constant_vars: set[str], demands: ShapeDemands | None = None,
                 guard=None):
        self.draw = draw
        self.demands = demands or ShapeDemands()
        #: `name @ pattern` variable -> the value it names
        self.bound: dict[str, str] = {}
        self.ruleset = ruleset
        self.builder = GraphBuilder("instance", registry=ruleset.registry)
        self.graph = self.builder.graph
        self.constant_vars = constant_vars
        self.vars: dict[str, str] = {}
        self.statics: dict[str, object] = {}
        self.leaves: list[Leaf] = []
        self.domains: dict[str, Domain] = {}
        self.attr_demands = attr_demands(guard)
        self.one_element, self.pinned = _value_facts(guard)

    def known_value(self, p) -> str | None:
        """The value a variable already names: a leaf drawn before, or a sub-pattern bound
        with ``name @`` (a pattern that reuses a bound value reads the one node built)."""
        if not isinstance(p, PVar) or p.anonymous:
            return None
        return self.vars.get(p.name, self.bound.get(p.name))

    def leaf(self, p, ttype: TensorType) -> str:
        known = self.known_value(p)
        if known is not None:
            return known
        name = f"{p.name}" if isinstance(p, PVar) and not p.anonymous else "lit" if isinstance(p, PLit) else "any"
        if isinstance(p, PLit):
            kind = "const"
        elif isinstance(p, PVar) and p.name in self.constant_vars:
            kind = "const"
        else:
            kind = self.draw(st.sampled_from(["input", "input", "input", "const"]))
        if kind == "input":
            value = self.graph.add_input(self.graph.fresh_name(name) if name in self.graph.types else name, ttype)
        else:
            value = self.builder.constant(np.zeros(ttype.shape, ttype.dtype), name=self.graph.fresh_name(name))
        fill = p.value if isinstance(p, PLit) else self.pinned.get(p.name) if isinstance(p, PVar) else None
        self.leaves.append(Leaf(p.name if isinstance(p, PVar) and not p.anonymous else "", value, kind, ttype, fill))
        if isinstance(p, PVar) and not p.anonymous:
            self.vars[p.name] = value
        return value

    def build(self, p) -> str:
        if not isinstance(p, POp):
            raise Reject("the pattern is a bare variable")
        n = len(p.operands)
        values: list[str | None] = [None] * n
        for k, q in enumerate(p.operands):
            if isinstance(q, POp):  # in written order: a value is bound before it is reused
                values[k] = self.build(q)
        for k, q in enumerate(p.operands):
            if values[k] is None:
                values[k] = self.known_value(q)
        fixed = {}
        for attr in p.attrs:
            if attr.kind == "lit":
                fixed[attr.name] = attr.value
            elif attr.value in self.statics:
                fixed[attr.name] = self.statics[attr.value]
        known = [self.graph.types[v] if v else None for v in values]
        proposal, fixed = self._propose(p, known, fixed)
        for k, q in enumerate(p.operands):
            if values[k] is None:
                values[k] = self.leaf(q, self._demanded_type(q, proposal.types[k]))
            domain = proposal.domains.get(k)
            if domain is not None:
                value = cast(str, values[k])  # (set just above)
                self.domains[value] = self.domains.get(value, REAL).merge(domain)
        attrs = {**proposal.attrs, **fixed}
        if n == 2 and self.ruleset.is_commutative(p.op) and self.draw(st.booleans()):
            values.reverse()
        try:
            out = self.builder.op(p.op, *values, **attrs)
        except FuseError as exc:
            raise Reject(f"{p.op}: {str(exc).splitlines()[0]}") from None
        node = self.graph.nodes[-1]
        for attr in p.attrs:
            if attr.kind == "var" and attr.value not in self.statics:
                self.statics[attr.value] = node.attrs.get(attr.name)
        out = out if isinstance(out, str) else out[0]
        if p.bind is not None:
            self.bound[p.bind] = out
        return out

    def _propose(self, p, known: list, fixed: dict):
        """A proposal for node ``p`` whose attributes meet the guard's conjuncts local to
        it (:mod:`fusionlang.testing.guardattrs`), and the attributes it pins."""
        attr_vars = {a.name: a.value for a in p.attrs if a.kind == "var" and a.value not in self.statics}
        decided = set(self.statics) | set(self.vars) | set(self.bound)
        local = self.attr_demands.local(attr_vars, decided)
        tensors = {**self.vars, **self.bound}
        for _ in range(PROPOSALS_PER_NODE if local else 1):
            try:
                proposal = propose(self.draw, self.ruleset.registry, p.op, len(p.operands), known, fixed)
            except NoProposal as exc:
                raise Reject(f"{p.op}: {exc}") from None
            attrs = {**proposal.attrs, **fixed}
            if solve(local, attrs, attr_vars, self.graph, tensors, self.statics):
                return proposal, {**fixed, **{name: attrs[name] for name in attr_vars if name in attrs}}
        raise Reject(f"{p.op}: no attributes drawn met the guard's conjuncts on them")

    def _demanded_type(self, p, proposed: TensorType) -> TensorType:
        """The proposed type of a fresh leaf, reshaped to meet the guard's shape demands
        (drawing for the guard rather than rejecting what misses it)."""
        if isinstance(p, PLit) and self.draw(st.integers(0, 3)) > 0:
            # a literal (`pow(x, 2)`) is most often written as a scalar constant: drawing it
            # in every shape that broadcasts made classes a rule's coverage never exhausted
            return TensorType((), proposed.dtype)
        if isinstance(p, PVar) and p.name in self.one_element and not self.demands.about(p.name):
            # one element, of a rank that mostly leaves the other operand's shape as it is
            # (a shape the guard demands, `is_scalar(c)`, is drawn as demanded below)
            rank = 0 if self.draw(st.integers(0, 3)) > 0 else self.draw(st.integers(0, proposed.rank))
            return TensorType((1,) * rank, proposed.dtype)
        if not isinstance(p, PVar) or p.anonymous or not self.demands.about(p.name):
            return proposed
        known = {var: self.graph.types[value] for var, value in {**self.vars, **self.bound}.items()}
        return shape_for(self.draw, p.name, proposed, self.demands, known)


@dataclass
class Instance:
    graph: Graph
    root: str
    leaves: list[Leaf]
    feeds: dict[str, np.ndarray]
    #: pattern variable (leaf or `name @`) -> value name
    variables: dict[str, str] = field(default_factory=dict)

    def leaf_arrays(self) -> list[tuple[Leaf, np.ndarray]]:
        return [(leaf, self.graph.constants[leaf.value] if leaf.kind == "const" else self.feeds[leaf.value])
                for leaf in self.leaves]

    def node_list(self) -> list[tuple[str, str, dict]]:
        return [(n.name, n.op, dict(n.attrs)) for n in self.graph.nodes]

    def shape_class(self, demands: ShapeDemands) -> tuple[tuple, tuple, tuple, tuple]:
        """(leaf shapes, variable ranks, broadcast class, relations of the dims the guard
        names: which are 1, which pairs are equal): what coverage counts (see
        :mod:`fusionlang.testing.coverage`)."""
        types = self.graph.types
        shapes = tuple((leaf.var, types[leaf.value].shape) for leaf in self.leaves)
        ranks = tuple(sorted((var, types[value].rank) for var, value in self.variables.items()))
        sizes = []
        for var, axis in demands.mentioned:
            shape = types[self.variables[var]].shape if var in self.variables else ()
            sizes.append(shape[axis] if -len(shape) <= axis < len(shape) else None)
        relations = tuple(("unit", k, size == 1) for k, size in enumerate(sizes) if size is not None) + \
            tuple(("equal", i, j, sizes[i] == sizes[j]) for i in range(len(sizes)) for j in range(i + 1, len(sizes))
                  if sizes[i] is not None and sizes[j] is not None)
        return shapes, ranks, broadcast_class(self.graph), relations


def _fill_values(draw: Draw, graph: Graph, leaves: list[Leaf], domains: dict[str, Domain],
                 numbers: list[float]) -> dict[str, np.ndarray]:
    """Draw every leaf's array (constants in place, inputs as feeds)."""
    found = input_domains(graph)
    for value, domain in domains.items():
        found[value] = found.get(value, REAL).merge(domain)
    feeds = {}
    interesting = sorted(set(numbers) | {0.0, 1.0})
    for leaf in leaves:
        dtype = np.dtype(leaf.ttype.dtype)
        if leaf.fill is not None:
            array = np.full(leaf.ttype.shape, leaf.fill).astype(dtype)
        elif leaf.kind == "const" and numbers and draw(st.integers(0, 3)) == 0:
            # a guard comparing with a number (all_equal(c, 1), value(c) == 0) needs that number
            array = np.full(leaf.ttype.shape, draw(st.sampled_from(interesting))).astype(dtype)
        else:
            # beyond the ops' domains: `sqrt(x) * sqrt(y) => sqrt(x * y)` holds for positives only
            array = draw_array(draw, leaf.ttype, found.get(leaf.value, REAL), beyond=True)
        if leaf.kind == "const":
            graph.constants[leaf.value] = np.require(array, requirements="C")
        else:
            feeds[leaf.value] = array
    return feeds


def rewrite_instance(draw: Draw, rule, ruleset) -> Instance:
    """A graph on which ``rule`` matches at its root node, with feeds (or Reject)."""
    constant_vars, numbers = _guard_facts(rule.guard)
    pb = _PatternBuilder(draw, ruleset, constant_vars, shape_demands(rule.guard), rule.guard)
    root_value = pb.build(rule.compiled)
    graph = pb.graph
    root = graph.nodes[-1]
    if isinstance(rule.replacement, A.Var):
        # the engine never renames a graph output to an input: read the root through one
        # more node, so a replacement that is a bare variable can fire
        root_value = pb.builder.op("identity", root_value, name="consumer")
    graph.outputs.append(root_value)
    feeds = _fill_values(draw, graph, pb.leaves, pb.domains, numbers)
    return Instance(graph, root.name, pb.leaves, feeds, {**pb.vars, **pb.bound})


def decompose_instance(draw: Draw, case, ruleset) -> Instance:
    """One node of the case's op with the attributes the case requires (or Reject)."""
    registry = ruleset.registry
    fixed = dict(case.requires)
    n = len(case.params)
    try:
        proposal = propose(draw, registry, case.op, n, [None] * n, fixed)
    except NoProposal as exc:
        raise Reject(f"{case.op}: {exc}") from None
    b = GraphBuilder("instance", registry=registry)
    leaves = []
    for name, ttype in zip(case.params, proposal.types):
        value = b.input(name, ttype.shape, ttype.dtype)
        leaves.append(Leaf(name, value, "input", ttype))
    try:
        out = b.op(case.op, *[leaf.value for leaf in leaves], **{**proposal.attrs, **fixed})
    except FuseError as exc:
        raise Reject(f"{case.op}: {str(exc).splitlines()[0]}") from None
    graph = b.graph
    node = graph.nodes[-1]
    if not case.applies(node):
        raise Reject("the case does not apply to the drawn node")
    graph.outputs.extend([out] if isinstance(out, str) else list(out))
    domains = {leaf.value: d for k, leaf in enumerate(leaves) if (d := proposal.domains.get(k)) is not None}
    feeds = _fill_values(draw, graph, leaves, domains, [])
    return Instance(graph, node.name, leaves, feeds, {leaf.var: leaf.value for leaf in leaves})


# ----- both sides ---------------------------------------------------------------------------


@dataclass
class Outcome:
    """Both sides of one instance: None mismatch when they agree."""

    mismatch: Mismatch | None
    expected: np.ndarray | None = None
    actual: np.ndarray | None = None


def _left_side(instance: Instance, registry, *, finite: bool = True) -> tuple[dict[str, np.ndarray], float]:
    graph = instance.graph
    try:
        with np.errstate(all="ignore"):
            values = run(graph, instance.feeds, registry, keep={v for n in graph.nodes for v in n.outputs})
    except FuseError as exc:
        raise Reject(f"the reference cannot run the instance: {str(exc).splitlines()[0]}") from None
    outputs = {name: values[name] for name in graph.outputs}
    for name, array in outputs.items():
        if finite and array.dtype.kind == "f" and not np.all(np.isfinite(array)) \
                and not _structurally_infinite(instance, registry, name, array):
            raise Reject("the pattern side is not finite on these values")
    scale = magnitude(list(values.values()) + list(instance.feeds.values()) + list(graph.constants.values()))
    return outputs, scale


def _structurally_infinite(instance: Instance, registry, name: str, array: np.ndarray) -> bool:
    """Are the pattern side's infinities and NaNs there in float64 too? Then they come from
    the ops themselves (a max over a window of padding alone is -inf), not from float32
    running out of range, and the rule must reproduce them: the instance is kept. An
    overflow (finite in float64) is rejected: rules are claimed over the reals, and the
    float32 verdict judges overflow separately."""
    again = wide_side(instance, registry, name)
    if again is None or again.shape != array.shape:
        return False
    odd = ~np.isfinite(array)
    same_inf = np.isinf(array) & (np.asarray(array, np.float64) == again)
    same_nan = np.isnan(array) & np.isnan(again)
    return bool(np.all((same_inf | same_nan)[odd]))


def wide_side(instance: Instance, registry, name: str | None = None) -> np.ndarray | None:
    """The pattern side's output ``name`` (default: the first) computed in float64 from the
    same float32 values: the reference float32 results are judged against. None where an
    op insists on float32."""
    try:
        wide = _widened(instance.graph)
        feeds = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in instance.feeds.items()}
        with np.errstate(all="ignore"):
            return np.asarray(run(wide, feeds, registry)[name or instance.graph.outputs[0]])
    except Exception:
        return None


def _widened(graph: Graph) -> Graph:
    """``graph`` with its float32 values and constants as float64."""
    wide = graph.copy()
    for value, t in list(wide.types.items()):
        if t.dtype == "float32":
            wide.types[value] = TensorType(t.shape, "float64")
    for value, c in list(wide.constants.items()):
        if c.dtype == np.float32:
            wide.constants[value] = c.astype(np.float64)
    return wide


def _right_side(graph: Graph, registry, feeds) -> tuple[dict[str, np.ndarray] | None, str]:
    try:
        verify_graph(graph, registry)
        with np.errstate(all="ignore"):
            return run(graph, feeds, registry), ""
    except FuseError as exc:
        return None, f"the rewritten graph is invalid: {str(exc).splitlines()[0]}"


def _compare_outputs(instance: Instance, expected: dict, after: Graph, registry, scale: float) -> Outcome:
    actual, problem = _right_side(after, registry, instance.feeds)
    first = instance.graph.outputs[0]
    if actual is None:
        return Outcome(Mismatch(problem), expected[first])
    for name in instance.graph.outputs:
        mismatch = compare(expected[name], actual[name], scale=scale)
        if mismatch is not None:
            return Outcome(mismatch, expected[name], actual[name])
    return Outcome(None, expected[first], actual[first])


def _fire_rewrite(instance: Instance, rule, ruleset) -> Graph:
    """The instance graph after ``rule`` fired at its root (Reject where it does not
    match; FuseError where firing fails)."""
    graph = instance.graph
    root = next(n for n in graph.nodes if n.name == instance.root)
    if Matcher(graph, ruleset).match(rule, root) is None:
        failure = Matcher(graph, ruleset).explain(rule, root)
        raise Reject(f"no match: {getattr(failure, 'message', failure)}")
    after = graph.copy()  # keeps the rule set's registry, which the instance was built with
    node = next(n for n in after.nodes if n.name == instance.root)
    match = cast(Match, Matcher(after, ruleset).match(rule, node))  # the copy matches as the graph did
    if not applicable(after, match):
        raise Reject("the replacement is a graph input and the root a graph output")
    index = GraphIndex(after)
    with np.errstate(all="ignore"):  # the replacement may fold constants (1 / c with a zero in c)
        apply_match(index, ruleset, match, Recorder(10))
    index.finalize()
    return after


def _open_root(instance: Instance, case, ruleset) -> Graph:
    after = instance.graph.copy()
    index = GraphIndex(after)
    with np.errstate(all="ignore"):
        open_node(index, ruleset, index.by_name[instance.root], case, Recorder(10))
    index.finalize()
    return after


def check_rewrite_instance(instance: Instance, rule, ruleset) -> Outcome:
    """Fire ``rule`` at the instance's root and compare the graph's outputs."""
    registry = ruleset.registry
    graph = instance.graph
    root = next(n for n in graph.nodes if n.name == instance.root)
    if Matcher(graph, ruleset).match(rule, root) is None:
        failure = Matcher(graph, ruleset).explain(rule, root)
        raise Reject(f"no match: {getattr(failure, 'message', failure)}")
    expected, scale = _left_side(instance, registry)
    try:
        after = _fire_rewrite(instance, rule, ruleset)
    except FuseError as exc:
        return Outcome(Mismatch(f"firing the rule fails: {str(exc).splitlines()[0]}"), expected[graph.outputs[0]])
    return _compare_outputs(instance, expected, after, registry, scale)


def check_decompose_instance(instance: Instance, case, ruleset) -> Outcome:
    registry = ruleset.registry
    expected, scale = _left_side(instance, registry)
    try:
        after = _open_root(instance, case, ruleset)
    except FuseError as exc:
        return Outcome(Mismatch(f"opening the node fails: {str(exc).splitlines()[0]}"),
                       expected[instance.graph.outputs[0]])
    return _compare_outputs(instance, expected, after, registry, scale)


def _raw_sides(instance: Instance, after: Graph, registry) -> tuple[np.ndarray, np.ndarray]:
    expected, _ = _left_side(instance, registry, finite=False)
    actual, problem = _right_side(after, registry, instance.feeds)
    if actual is None:
        raise Reject(problem)
    name = instance.graph.outputs[0]
    return expected[name], actual[name]


def rewrite_sides(instance: Instance, rule, ruleset) -> tuple[np.ndarray, np.ndarray]:
    """Both sides of ``rule`` on ``instance``, infinities and NaN included (float-exactness
    compares them bit for bit)."""
    return _raw_sides(instance, _fire_rewrite(instance, rule, ruleset), ruleset.registry)


def decompose_sides(instance: Instance, case, ruleset) -> tuple[np.ndarray, np.ndarray]:
    return _raw_sides(instance, _open_root(instance, case, ruleset), ruleset.registry)


__all__ = ["Counterexample", "Instance", "Leaf", "Outcome", "Reject", "check_decompose_instance",
           "check_rewrite_instance", "decompose_instance", "decompose_sides", "draw_array", "rewrite_instance",
           "rewrite_sides", "wide_side"]
