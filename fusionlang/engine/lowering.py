"""Opening compound ops inside their groups, after partitioning.

A policy may keep a compound op whole while it partitions (tvm.fuse treats softmax as
one out-ewise-fusable op, as TVM does); the loop layer only compiles primitive ops. So the
compound ops left in a plan are opened here with the standard decompositions (the rule
set's own cases first), and every node an opening creates joins the group of the op it
replaces: group count, stitches and horizontal packs are unchanged.
"""

from __future__ import annotations

from fusionlang.engine.passes import _case_for, open_node
from fusionlang.engine.plan import FusionPlan, make_groups
from fusionlang.engine.rewrite_index import GraphIndex
from fusionlang.engine.rewrite_trace import Recorder, decomposition_node_budget
from fusionlang.errors import FuseError
from fusionlang.ir.graph import Graph
from fusionlang.lang import load_rules
from fusionlang.ops.interpreter import registry_of

#: the rule library whose decompositions lower what a policy kept whole
LOWERING_RULES = "decompose"


def compound_nodes(graph: Graph, registry) -> set[str]:
    """Names of the nodes of ``graph`` whose op has no loop form of its own."""
    return {n.name for n in graph.nodes if registry.get(n.op).compound}


def open_compound_ops(graph: Graph, names: list[str], rulesets) -> dict[str, list[str]]:
    """Open, in place, the compound ops ``names`` (and the compound ops their bodies
    build), each with the first of ``rulesets`` that has a case for it. Returns, for each
    opened node, the primitive nodes that replace it."""
    index = GraphIndex(graph)
    by_name = {n.name: n for n in graph.nodes}
    recorder = Recorder(budget=0, node_budget=decomposition_node_budget(graph))
    replaced: dict[str, list[str]] = {}
    for name in names:
        stack, primitive = [by_name[name]], []
        while stack:
            current = stack.pop()
            ruleset, case = _lowering_case(rulesets, current)
            if case is None:
                primitive.append(current.name)
                continue
            stack.extend(reversed(open_node(index, ruleset, current, case, recorder)))
        replaced[name] = primitive
    index.finalize()
    return replaced


def _lowering_case(rulesets, node):
    if not rulesets[0].registry.get(node.op).compound:
        return None, None
    for ruleset in rulesets:
        case = _case_for(ruleset, node)
        if case is not None:
            return ruleset, case
    raise FuseError(f"node {node.name!r} ({node.op}) is a compound op and no decomposition in "
                    f"{', '.join(r.name or '?' for r in rulesets)} opens it (its attributes: {node.attrs})")


def on_primitives(feedback, ruleset, graph: Graph):
    """``feedback`` asked about a group of ``graph`` as it will be compiled: with its
    compound ops opened (in a copy of the graph)."""
    compound = compound_nodes(graph, ruleset.registry)

    def check(graph: Graph, members: list[str]):
        opened = [m for m in members if m in compound]
        if not opened:
            return feedback(graph, members)
        graph = graph.copy()
        replaced = open_compound_ops(graph, opened, _lowering_rulesets(ruleset))
        return feedback(graph, [new for old in members for new in replaced.get(old, [old])])
    return check


def _lowering_rulesets(ruleset) -> list:
    return [r for r in (ruleset, load_rules(LOWERING_RULES)) if r is not None]


def lower_compound_groups(plan: FusionPlan, ruleset=None) -> FusionPlan:
    """``plan`` with its compound ops opened inside their groups (``plan`` itself when it has
    none). ``ruleset``'s own decompositions are tried before the standard ones."""
    rulesets = _lowering_rulesets(ruleset)
    # the plan's graph knows its own ops (a rule file's defs) even when no rule set is given
    compound = compound_nodes(plan.graph, registry_of(plan.graph, ruleset.registry if ruleset is not None else None))
    if not compound:
        return plan
    graph = plan.graph.copy()
    replaced = open_compound_ops(graph, [n.name for n in graph.nodes if n.name in compound], rulesets)
    members = [[new for old in g.nodes for new in replaced.get(old, [old])] for g in plan.groups]
    fields = [dict(category=g.category, kind=g.kind, rules=list(g.rules), cost=dict(g.cost)) for g in plan.groups]
    groups = make_groups(graph, members, fields)
    lowered = FusionPlan(graph=graph, groups=groups, strategy=plan.strategy, rules=plan.rules,
                         stitches=list(plan.stitches), horizontal=[list(h) for h in plan.horizontal],
                         stats=dict(plan.stats), original=plan.original)
    lowered.validate()
    return lowered


__all__ = ["compound_nodes", "lower_compound_groups", "on_primitives", "open_compound_ops"]
