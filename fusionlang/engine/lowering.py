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

from dataclasses import dataclass

from fusionlang.engine.passes import _case_for, open_node
from fusionlang.engine.plan import FusionPlan, carried_fields, make_groups
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

    def members(self, names) -> list[str]:
        """``names`` of the original graph, each opened node replaced by its pieces."""
        return [new for old in names for new in self.replaced.get(old, [old])]

    def origins(self) -> dict[str, str]:
        """Each piece -> the compound node it replaced."""
        return {new: old for old, pieces in self.replaced.items() for new in pieces}


def opened(graph: Graph, ruleset) -> OpenedGraph | None:
    """A copy of ``graph`` with its compound ops opened, or None when it has none. ``fuse``
    makes it once: the feedback check asks about it (:func:`on_primitives`) and the plan
    takes it over (:func:`lower_compound_groups`)."""
    registry = registry_of(graph, ruleset.registry if ruleset is not None else None)
    compound = compound_nodes(graph, registry)
    if not compound:
        return None
    copy = graph.copy()
    replaced = open_compound_ops(copy, [n.name for n in copy.nodes if n.name in compound],
                                 lowering_rulesets(ruleset), registry)
    return OpenedGraph(copy, replaced)


def on_primitives(feedback, graph: Graph, opening: OpenedGraph | None):
    """``feedback`` asked about a group of ``graph`` as it will be compiled: with its
    compound ops opened (in ``opening``, the graph's one opened copy)."""
    if opening is None:
        return feedback

    def check(asked: Graph, members: list[str]):
        if asked is not graph:
            return feedback(asked, members)
        return feedback(opening.graph, opening.members(members))
    return check


def lowering_rulesets(ruleset) -> list:
    """The rule sets whose decompositions open what ``ruleset``'s partitioning kept whole, in
    the order they are tried: its own, then its ``import ... for lowering`` ones."""
    if ruleset is None:
        return []
    return [ruleset, *ruleset.lowering]


#: the default of ``opening`` arguments: open the graph's compound ops there (None says
#: the graph has none)
OPEN_HERE = object()


def lower_compound_groups(plan: FusionPlan, ruleset=None,
                          opening: OpenedGraph | None | object = OPEN_HERE) -> FusionPlan:
    """``plan`` with its compound ops opened inside their groups (``plan`` itself when it has
    none), opened with :func:`lowering_rulesets` of ``ruleset``, or taken from ``opening``
    (the opening of ``plan.graph`` the feedback check asked about, which the plan takes over:
    partitioning, its only other reader, is done; None: it has no compound op)."""
    opening = opened(plan.graph, ruleset) if opening is OPEN_HERE else opening
    if not isinstance(opening, OpenedGraph):
        return plan
    graph = opening.graph
    members = [opening.members(g.nodes) for g in plan.groups]
    fields = [carried_fields(g) for g in plan.groups]
    groups = make_groups(graph, members, fields)
    lowered = FusionPlan(graph=graph, groups=groups, strategy=plan.strategy, rules=plan.rules,
                         stitches=list(plan.stitches), horizontal=[list(h) for h in plan.horizontal],
                         stats=plan.stats, decisions=list(plan.decisions), original=plan.original,
                         target=plan.target, opened_from={**plan.opened_from, **opening.origins()})
    lowered.validate()
    return lowered


__all__ = ["OpenedGraph", "compound_nodes", "lower_compound_groups", "lowering_rulesets", "on_primitives",
           "open_compound_ops", "opened"]
