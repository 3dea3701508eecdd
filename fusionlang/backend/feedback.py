"""Apollo's upward feedback: can a set of nodes be fused into one loop nest?

The partitioner calls :func:`check_group` (through a callback the API hands it) on every
candidate group; a group that does not fuse into one legal nest gets a one-line reason and
is split by the partitioner. Only the polyhedral part runs here (statements, dependences,
fused tree, legality): no AST, no code, so it is cheap enough to call per merge.
"""

from __future__ import annotations

import weakref

from fusionlang.backend.poly import build_program
from fusionlang.backend.schedule import select_tree
from fusionlang.errors import FuseError
from fusionlang.ir.graph import Graph


_VERDICTS: "weakref.WeakKeyDictionary[Graph, dict]" = weakref.WeakKeyDictionary()


def check_group(graph: Graph, node_names: list[str]) -> str | None:
    """None if the nodes fuse into one legal loop nest, else a one-line reason.

    Verdicts are remembered per graph object (the partitioner asks again each round);
    a graph edited in place should be copied first, as the engine does.
    """
    memo = _VERDICTS.setdefault(graph, {})
    key = frozenset(node_names)
    if key not in memo:
        memo[key] = _check(graph, node_names)
    return memo[key]


def _check(graph: Graph, node_names: list[str]) -> str | None:
    # only "one nest or not" matters here, so the inlined form, which fuses more often, is
    # built and scheduled first; the plain form only when that fails
    try:
        rejected = []
        for prog in _forms(graph, list(node_names)):
            if len(prog.stmts) <= 1:
                return None
            tree, _, rejected = select_tree(prog, "c")
            if tree.nests == 1:
                return None
    except FuseError as exc:
        return str(exc).splitlines()[0]
    return _reason(prog, [r for r in rejected if "violates" in r])


def _forms(graph: Graph, node_names: list[str]):
    """The group's program with its producers inlined (:func:`.schedule.select_program`
    compiles it that way when the plain form does not fuse), then (if that inlined any)
    as built."""
    inlined = build_program(graph, node_names, inline=True)
    yield inlined
    if inlined.inlined:
        yield build_program(graph, node_names)


def _reason(prog, rejected) -> str:
    ops = ", ".join(f"{n.name} ({n.op})" for n in prog.nodes[:6]) + (" ..." if len(prog.nodes) > 6 else "")
    if rejected:
        return f"no legal single loop nest for {ops}: every fused schedule violates a dependence"
    return f"no loop shared by all of {ops}: they would need separate loop nests"


__all__ = ["check_group"]
