"""rule_report: where a rewrite fired in a graph, and why not (``why_not``) at each node
of the rewritten graph its pattern starts at; ``fusionlang explain --rule NAME``.

Its own module: it runs the rewriter, and ``whynot`` is imported by the rewriter."""

from __future__ import annotations

from dataclasses import dataclass

from fusionlang.engine.match import Matcher
from fusionlang.engine.rewrite import apply_rules
from fusionlang.engine.whynot import WhyNot, rewrite_named, why_not
from fusionlang.errors import FuseError, RewriteError
from fusionlang.ir.graph import Graph
from fusionlang.lang import load_rules


@dataclass(frozen=True)
class RuleReport:
    """Where a rewrite fired in a graph, or, where it did not, why not at each node of
    the rewritten graph its pattern starts at (``fusionlang explain --rule NAME``)."""

    rule: str
    #: where the rule is written: "silu.fuse:4"
    where: str
    #: the nodes it replaced, in firing order
    fired_at: tuple[str, ...]
    #: why it does not apply at each candidate node (at most ``limit`` of them)
    misses: tuple[WhyNot, ...]
    #: nodes of the rewritten graph with the pattern's root op
    candidates: int
    root_op: str
    #: decompositions that opened what the rule built ("decompose silu (decompose.fuse:27)")
    opened_by: tuple[str, ...] = ()
    #: when the rewritten graph has no candidate: the model's candidates, and why_not there
    in_model: int = 0
    model_misses: tuple[WhyNot, ...] = ()

    def lines(self) -> list[str]:
        head = f"rewrite {self.rule} ({self.where})"
        if self.fired_at:
            out = [f"{head} fired {len(self.fired_at)} time(s):"]
            out += [f"  at {node}" for node in self.fired_at[:_SHOWN]]
            if len(self.fired_at) > _SHOWN:
                out.append(f"  ... and {len(self.fired_at) - _SHOWN} more")
            if self.opened_by:
                out.append(f"  then opened by {', '.join(self.opened_by)}: the rewrite is undone")
        elif not self.candidates:
            out = [f"{head} did not fire: the rewritten graph has no {self.root_op!r} node, where its pattern "
                   "starts"]
            if self.in_model:
                out.append(f"  the model has {self.in_model} (other rules replaced them); there:")
                out += _miss_lines(self.model_misses, self.in_model)
            return out
        else:
            out = [f"{head} did not fire:"]
        if self.misses:
            out.append(f"  not at {self.candidates} {self.root_op!r} node(s) of the rewritten graph:"
                       if self.fired_at else f"  at {self.candidates} {self.root_op!r} node(s):")
            out += _miss_lines(self.misses, self.candidates)
        return out


#: fired-at nodes a report lists
_SHOWN = 20


def _miss_lines(misses: tuple[WhyNot, ...], candidates: int) -> list[str]:
    lines = [f"    {miss.node}: {miss.span}: {miss.message}" for miss in misses]
    if candidates > len(misses):
        lines.append(f"    ... and {candidates - len(misses)} more")
    return lines


def rule_report(graph: Graph, ruleset, rule_name: str, *, limit: int = 10) -> RuleReport:
    """Rewrite ``graph`` with ``ruleset`` and report on ``rule_name``: the nodes it
    replaced, and why_not at (up to ``limit``) nodes of the result its pattern starts
    at. An unknown rule name is a FuseError with a did-you-mean."""
    ruleset = load_rules(ruleset)
    rule = rewrite_named(ruleset, rule_name)
    try:
        result = apply_rules(graph, ruleset)
    except RewriteError as exc:  # report on the graph as far as rewriting got
        result = exc.result
    fired_at = tuple(e.node for e in result.trace if e.rule == rule.name and e.pass_name == "simplify")
    candidates = [n for n in result.graph.nodes if n.op == rule.root_op]
    in_model = [] if candidates else [n for n in graph.nodes if n.op == rule.root_op]
    return RuleReport(rule.name, rule.where, fired_at, _misses(result.graph, candidates[:limit], ruleset, rule.name),
                      len(candidates), rule.root_op, _opened_after(result.graph, f"rule {rule.name} ({rule.where})"),
                      len(in_model), _misses(graph, in_model[:limit], ruleset, rule.name))


def rule_at_node(graph: Graph, ruleset, rule_name: str, node_name: str) -> WhyNot:
    """Does ``rule_name`` rewrite ``node_name`` in a run of the whole rule set, and if not,
    why not, consistent with that run (``fusionlang explain --rule R --node N``): where it
    fired, the rule that rewrote what its pattern covers first (with its priority and
    step), or why_not at the node of the rewritten graph. FuseError when neither the model
    nor the rewritten graph has the node."""
    ruleset = load_rules(ruleset)
    rule = rewrite_named(ruleset, rule_name)
    try:
        result = apply_rules(graph, ruleset)
    except RewriteError as exc:
        result = exc.result
    for entry in result.trace:
        if entry.rule == rule.name and entry.node == node_name:
            return WhyNot(rule.name, node_name, True, rule.span, f"rule {rule.name!r} (priority {rule.priority}) "
                                                                 f"rewrote node {node_name!r} at step {entry.step}")
    first = _rewritten_first(graph, ruleset, rule, node_name, result.trace)
    if first is not None:
        return first
    if any(n.name == node_name for n in result.graph.nodes):
        answer = why_not(result.graph, node_name, ruleset, rule.name)
        if not answer.matches:
            return answer
        return WhyNot(rule.name, node_name, False, rule.span, f"rule {rule.name!r} matches node {node_name!r} of "
                                                              f"the rewritten graph, but the run stopped first "
                                                              f"({result.stop_reason})")
    if not any(n.name == node_name for n in graph.nodes):
        raise FuseError(f"no node {node_name!r} in the model or in the rewritten graph")
    return WhyNot(rule.name, node_name, False, rule.span, f"node {node_name!r} is not in the rewritten graph, and "
                                                          f"{why_not(graph, node_name, ruleset, rule.name).message}")


def _rewritten_first(graph: Graph, ruleset, rule, node_name: str, trace) -> WhyNot | None:
    """Where the rule matches ``node_name`` in the model but never fired there: the first
    firing of another rule at a node its match covers, as the answer; else None."""
    node = graph.index.by_name.get(node_name)
    match = Matcher(graph, ruleset).match(rule, node) if node is not None else None
    if match is None:
        return None
    covered = {n.name for n in match.nodes}
    for entry in trace:
        if entry.rule != rule.name and (entry.node in covered or covered.intersection(entry.covered)):
            other = f"{entry.rule} ({entry.where}, priority {entry.priority})"
            return WhyNot(rule.name, node_name, False, rule.span,
                          f"rule {rule.name!r} (priority {rule.priority}) matches node {node_name!r} in the model, "
                          f"but {other} rewrote node {entry.node!r} first, at step {entry.step}; a higher priority "
                          f"puts {rule.name!r} in an earlier phase")
    return None


def _misses(graph: Graph, nodes, ruleset, rule_name: str) -> tuple[WhyNot, ...]:
    return tuple(m for m in (why_not(graph, n.name, ruleset, rule_name) for n in nodes) if not m.matches)


def _opened_after(graph: Graph, stamp: str) -> tuple[str, ...]:
    """The decompositions stamped on nodes right after ``stamp``: they opened what the
    rule built."""
    opened: dict[str, None] = {}
    for node in graph.nodes:
        steps = node.provenance
        for k, step in enumerate(steps[:-1]):
            if step == stamp and steps[k + 1].startswith("decompose "):
                opened[steps[k + 1]] = None
    return tuple(opened)


__all__ = ["RuleReport", "rule_at_node", "rule_report"]
