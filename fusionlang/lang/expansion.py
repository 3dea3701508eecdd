"""How many nodes opening a compound op builds, counted before anything is opened.

A decomposition body (or a compound `def`'s body) builds nodes, some of which are
compound ops opened in turn. A chain of 40 `def`s, each using the previous one twice,
would build 2 ** 40 nodes and hang `fuse`; the checker reports every op whose full
expansion passes MAX_EXPANSION_NODES at its declaration instead. The count walks the
call graph of decompositions in dependency order, without recursion, and saturates
just past the limit so it stays a small number.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from fusionlang.lang import ast as A
from fusionlang.lang.limits import MAX_EXPANSION_NODES
from fusionlang.lang.vocab import META

if TYPE_CHECKING:
    import networkx as nx

#: expression forms that build one node each when their operands are tensors (counted
#: whether or not they are: the bound may overestimate, never underestimate)
_NODE_FORMS = (A.BinOp, A.Neg, A.Compare, A.Not)


def _saturate(n: int) -> int:
    return min(n, MAX_EXPANSION_NODES + 1)


def body_calls(body) -> tuple[int, Counter]:
    """(nodes the body builds directly, calls of each op in it)."""
    direct, calls = 0, Counter[str]()
    for stmt in body:
        for expr in (stmt.values if isinstance(stmt, A.Return) else (stmt.value,)):
            for e in A.walk(expr):
                if isinstance(e, A.Call) and e.func.text not in META:
                    calls[e.func.text] += 1
                elif isinstance(e, _NODE_FORMS):
                    direct += 2 if isinstance(e, A.Compare) and e.op == "!=" else 1
                elif isinstance(e, A.BoolOp):
                    direct += len(e.items) - 1
    return direct, calls


def expansion_sizes(decompositions: dict, call_graph: nx.DiGraph) -> dict[str, int]:
    """Nodes (saturated past the limit) the full expansion of each compound op builds,
    taking its largest case. Ops on a cycle (reported elsewhere) are left out, and a
    call of one counts as a single node."""
    import networkx as nx  # only a rule set with decompositions gets here (`lint` of a small file does not)
    sizes: dict[str, int] = {}
    condensed = nx.condensation(call_graph)
    for component in reversed(list(nx.topological_sort(condensed))):
        members = condensed.nodes[component]["members"]
        op = next(iter(members))
        if len(members) > 1 or call_graph.has_edge(op, op) or op not in decompositions:
            continue
        sizes[op] = max(case_size(case.body, sizes) for case in decompositions[op])
    return sizes


def case_size(body, sizes: dict[str, int]) -> int:
    """Nodes (saturated) opening one case builds, given the callees' expansion sizes."""
    direct, calls = body_calls(body)
    total = direct
    for callee, count in calls.items():
        # the node itself, then what opening it builds
        total = _saturate(total + count * (1 + sizes.get(callee, 0)))
    return _saturate(total)


def largest_callees(body, sizes: dict[str, int], k: int = 3) -> list[tuple[str, int, int]]:
    """(op, calls, expansion) of the compound ops a body uses, largest first."""
    _, calls = body_calls(body)
    found = [(op, n, sizes[op]) for op, n in calls.items() if op in sizes]
    return sorted(found, key=lambda item: -item[1] * item[2])[:k]
