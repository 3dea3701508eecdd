"""How much work a rule file may ask for.

A .fuse file is input like a model: it must not be able to exhaust the stack, the
memory or the clock. Each limit is far above what real rules use and is reported, at
the span that passes it, as an ordinary diagnostic (docs/language.md, "Limits").
"""

from __future__ import annotations

#: parse-tree levels an expression may nest below its item. Every stage after parsing
#: (transformer, checker, guard evaluation, sympy formulas, instantiation, printer)
#: recurses over expressions; this keeps them all far from Python's recursion limit.
MAX_NESTING = 100

#: bits of an integer a static expression may compute (shapes and sizes need < 64)
MAX_INT_BITS = 1024

#: elements a static list may hold, nested lists counted by their leaves
MAX_LIST_ELEMENTS = 10_000

#: steps (expression nodes visited plus list elements built) one evaluation may take
MAX_EVAL_STEPS = 200_000

#: nodes the full expansion of one compound op (its decomposition, and those of the
#: compound ops it builds, in turn) may build
MAX_EXPANSION_NODES = 100_000

#: steps every guard of a fuse table may take, together, while one graph is partitioned:
#: this many per node of the graph, and at least GUARD_STEPS_FLOOR (200 guarded `nofuse`
#: entries, each within MAX_EVAL_STEPS, made the partition of a 122-op model take 419 s)
GUARD_STEPS_PER_NODE, GUARD_STEPS_FLOOR = 10_000, 1_000_000


def guard_steps_for(nodes: int) -> int:
    """The guard steps the partition of a graph of ``nodes`` nodes may take."""
    return max(GUARD_STEPS_FLOOR, GUARD_STEPS_PER_NODE * nodes)
