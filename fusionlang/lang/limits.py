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
