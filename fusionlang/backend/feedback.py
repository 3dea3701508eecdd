"""Apollo's upward feedback: can a set of nodes be fused into one loop nest?

The partitioner calls :func:`check_group` (through a callback the API hands it) on every
candidate group; a group that does not fuse into one legal nest gets a one-line reason and
is split by the partitioner. Only the polyhedral part runs here (statements, dependences,
fused tree, legality): no AST, no code, so it is cheap enough to call per merge.

Verdicts are remembered twice: per graph object and node set (the partitioner asks again
each round), and per *structure* of the group (:func:`group_signature`), so the blocks a
model repeats (ResNet-50's bottlenecks: 21 schedules for 50 questions) are scheduled once.
"""

from __future__ import annotations

import weakref

import numpy as np

from fusionlang.backend.poly import build_program
from fusionlang.backend.schedule import select_tree
from fusionlang.engine.plan import boundary
from fusionlang.errors import FuseError
from fusionlang.ir.graph import Graph
from fusionlang.ops.interpreter import registry_of

_VERDICTS: "weakref.WeakKeyDictionary[Graph, dict]" = weakref.WeakKeyDictionary()
#: op registry -> group signature -> outcome (None: fuses; "apart" or "illegal": does not)
_BY_SIGNATURE: "weakref.WeakKeyDictionary[object, dict]" = weakref.WeakKeyDictionary()
#: signatures remembered per registry (the oldest are forgotten first)
SIGNATURE_LIMIT = 20000


def check_group(graph: Graph, node_names: list[str]) -> str | None:
    """None if the nodes fuse into one legal loop nest, else a one-line reason.

    Verdicts are remembered per graph object (the partitioner asks again each round) and
    per group structure (:func:`group_signature`); a graph edited in place should be
    copied first, as the engine does.
    """
    memo = _VERDICTS.setdefault(graph, {})
    key = frozenset(node_names)
    if key not in memo:
        memo[key] = _verdict(graph, node_names)
    return memo[key]


def forget_verdicts() -> None:
    """Drop every remembered verdict: needed after changing a fusion policy at run time
    (``fusion.SMALL_GROUP``, say), since the remembered ones were judged under the old."""
    _VERDICTS.clear()
    _BY_SIGNATURE.clear()


def _verdict(graph: Graph, node_names: list[str]) -> str | None:
    try:
        signature = group_signature(graph, node_names)
    except KeyError:  # a node that is not in the graph: build_program says which
        signature = None
    known = _BY_SIGNATURE.setdefault(registry_of(graph), {}) if signature is not None else {}
    if signature in known:
        outcome = known[signature]
    else:
        try:
            outcome = _outcome(graph, list(node_names))
        except FuseError as exc:
            return str(exc).splitlines()[0]  # names a node: not shared between groups
        if signature is not None:
            if len(known) >= SIGNATURE_LIMIT:
                del known[next(iter(known))]
            known[signature] = outcome
    return _reason(graph, node_names, outcome)


def _outcome(graph: Graph, node_names: list[str]) -> str | None:
    """None if the group compiles to one legal loop nest (:func:`.schedule.select_program`:
    as built, or else with its producers inlined), "illegal" if every fused schedule breaks
    a dependence, "apart" if its statements share no loop."""
    # only "one nest or not" matters here, so the inlined form, which fuses more often, is
    # built and scheduled first; the plain form only when that fails
    rejected = []
    for prog in _forms(graph, node_names):
        if len(prog.stmts) <= 1:
            return None
        tree, _, rejected = select_tree(prog, "c")
        if tree.nests == 1:
            return None
    return "illegal" if any("violates" in r for r in rejected) else "apart"


def _forms(graph: Graph, node_names: list[str]):
    """The group's program with its producers inlined, then (if that inlined any) as built."""
    inlined = build_program(graph, node_names, inline=True)
    yield inlined
    if inlined.inlined:
        yield build_program(graph, node_names)


def _reason(graph: Graph, node_names: list[str], outcome: str | None) -> str | None:
    if outcome is None:
        return None
    nodes = _in_graph_order(graph, node_names)
    ops = ", ".join(f"{n.name} ({n.op})" for n in nodes[:6]) + (" ..." if len(nodes) > 6 else "")
    if outcome == "illegal":
        return f"no legal single loop nest for {ops}: every fused schedule violates a dependence"
    return f"no loop shared by all of {ops}: they would need separate loop nests"


# ----- structure of a group ------------------------------------------------------------------


def group_signature(graph: Graph, node_names: list[str]) -> tuple:
    """What the loop fuser's verdict on the group depends on, without names: per node (in
    graph order) its op, attributes, output types and whether each output is used after
    the group, and per input the node and output producing it inside the group, or its
    type outside (one number per distinct outside value, so ``x * x`` differs from
    ``x * y``). Of constants it keeps what access specs and literals see: the values of
    non-float and one-element ones; other float data (weights) never shapes a loop nest,
    so two layers differing only in weights share one signature. Raises KeyError for a
    node not in the graph."""
    nodes = _in_graph_order(graph, node_names)
    _, used_after = boundary(graph, {n.name for n in nodes})
    produced = {v: (k, j) for k, n in enumerate(nodes) for j, v in enumerate(n.outputs) if v}
    outside: dict[str, int] = {}
    signature = []
    for node in nodes:
        inputs = []
        for v in node.inputs:
            if not v:
                inputs.append(None)
            elif v in produced:
                inputs.append(produced[v])
            else:
                number = outside.setdefault(v, len(outside))
                inputs.append((number, _type_key(graph, v), _constant_key(graph.constants.get(v))))
        outputs = tuple((_type_key(graph, v), v in used_after) if v else None for v in node.outputs)
        signature.append((node.op, _frozen(node.attrs), tuple(inputs), outputs))
    return tuple(signature)


def _in_graph_order(graph: Graph, node_names: list[str]) -> list:
    order = {n.name: k for k, n in enumerate(graph.nodes)}
    return [graph.nodes[order[n]] for n in sorted(set(node_names), key=order.__getitem__)]


def _type_key(graph: Graph, value: str) -> tuple:
    t = graph.types[value]
    return tuple(int(d) for d in t.shape), str(t.dtype)


def _constant_key(array) -> tuple | None:
    if array is None:
        return None
    a = np.asarray(array)
    if a.dtype.kind == "f" and a.size > 1:
        return ("const",)
    return ("const", a.dtype.str, a.shape, a.tobytes())


def _frozen(value):
    """A hashable, comparable form of an attribute value."""
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__,) + tuple(_frozen(v) for v in value)
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, np.generic):
        return ("scalar", value.dtype.str, value.item())
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return (type(value).__name__, value)
    return ("repr", type(value).__name__, repr(value))


__all__ = ["check_group", "forget_verdicts", "group_signature"]
