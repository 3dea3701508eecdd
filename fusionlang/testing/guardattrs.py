"""Attributes drawn *for* a guard: the conjuncts of a rewrite's guard that an attribute
variable of one pattern node decides, solved when that node is built.

A guard like ``g % 2 == 0`` on a conv's ``group``, or ``e0[0] == s1[0]`` between two
slices' ``ends`` and ``starts``, is met by a random draw only by luck, and a rule with
such a guard used to be reported "under-covered (0 instances)". Here, when the instance
builder proposes a node's attributes, every top-level conjunct that mentions one of that
node's attribute variables and otherwise only what is already built (earlier nodes'
attributes, the shapes of values built before) is *local* to the node, and

* an equation ``v == E`` or ``v[i] == E`` whose other side ``E`` can be evaluated sets
  the attribute (or its element ``i``) to ``E``'s value: solved, not searched for;
* the other local conjuncts (``g % 2 == 0``, ``e[0] >= dim(x, -1)``) pick among a few
  proposals of the node's op the first that meets them all.

Conjuncts that read values not built yet are left to the guard itself, which the real
matcher still evaluates on every instance.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusionlang.ir.graph import Graph
from fusionlang.lang import ast as A
from fusionlang.lang.guards import Bindings, Context, GuardError, evaluate, guard_holds, normalize
from fusionlang.testing.guardshapes import conjuncts

#: proposals of one node's op tried against its local conjuncts before the draw is rejected
PROPOSALS_PER_NODE = 16


def _variables(expr) -> set[str]:
    return {e.name for e in A.walk(expr) if isinstance(e, A.Var)}


@dataclass
class _Target:
    """Where an equation's solution goes: attribute ``name`` (element ``index``)."""

    name: str
    index: int | None


@dataclass
class AttrDemands:
    """The guard's top-level conjuncts, with the variables each reads."""

    parts: list[tuple[object, set[str]]]

    def local(self, attr_vars: dict[str, str], decided: set[str]) -> list:
        """The conjuncts a node with attribute variables ``attr_vars`` (attribute ->
        variable) decides, given the variables already ``decided``."""
        own = set(attr_vars.values())
        return [part for part, names in self.parts if names & own and names <= own | decided]


def attr_demands(guard) -> AttrDemands:
    return AttrDemands([(part, _variables(part)) for part in conjuncts(guard)])


def _target(side, attr_vars: dict[str, str]) -> _Target | None:
    by_var = {var: name for name, var in attr_vars.items()}
    if isinstance(side, A.Var) and side.name in by_var:
        return _Target(by_var[side.name], None)
    if isinstance(side, A.Index) and isinstance(side.base, A.Var) and side.base.name in by_var \
            and isinstance(side.index, A.Num) and isinstance(side.index.value, int):
        return _Target(by_var[side.base.name], side.index.value)
    return None


def _set(attrs: dict, target: _Target, value) -> None:
    if target.index is None:
        attrs[target.name] = value
        return
    current = list(normalize(attrs.get(target.name, ())) or ())
    if -len(current) <= target.index < len(current):
        current[target.index] = value
        attrs[target.name] = tuple(current)


def _context(graph: Graph, tensors: dict[str, str], statics: dict, attrs: dict,
             attr_vars: dict[str, str]) -> Context:
    own = {var: normalize(attrs.get(name)) for name, var in attr_vars.items() if name in attrs}
    return Context(graph, Bindings(dict(tensors), {**statics, **own}))


def solve(parts: list, attrs: dict, attr_vars: dict[str, str], graph: Graph, tensors: dict[str, str],
          statics: dict) -> bool:
    """Set ``attrs`` to solve the local equations ``parts`` can solve, then say whether every
    one of ``parts`` holds (a conjunct that cannot be evaluated here does not)."""
    for part in parts:
        if not (isinstance(part, A.Compare) and part.op == "=="):
            continue
        for side, other in ((part.left, part.right), (part.right, part.left)):
            target = _target(side, attr_vars)
            if target is None or _variables(other) & set(attr_vars.values()):
                continue
            try:
                value = evaluate(other, _context(graph, tensors, statics, attrs, attr_vars))
            except GuardError:
                continue
            _set(attrs, target, value)
            break
    ctx = _context(graph, tensors, statics, attrs, attr_vars)
    return all(guard_holds(part, ctx) for part in parts)


__all__ = ["AttrDemands", "PROPOSALS_PER_NODE", "attr_demands", "solve"]
