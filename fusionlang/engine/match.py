"""Matcher: does a rewrite's DAG pattern match at a node, and with which bindings?

A pattern matches top-down from the node its root op names: op names, operand counts
and attributes must agree (attributes in their canonical form, fusionlang.ops.canonical:
defaults filled from shapes, axes non-negative, so ``strides=[1, 1]`` matches a conv
stored without strides and ``axes=[-1]`` a reduction over the last axis); a variable binds a value, and a variable used twice must see
the same value; ``t @ op(...)`` also binds the matched value; ``..rest`` takes the
attributes not named. Operands of ops the rule set declares commutative are tried in
both orders (every order for variadic ones of up to four operands), so a rule is
written once. Nodes matched below the root must have no users outside the match
(unless the rule is ``shared``), so a rewrite never duplicates work. Then the guard
must hold.

Orders are fixed (operands left to right, the written order first), so the same graph
and rules always give the same match. :meth:`Matcher.explain` returns, instead of None,
the first part of the pattern or guard that failed, with its source span.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from fusionlang.ir.graph import Graph, Node
from fusionlang.lang.diagnostics import Span
from fusionlang.lang.guards import Bindings, Context, explain_guard, normalize
from fusionlang.lang.patterns import PLit, POp, PVar
from fusionlang.lang.ruleset import RewriteRule, RuleSet
from fusionlang.ops.canonical import canonical_attrs


@dataclass
class Match:
    rule: RewriteRule
    root: Node
    bindings: Bindings
    #: matched op nodes, root first (each once)
    nodes: list[Node] = field(default_factory=list)


@dataclass
class Failure:
    span: Span
    message: str
    #: how far matching got (pattern parts matched; guard failures rank above all)
    progress: int = 0

    def __str__(self) -> str:
        return f"{self.span}: {self.message}"


class _Fail(Exception):
    pass


class Matcher:
    """Matches rules of ``ruleset`` against ``graph`` (use-def maps built once, or
    read from the rewriter's GraphIndex)."""

    def __init__(self, graph: Graph, ruleset: RuleSet, *, index=None):
        """``index``: a GraphIndex whose maps the matcher reads (kept current by the
        rewriter); without one the maps are built from the graph."""
        self.graph = graph
        self.ruleset = ruleset
        if index is not None:
            self.producers, self.consumers, self.outputs = index.producers, index.consumers, index.outputs
        else:
            self.producers = graph.index.producers
            self.consumers = graph.index.consumers
            self.outputs = set(graph.outputs)
        #: id(node) -> (node, canonical attributes); the node is kept so its id stays its own
        self._attr_cache: dict[int, tuple[Node, dict]] = {}
        self._literal_cache: dict[tuple, tuple[Node, object]] = {}

    # ----- public ---------------------------------------------------------------------
    def match(self, rule: RewriteRule, node: Node) -> Match | None:
        if rule.root_op != node.op:
            return None
        result = self._run(rule, node, explain=False)
        return result if isinstance(result, Match) else None

    def explain(self, rule: RewriteRule, node: Node) -> Match | Failure:
        return self._run(rule, node, explain=True)

    # ----- search ---------------------------------------------------------------------
    def _run(self, rule: RewriteRule, node: Node, *, explain: bool):
        self._best: Failure | None = None
        self._explain = explain
        pattern = rule.compiled
        root_value = node.outputs[0]
        for env, nodes in self._match(pattern, root_value, Bindings(), [], 0):
            matched = _unique(nodes)
            failure = self._check_uses(rule, matched)
            if failure is None and rule.guard is not None:
                ctx = Context(self.graph, env, consumers=self.consumers, producers=self.producers)
                bad = explain_guard(rule.guard, ctx)
                if bad is not None:
                    failure = Failure(bad[0], bad[1], 10_000)
            if failure is None:
                return Match(rule, node, env, [n for n, _ in matched])
            self._note(failure)
        return self._best if explain else None

    def _note(self, failure: Failure) -> None:
        if self._best is None or failure.progress > self._best.progress:
            self._best = failure

    def _fail(self, span: Span, message, progress: int):
        if self._explain:
            self._note(Failure(span, message() if callable(message) else message, progress))

    def _match(self, p, value: str, env: Bindings, nodes: list, progress: int):
        """Yield (bindings, matched (node, pattern) pairs) for every way ``p`` matches ``value``."""
        if isinstance(p, PVar):
            if p.anonymous:
                yield env, nodes
                return
            bound = env.tensors.get(p.name)
            if bound is None:
                env = env.copy()
                env.tensors[p.name] = value
                yield env, nodes
            elif bound == value:
                yield env, nodes
            else:
                self._fail(p.span, lambda: f"variable {p.name!r} is bound to {bound!r} but here it would be "
                                           f"{value!r}", progress)
            return
        if isinstance(p, PLit):
            array = self.graph.constants.get(value)
            if array is None:
                self._fail(p.span, lambda: f"expected the constant {p.value}, but {self._origin(value)}", progress)
            elif array.size == 0 or not np.all(array == p.value):
                self._fail(p.span, lambda: f"expected the constant {p.value}, got a constant with elements "
                                           f"{list(normalize(array.ravel()[:4]))}", progress)
            else:
                yield env, nodes
            return
        yield from self._match_op(p, value, env, nodes, progress)

    def _match_op(self, p: POp, value: str, env: Bindings, nodes: list, progress: int):
        node = self.producers.get(value)
        if node is None:
            self._fail(p.op_span, lambda: f"expected op {p.op!r}, but {self._origin(value)}", progress)
            return
        if node.op != p.op:
            self._fail(p.op_span, lambda: f"expected op {p.op!r}, found node {node.name!r} ({node.op})", progress)
            return
        if node.outputs[0] != value:
            self._fail(p.op_span, f"{value!r} is not the first output of node {node.name!r}", progress)
            return
        inputs = list(node.inputs)
        while inputs and not inputs[-1]:
            inputs.pop()
        if len(inputs) != len(p.operands) or not all(inputs):
            self._fail(p.span, lambda: f"node {node.name!r} ({node.op}) has {len(inputs)} inputs; the pattern has "
                                       f"{len(p.operands)}", progress)
            return
        env = env.copy()
        attrs = self._canonical(node) if p.attrs else node.attrs
        for attr in p.attrs:
            actual = normalize(attrs.get(attr.name))
            if attr.kind == "lit":
                wanted = self._canonical_literal(node, attr.name, attr.value)
                if actual != wanted:
                    self._fail(attr.span, lambda: f"attribute {attr.name}={_show(actual)} of node {node.name!r} is "
                                                  f"not {_show(wanted)}", progress + 1)
                    return
            else:
                bound = env.statics.get(attr.value, _UNBOUND)
                if bound is _UNBOUND:
                    env.statics[attr.value] = actual
                elif bound != actual:
                    self._fail(attr.span, lambda: f"attribute {attr.name}={_show(actual)} of node {node.name!r} "
                                                  f"differs from {attr.value}={_show(bound)}", progress + 1)
                    return
        if p.rest is not None:
            named = {a.name for a in p.attrs}
            env.rests[p.rest] = {k: v for k, v in node.attrs.items() if k not in named}
        if p.bind is not None:
            bound = env.tensors.get(p.bind)
            if bound is not None and bound != value:
                self._fail(p.span, f"{p.bind!r} is bound to {bound!r} but here it would be {value!r}", progress + 1)
                return
            env.tensors[p.bind] = value
        nodes = nodes + [(node, p)]
        for order in self._orders(p.op, inputs):
            yield from self._match_operands(p.operands, order, 0, env, nodes, progress + 1)

    def _canonical(self, node: Node) -> dict:
        """The node's attributes as patterns see them (see fusionlang.ops.canonical),
        computed once per node."""
        cached = self._attr_cache.get(id(node))
        if cached is None or cached[0] is not node:
            cached = (node, canonical_attrs(self.ruleset.registry, self.graph, node))
            self._attr_cache[id(node)] = cached
        return cached[1]

    def _canonical_literal(self, node: Node, name: str, value):
        """A pattern's literal, resolved as the node would resolve it (``axes=[-1]`` on a
        rank-3 node is ``[2]``); as written when the node could not hold it."""
        if name not in node.attrs:
            return normalize(value)
        key = (id(node), name, repr(value))
        cached = self._literal_cache.get(key)
        if cached is None or cached[0] is not node:
            resolved = canonical_attrs(self.ruleset.registry, self.graph, node, {name: value})
            cached = (node, normalize(resolved.get(name, value)))
            self._literal_cache[key] = cached
        return cached[1]

    def _orders(self, op: str, inputs: list[str]):
        if not self.ruleset.is_commutative(op) or len(inputs) < 2:
            return [inputs]
        if len(inputs) == 2:
            return [inputs, inputs[::-1]] if inputs[0] != inputs[1] else [inputs]
        if len(inputs) <= 4:
            return [list(o) for o in dict.fromkeys(itertools.permutations(inputs))]
        return [inputs]

    def _match_operands(self, operands, values, k, env, nodes, progress):
        if k == len(operands):
            yield env, nodes
            return
        for env2, nodes2 in self._match(operands[k], values[k], env, nodes, progress + k):
            yield from self._match_operands(operands, values, k + 1, env2, nodes2, progress + k + 1)

    def _check_uses(self, rule: RewriteRule, matched: list[tuple[Node, POp]]) -> Failure | None:
        if rule.shared:
            return None
        inside = {id(n) for n, _ in matched}
        for node, p in matched[1:]:
            for out in node.outputs:
                if out in self.outputs:
                    return Failure(p.op_span, f"node {node.name!r} ({node.op}) is a graph output; rewriting would "
                                              "compute it twice (mark the rule 'shared' to allow that)", 5_000)
                for user in self.consumers.get(out, ()):
                    if id(user) not in inside:
                        return Failure(p.op_span, f"node {node.name!r} ({node.op}) is also used by {user.name!r}; "
                                                  "rewriting would compute it twice (mark the rule 'shared' to "
                                                  "allow that)", 5_000)
        return None

    def _origin(self, value: str) -> str:
        if value in self.graph.inputs:
            return f"{value!r} is a graph input"
        if value in self.graph.constants:
            return f"{value!r} is a constant"
        return f"{value!r} has no producer"


_UNBOUND = object()


def _unique(pairs):
    seen, out = set(), []
    for node, p in pairs:
        if id(node) not in seen:
            seen.add(id(node))
            out.append((node, p))
    return out


def _show(value) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)
