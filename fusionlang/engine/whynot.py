"""why_not: the first reason a rewrite rule does not apply at a node.

It names the failing part of the pattern or guard, with the source span of that part,
and the fact behind it:

    simplify.fuse:14:11: guard const(w, b) failed: 'w' is computed by node 'relu_3' (relu)

``engine.rule_report`` asks it of a whole graph.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusionlang.errors import FuseError
from fusionlang.ir.graph import Graph
from fusionlang.lang.diagnostics import Span, suggest
from fusionlang.engine.match import Failure, Matcher
from fusionlang.engine.rewrite_surgery import applicable
from fusionlang.lang import load_rules


@dataclass(frozen=True)
class WhyNot:
    rule: str
    node: str
    #: True when the rule does apply at the node
    matches: bool
    span: Span
    message: str

    def __str__(self) -> str:
        return f"{self.span}: {self.message}"


def why_not(graph: Graph, node_name: str, ruleset, rule_name: str) -> WhyNot:
    ruleset = load_rules(ruleset)
    rule = ruleset.rewrite(rule_name)
    node = graph.node(node_name)
    pattern = rule.compiled
    if node.op != rule.root_op:
        return WhyNot(rule.name, node.name, False, pattern.op_span,
                      f"pattern of {rule.name!r} starts with op {rule.root_op!r}, but node {node.name!r} is "
                      f"{node.op!r}")
    result = Matcher(graph, ruleset).explain(rule, node)
    if isinstance(result, Failure):
        return WhyNot(rule.name, node.name, False, result.span, result.message)
    if not applicable(graph, result):
        return WhyNot(rule.name, node.name, False, rule.replacement.span,
                      f"graph output {node.outputs[0]!r} would have to become a graph input or another output")
    return WhyNot(rule.name, node.name, True, rule.span, f"rule {rule.name!r} matches node {node.name!r}")


def rewrite_named(ruleset, name: str):
    """The rewrite rule ``name`` of ``ruleset``; FuseError with a did-you-mean if none."""
    for rule in ruleset.rewrites:
        if rule.name == name:
            return rule
    names = [r.name for r in ruleset.rewrites]
    hint = suggest(name, names)
    raise FuseError(f"rule set {ruleset.name!r} has no rewrite named {name!r}"
                    + (f"; {hint}" if hint else f" ({len(names)} rewrites)"))
