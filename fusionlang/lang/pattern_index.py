"""Rewrite patterns indexed by the shape of their top, for the static loop check.

The loop check asks, for every op a replacement builds, which rewrite patterns could
match it. Trying every pattern made lint quadratic in the number of rules (3,000 rules
took 51 s); the index answers with the patterns whose root op, arity and kind of each
operand (any value, a literal, or an op by name) fit the term, which ``may_match`` then
confirms. Lookups try at most 2 ** MAX_KEYED_OPERANDS keys per operand order.
"""

from __future__ import annotations

import itertools
from collections import defaultdict

from fusionlang.lang.patterns import PFolded, PLit, POp, PVar

#: operands of ops with more operands than this are left out of the key
MAX_KEYED_OPERANDS = 4

_ANY = ("any",)
_LITERAL = ("literal",)


def _pattern_operand(p) -> tuple:
    if isinstance(p, POp):
        return ("op", p.op)
    if isinstance(p, PLit):
        return _LITERAL
    return _ANY


def _term_operand_choices(t) -> tuple[tuple, ...]:
    """The pattern operand kinds that could match term operand ``t``."""
    if isinstance(t, POp):
        return (_ANY, ("op", t.op))
    if isinstance(t, PFolded):
        return (_ANY, _LITERAL)
    if isinstance(t, PVar):
        return (_ANY,)
    return (_ANY,)


def _key(op: str, operands) -> tuple:
    if len(operands) > MAX_KEYED_OPERANDS:
        return (op, len(operands), None)
    return (op, len(operands), tuple(_pattern_operand(o) for o in operands))


class PatternIndex:
    """Items (rules) by the top of their POp pattern."""

    def __init__(self):
        self._buckets: dict[tuple, list] = defaultdict(list)

    def add(self, item, pattern: POp) -> None:
        self._buckets[_key(pattern.op, pattern.operands)].append(item)

    def candidates(self, term, commutative) -> list:
        """Items whose pattern may match ``term`` (a superset of those may_match accepts),
        each once, in the order they were added per key."""
        if not isinstance(term, POp):
            return []
        n = len(term.operands)
        if n > MAX_KEYED_OPERANDS:
            return list(self._buckets.get((term.op, n, None), ()))
        orders = [term.operands]
        if commutative(term.op) and n == 2:
            orders.append(term.operands[::-1])
        found, seen = [], set()
        for operands in orders:
            for combo in itertools.product(*(_term_operand_choices(t) for t in operands)):
                for item in self._buckets.get((term.op, n, combo), ()):
                    if id(item) not in seen:
                        seen.add(id(item))
                        found.append(item)
        return found
