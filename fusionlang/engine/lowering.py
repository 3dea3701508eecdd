"""Opening compound ops inside their groups, after partitioning (and for the feedback check
during it: both use the graph's one opening).

A policy may keep a compound op whole while it partitions (tvm.fuse treats softmax as
one out-ewise-fusable op, as TVM does); the loop layer only compiles primitive ops. So the
compound ops left in a plan are opened here, and every node an opening creates joins the
group of the op it replaces: group count, stitches and horizontal packs are unchanged.

Only the rule sets the policy names open them: its own decompositions first, then those of
each ``import "x.fuse" for lowering`` (tvm.fuse lowers with decompose.fuse that way). A
compound op none of them opens is an error that says which import is missing.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from fusionlang.engine.passes import _case_for, open_node
from fusionlang.engine.plan import FusionPlan, make_groups
from fusionlang.engine.rewrite_index import GraphIndex
from fusionlang.engine.rewrite_trace import Recorder, decomposition_node_budget
from fusionlang.errors import FuseError
from fusionlang.ir.graph import Graph
from fusionlang.ops.interpreter import registry_of


def compound_nodes(graph: Graph, registry) -> set[str]:
    """Names of the nodes of ``graph`` whose op has no loop form of its own."""
    return {n.name for n in graph.nodes if registry.get(n.op).compound}


def open_compound_ops(graph: Graph, names: list[str], rulesets, registry) -> dict[str, list[str]]:
    """Open, in place, the compound ops ``names`` (and the compound ops their bodies
    build), each with the first of ``rulesets`` that has a case for it; ``registry`` says
    which ops are compound. Returns, for each opened node, the primitive nodes that
    replace it."""
    index = GraphIndex(graph)
    by_name = {n.name: n for n in graph.nodes}
    recorder = Recorder(budget=0, node_budget=decomposition_node_budget(graph))
    replaced: dict[str, list[str]] = {}
    for name in names:
        stack, primitive = [by_name[name]], []
        while stack:
            current = stack.pop()
            ruleset, case = _lowering_case(rulesets, registry, current)
            if case is None:
                primitive.append(current.name)
                continue
            stack.extend(reversed(open_node(index, ruleset, current, case, recorder)))
        replaced[name] = primitive
    index.finalize()
    return replaced


def _lowering_case(rulesets, registry, node):
    if not registry.get(node.op).compound:
        return None, None
    for ruleset in rulesets:
        case = _case_for(ruleset, node)
        if case is not None:
            return ruleset, case
    named = ", ".join(repr(r.name or "?") for r in rulesets) or "no rule set"
    head = f"node {node.name!r} ({node.op}) is a compound op and no decomposition in {named} opens it " \
           f"(its attributes: {_attributes(node.attrs)})"
    if any(node.op in r.decompositions for r in rulesets):
        raise FuseError(f"{head}: no decompose case for {node.op} accepts these attributes")
    raise FuseError(f"{head}; a policy that keeps {node.op} whole names the decompositions that lower it: "
                    f"import \"decompose.fuse\" for lowering")


def _attributes(attrs: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in attrs.items()) or "none"


@dataclass
class OpenedGraph:
    """A copy of a graph with every compound op opened (:func:`open_compound_ops`), and
    for each opened node the primitive nodes that replace it."""

    graph: Graph
    replaced: dict[str, list[str]]
    #: what it was opened from: the rule set, and the graph's node list (by identity) and length
    made_from: tuple = ()

    def members(self, names) -> list[str]:
        """``names`` of the original graph, each opened node replaced by its pieces."""
        return [new for old in names for new in self.replaced.get(old, [old])]


#: graph -> (what it was opened from, its compound ops opened or None when it has none):
#: the feedback check and the lowering after partitioning share one opening instead of one
#: per question plus one at the end; "none to open" is remembered too, since finding it
#: reads every node and the feedback check asks once per group (a 20,000-node unrolled
#: loop spent 14 s there)
_OPENED: "weakref.WeakKeyDictionary[Graph, tuple[tuple, OpenedGraph | None]]" = weakref.WeakKeyDictionary()


def opened(graph: Graph, ruleset) -> OpenedGraph | None:
    """``graph`` with its compound ops opened (made once per graph and rule set; the graph
    must not be edited in place afterwards), or None when it has none."""
    made_from = (id(ruleset), id(graph.nodes), len(graph.nodes))
    found = _OPENED.get(graph)
    if found is None or found[0] != made_from:
        found = _OPENED[graph] = (made_from, _open(graph, ruleset, made_from))
    return found[1]


def _open(graph: Graph, ruleset, made_from: tuple) -> OpenedGraph | None:
    registry = registry_of(graph, ruleset.registry if ruleset is not None else None)
    compound = compound_nodes(graph, registry)
    if not compound:
        return None
    copy = graph.copy()
    replaced = open_compound_ops(copy, [n.name for n in copy.nodes if n.name in compound],
                                 lowering_rulesets(ruleset), registry)
    return OpenedGraph(copy, replaced, made_from)


def on_primitives(feedback, ruleset, graph: Graph):
    """``feedback`` asked about a group of ``graph`` as it will be compiled: with its
    compound ops opened (in the graph's one opened copy, :func:`opened`)."""
    def check(asked: Graph, members: list[str]):
        opening = opened(asked, ruleset) if asked is graph else None
        if opening is None:
            return feedback(asked, members)
        return feedback(opening.graph, opening.members(members))
    return check


def lowering_rulesets(ruleset) -> list:
    """The rule sets whose decompositions open what ``ruleset``'s partitioning kept whole, in
    the order they are tried: its own, then its ``import ... for lowering`` ones."""
    if ruleset is None:
        return []
    return [ruleset, *ruleset.lowering]


def lower_compound_groups(plan: FusionPlan, ruleset=None) -> FusionPlan:
    """``plan`` with its compound ops opened inside their groups (``plan`` itself when it has
    none), opened with :func:`lowering_rulesets` of ``ruleset``; the opening the feedback
    check made becomes the plan's graph (:func:`opened`)."""
    opening = opened(plan.graph, ruleset)
    if opening is None:
        return plan
    # the plan takes the opened graph over (partitioning, the opening's only other reader,
    # is done), so lowering copies no graph; a later lowering of the same plan opens afresh
    _OPENED.pop(plan.graph, None)
    graph = opening.graph
    members = [opening.members(g.nodes) for g in plan.groups]
    fields = [dict(category=g.category, kind=g.kind, rules=list(g.rules), cost=dict(g.cost)) for g in plan.groups]
    groups = make_groups(graph, members, fields)
    lowered = FusionPlan(graph=graph, groups=groups, strategy=plan.strategy, rules=plan.rules,
                         stitches=list(plan.stitches), horizontal=[list(h) for h in plan.horizontal],
                         stats=dict(plan.stats), decisions=list(plan.decisions), original=plan.original)
    lowered.validate()
    return lowered


__all__ = ["OpenedGraph", "compound_nodes", "lower_compound_groups", "lowering_rulesets", "on_primitives",
           "open_compound_ops", "opened"]
