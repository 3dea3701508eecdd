"""RuleSet: the checked, immutable result of loading rule files.

Everything a partitioner or the rewrite engine asks of a rule file is answered here:
the category lattice and per-node categories, commutativity, the op registry with the
files' `def` ops, decompositions, rewrites in priority order, the fuse table,
strategies and in-file tests. Rules keep their syntax trees (for the printer, the
matcher and error messages) and their spans (for provenance).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from fusionlang.errors import FuseError
from fusionlang.ir.graph import Graph, Node
from fusionlang.lang import ast as A
from fusionlang.lang.diagnostics import NO_SPAN, Span
from fusionlang.lang.guards import Bindings, Context, StepBudget, guard_holds, normalize
from fusionlang.lang.limits import guard_steps_for
from fusionlang.ops.registry import OpRegistry

#: flags that set an entry apart from the plain aggregation table
SPECIAL_FLAGS = frozenset({"stitch", "horizontal", "sibling"})


def _where(span: Span) -> str:
    return f"{span.file}:{span.line}"


@dataclass(frozen=True)
class FuseEntry:
    """One entry of the aggregation table, with its source span: ``fuse PRODUCERS ->
    CONSUMERS : RESULT [flags] [when GUARD]``, or a deny entry ``nofuse PRODUCERS ->
    CONSUMERS [when GUARD]`` (``deny`` set, no result)."""

    producers: frozenset[str]
    consumers: frozenset[str]
    result: str
    flags: frozenset[str]
    options: Mapping[str, str | int | float]
    span: Span = field(default=NO_SPAN, compare=False)
    #: ``when GUARD`` over the edge's ``producer`` and ``consumer`` tensors (see edge_context)
    guard: A.Expr | None = None
    #: a ``nofuse`` entry: where it decides, the pair does not fuse
    deny: bool = False
    #: option name -> span of the option, for diagnostics
    option_spans: Mapping[str, Span] = field(default_factory=dict, compare=False, repr=False)

    def matches(self, producer: str, consumer: str) -> bool:
        return producer in self.producers and consumer in self.consumers

    def is_kind(self, flag: str | None) -> bool:
        """Does this entry answer a look-up of ``flag`` (None: the plain table)? A deny
        entry answers every producer -> consumer look-up (not horizontal or sibling ones)."""
        if self.deny:
            return flag not in ("horizontal", "sibling")
        return not self.flags & SPECIAL_FLAGS if flag is None else flag in self.flags

    def _key(self):
        return (self.producers, self.consumers, self.result, self.flags, tuple(sorted(self.options.items())),
                self.guard, self.deny)

    def __hash__(self):
        return hash(self._key())

    def __eq__(self, other):
        if not isinstance(other, FuseEntry):
            return NotImplemented
        return self._key() == other._key()


@dataclass(frozen=True, eq=False)
class Strategy:
    """A ``strategy NAME { key = value }`` declaration: options for a partitioner. A later
    file's declaration of the same strategy overrides it key by key, so ``options`` and
    ``option_spans`` hold, per key, the value and span that won."""

    name: str
    options: Mapping[str, object]
    span: Span = field(default=NO_SPAN, compare=False)
    option_spans: Mapping[str, Span] = field(default_factory=dict, compare=False, repr=False)

    def __eq__(self, other):
        if not isinstance(other, Strategy):
            return NotImplemented
        return self.name == other.name and dict(self.options) == dict(other.options)

    def __hash__(self):
        return hash(self.name)


@dataclass(frozen=True)
class ClassRule:
    """A ``class OPS : CATEGORY, commutative [when GUARD]`` declaration for one op."""

    op: str  # "def" stands for every formula-defined op
    category: str | None
    commutative: bool
    guard: A.Expr | None
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True)
class DefRule:
    """A ``def`` declaration: a new op from a scalar formula or a compound body."""

    decl: A.DefDecl

    @property
    def name(self) -> str:
        return self.decl.name.text

    @property
    def span(self) -> Span:
        return self.decl.span

    @property
    def is_formula(self) -> bool:
        return self.decl.formula is not None


@dataclass(frozen=True)
class DecomposeRule:
    """One case of opening a compound op (from `decompose`, or the body of a compound `def`)."""

    op: str
    params: tuple[str, ...]
    #: attribute -> variable bound to it
    binds: tuple[tuple[str, str], ...]
    #: attribute -> required literal value
    requires: tuple[tuple[str, object], ...]
    body: tuple[A.Stmt, ...]
    span: Span = field(default=NO_SPAN, compare=False)
    #: True when the case comes from a compound `def` (printed as part of the def)
    from_def: bool = field(default=False, compare=False)
    #: what ``check`` would fail the case for and its author accepts (see :data:`ACCEPTABLE`)
    accepts: frozenset[str] = field(default=frozenset(), compare=False)

    @property
    def name(self) -> str:
        return f"decompose {self.op}"

    @property
    def where(self) -> str:
        return _where(self.span)

    def applies(self, node: Node) -> bool:
        n_inputs = len(node.inputs)
        while n_inputs and not node.inputs[n_inputs - 1]:
            n_inputs -= 1
        if n_inputs != len(self.params) or any(not v for v in node.inputs[:n_inputs]):
            return False
        return all(_same_attr(node.attrs.get(k), v) for k, v in self.requires)


def _same_attr(actual, wanted) -> bool:

    return normalize(actual) == normalize(wanted)


#: what a rule's ``accepts`` clause may name, and what each lets ``check`` pass:
#: "overflow": float32 stress finds the rule making a finite result infinite or NaN (folding
#: a batch norm's scale into conv weights can overflow where the conv then the scale did not);
#: "cancellation": the rewrite loses every significant digit of a float32 result the pattern
#: computes accurately; "uncovered": no instance of the rule could be drawn, so nothing of
#: it was checked; "undone": a decomposition of the rule set opens the rewrite's result
#: again (lint's warning, acknowledged)
ACCEPTABLE = {"overflow": "a finite float32 result made infinite or NaN by the rewrite",
              "cancellation": "every significant digit of an accurate float32 result lost by the rewrite",
              "uncovered": "no instance of the rule drawn, so nothing of it checked",
              "undone": "the rewrite's result opened again by a decomposition"}


class _PatternDecl:
    """What a rule with a pattern (a rewrite, a ``fuse pattern`` entry) answers from its
    declaration ``decl`` and its compiled pattern ``compiled``; the matcher asks these."""

    decl: Any
    compiled: Any

    @property
    def name(self) -> str:
        return self.decl.name.text

    @property
    def guard(self) -> A.Expr | None:
        return self.decl.guard

    @property
    def span(self) -> Span:
        return self.decl.span

    @property
    def where(self) -> str:
        return _where(self.span)

    @property
    def root_op(self) -> str:
        return getattr(self.compiled, "op", "")


@dataclass(frozen=True)
class RewriteRule(_PatternDecl):
    """A ``rewrite NAME [priority N]: PATTERN [where GUARD] => REPLACEMENT`` rule."""

    decl: A.Rewrite
    #: position among all rewrites in load order (ties of priority keep file order)
    order: int = field(default=0, compare=False)
    #: the pattern as a tree (fusionlang.lang.patterns), compiled once by the checker
    compiled: Any = field(default=None, compare=False, repr=False)  # a POp once checked

    @property
    def priority(self) -> int:
        return self.decl.priority

    @property
    def shared(self) -> bool:
        return self.decl.shared

    @property
    def accepts(self) -> frozenset[str]:
        """What ``check`` would fail the rule for and its author accepts (:data:`ACCEPTABLE`)."""
        return frozenset(n.text for n in self.decl.accepts)

    @property
    def pattern(self) -> A.Expr:
        return self.decl.pattern

    @property
    def replacement(self) -> A.Expr:
        return self.decl.replacement


@dataclass(frozen=True)
class PatternEntry(_PatternDecl):
    """A ``fuse pattern NAME: PATTERN [where GUARD] [as RESULT]`` entry: every subgraph the
    pattern matches becomes one group. It answers what the matcher asks of a rule (compiled
    pattern, guard, ``shared``): values inside a match may have users outside it, since a
    fused group simply writes them out."""

    decl: A.FusePattern
    #: the pattern as a tree (fusionlang.lang.patterns), compiled once by the checker
    compiled: Any = field(default=None, compare=False, repr=False)
    shared: bool = field(default=True, init=False, compare=False)

    @property
    def result(self) -> str | None:
        """The group's category as written, or None (the highest of the matched nodes')."""
        return self.decl.result.text if self.decl.result is not None else None


@dataclass(frozen=True)
class TestBlock:
    """A ``test NAME { ... }`` block: a small graph and the expectations checked on it."""

    decl: A.TestDecl

    @property
    def name(self) -> str:
        return self.decl.name.text

    @property
    def span(self) -> Span:
        return self.decl.span


class RuleSet:
    """Immutable: every collection is a tuple, frozenset or read-only mapping."""

    __slots__ = ("name", "files", "categories", "registry", "defs", "decompositions", "rewrites", "tests",
                 "fuse_entries", "strategies", "class_rules", "_commutative", "_rank", "_by_op", "imports",
                 "lowering", "fuse_patterns")
    name: str
    files: tuple[str, ...]
    categories: tuple[str, ...]
    class_rules: tuple[ClassRule, ...]
    registry: OpRegistry
    defs: Mapping[str, DefRule]
    decompositions: Mapping[str, tuple[DecomposeRule, ...]]
    rewrites: tuple[RewriteRule, ...]
    fuse_entries: tuple[FuseEntry, ...]
    strategies: Mapping[str, Strategy]
    tests: tuple[TestBlock, ...]
    imports: tuple[str, ...]
    lowering: tuple[RuleSet, ...]
    fuse_patterns: tuple[PatternEntry, ...]
    _commutative: frozenset[str]
    _rank: dict[str, int]
    _by_op: dict[str, tuple[ClassRule, ...]]

    def __init__(self, *, name: str, files: tuple[str, ...], categories: tuple[str, ...],
                 class_rules: tuple[ClassRule, ...], registry: OpRegistry, defs: Mapping[str, DefRule],
                 decompositions: Mapping[str, tuple[DecomposeRule, ...]], rewrites: tuple[RewriteRule, ...],
                 fuse_entries: tuple[FuseEntry, ...], strategies: Mapping[str, Strategy],
                 tests: tuple[TestBlock, ...], imports: tuple[str, ...] = (), lowering: tuple = (),
                 fuse_patterns: tuple[PatternEntry, ...] = ()):
        setter = object.__setattr__
        setter(self, "name", name)
        setter(self, "files", tuple(files))
        setter(self, "categories", tuple(categories))
        setter(self, "class_rules", tuple(class_rules))
        setter(self, "registry", registry)
        setter(self, "defs", MappingProxyType(dict(defs)))
        setter(self, "decompositions", MappingProxyType(dict(decompositions)))
        setter(self, "rewrites", tuple(sorted(rewrites, key=lambda r: (-r.priority, r.order))))
        setter(self, "fuse_entries", tuple(fuse_entries))
        setter(self, "strategies", MappingProxyType(dict(strategies)))
        setter(self, "tests", tuple(tests))
        setter(self, "imports", tuple(imports))
        #: rule sets of ``import "x.fuse" for lowering`` (and of ``import "x.fuse" without
        #: decompose OP``): their decompositions open, inside their groups, the compound ops
        #: this rule set's partitioning kept whole
        setter(self, "lowering", tuple(lowering))
        #: ``fuse pattern`` entries in precedence order (the importing file's first)
        setter(self, "fuse_patterns", tuple(fuse_patterns))
        setter(self, "_commutative", frozenset(r.op for r in class_rules if r.commutative))
        setter(self, "_rank", {c: k for k, c in enumerate(categories)})
        by_op: dict[str, list[ClassRule]] = {}
        for rule in class_rules:
            if rule.category is not None:
                by_op.setdefault(rule.op, []).append(rule)
        # guarded refinements first (in file order), then the op's plain class
        setter(self, "_by_op", {op: tuple([r for r in rules if r.guard is not None] +
                                          [r for r in rules if r.guard is None]) for op, rules in by_op.items()})

    def __setattr__(self, key, value):
        raise AttributeError("RuleSet is immutable")

    def __delattr__(self, key):
        raise AttributeError("RuleSet is immutable")

    # ----- categories -----------------------------------------------------------------
    @property
    def top(self) -> str:
        """The category of ops nothing classifies (the lattice's top; 'opaque' without one)."""
        return self.categories[-1] if self.categories else "opaque"

    def rank(self, category: str) -> int:
        try:
            return self._rank[category]
        except KeyError:
            known = ", ".join(self.categories) or "none declared"
            raise FuseError(f"unknown category {category!r} in rule set {self.name!r} (known: {known})") from None

    def _rules_for(self, op: str) -> tuple[ClassRule, ...]:
        rules = self._by_op.get(op)
        if rules is None and op in self.defs and self.defs[op].is_formula:
            rules = self._by_op.get("def")
        return rules or ()

    def category_of(self, op: str) -> str | None:
        """The static (unguarded) class of ``op``, or None."""
        for rule in self._rules_for(op):
            if rule.guard is None:
                return rule.category
        return None

    def class_rule_of_node(self, graph: Graph, node: Node) -> ClassRule | None:
        """The `class` declaration that decides ``node``'s category: the first refinement
        whose guard holds, else the op's plain class; None when the op is unclassified."""
        plain = None
        for rule in self._rules_for(node.op):
            if rule.category is None:
                continue
            if rule.guard is None:
                plain = plain or rule
            elif guard_holds(rule.guard, node_context(graph, node)):
                return rule
        return plain

    def category_of_node(self, graph: Graph, node: Node) -> str:
        """The category of ``node``: the first refinement whose guard holds, else its class,
        else the top category."""
        rule = self.class_rule_of_node(graph, node)
        return rule.category if rule is not None and rule.category is not None else self.top

    def is_commutative(self, op: str) -> bool:
        # declared by the op itself (OpDef.commutative) or by a `class` rule
        if op in self._commutative:
            return True
        opdef = self.registry.lookup(op)
        return opdef is not None and opdef.commutative

    # ----- fusion table ---------------------------------------------------------------
    def fuse_decision(self, producer_cat: str, consumer_cat: str, *, flag: str | None = None,
                      edge: Context | None = None) -> FuseEntry | None:
        """The entry that decides whether a producer of ``producer_cat`` fuses into a
        consumer of ``consumer_cat``: the first entry, in precedence order, that covers
        the pair, answers a look-up of ``flag`` (None: the plain table; a `nofuse` entry
        answers every pair look-up) and whose guard holds on ``edge`` (see edge_context; a
        guarded entry is passed over when no edge is given). None when no entry decides."""
        for entry in self.fuse_entries:
            if not (entry.matches(producer_cat, consumer_cat) and entry.is_kind(flag)):
                continue
            if entry.guard is not None and (edge is None or not guard_holds(entry.guard, edge)):
                continue
            return entry
        return None

    def fuse_result(self, producer_cat: str, consumer_cat: str, *, flag: str | None = None,
                    edge: Context | None = None) -> FuseEntry | None:
        """The `fuse` entry that fuses the pair, or None (no entry, or a `nofuse` one decides)."""
        entry = self.fuse_decision(producer_cat, consumer_cat, flag=flag, edge=edge)
        return None if entry is None or entry.deny else entry

    # ----- rules ----------------------------------------------------------------------
    def rewrite(self, name: str) -> RewriteRule:
        for rule in self.rewrites:
            if rule.name == name:
                return rule
        known = ", ".join(r.name for r in self.rewrites) or "none"
        raise FuseError(f"rule set {self.name!r} has no rewrite named {name!r} (rewrites: {known})")

    # ----- equality (content only: spans, file names and load order do not count) ------
    def _key(self):
        return (self.categories, tuple(self.class_rules), tuple(sorted(self.defs.items())),
                tuple(sorted(self.decompositions.items())), self.rewrites, self.fuse_entries,
                tuple(sorted(self.strategies.items())), self.tests, self.lowering, self.fuse_patterns)

    def __eq__(self, other):
        if not isinstance(other, RuleSet):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self):
        return hash((self.name, self.categories, len(self.rewrites)))

    def __repr__(self) -> str:
        return (f"<RuleSet {self.name!r}: {len(self.categories)} categories, {len(self.class_rules)} classes, "
                f"{len(self.defs)} defs, {len(self.decompositions)} decompositions, {len(self.rewrites)} rewrites, "
                f"{len(self.fuse_entries)} fuse entries, {len(self.fuse_patterns)} fuse patterns, "
                f"{len(self.strategies)} strategies, {len(self.tests)} tests>")


def node_context(graph: Graph, node: Node) -> Context:
    """What a class guard sees: ``out``, ``in0``... and the node's attributes by name."""
    tensors = {"out": node.outputs[0]}
    for k, value in enumerate(node.inputs):
        if value:
            tensors[f"in{k}"] = value
    statics = {k: v for k, v in node.attrs.items() if k not in tensors}
    return Context(graph, Bindings(tensors, statics), subject=node)


#: the tensors a fuse entry's guard names
EDGE_TENSORS = ("producer", "consumer")


def edge_context(graph: Graph, value: str, consumer: Node, budget: StepBudget | None = None) -> Context:
    """What a fuse entry's guard sees for the edge that carries ``value`` into
    ``consumer``: ``producer`` (that value) and ``consumer`` (the consumer's first output).
    ``budget``: the steps the partition's guards share (see guard_budget)."""
    return Context(graph, Bindings({"producer": value, "consumer": consumer.outputs[0]}, {}), subject=consumer,
                   budget=budget)


def guard_budget(ruleset: "RuleSet", graph: Graph) -> StepBudget:
    """The steps every guard of ``ruleset``'s fuse table may take while ``graph`` is
    partitioned, together (lang/limits.py)."""
    return StepBudget(guard_steps_for(len(graph.nodes)),
                      f"the guards of the fuse table of rule set {ruleset.name!r} on graph {graph.name!r}")
