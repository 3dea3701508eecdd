"""Strategies of ``.fuse`` text for fuzzing the front end.

:func:`fuse_sources` generates programs from the grammar itself (``fuse.lark``, as lark
compiles it): it walks the grammar's rules, choosing an expansion at each nonterminal,
and prints terminals from a vocabulary of real op, category, variable and function names
and numbers, so most programs parse and reach the checker (unknown ops, wrong arities,
ill-typed bodies, cyclic rewrites). :func:`mutated_sources` edits real rule files token
by token (delete, duplicate, swap, insert a token of the grammar), which makes
near-valid programs the parser's recovery must handle. Either way the front end may
only ever raise a ``FuseError`` with diagnostics.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import lark
from hypothesis import strategies as st

GRAMMAR = Path(__file__).resolve().parents[1] / "lang" / "fuse.lark"

#: names the generator prints: ops, categories, variables, guard and static functions,
#: and keywords where a name may appear (lark's contextual lexer allows many of them)
_NAMES = (
    "add", "sub", "mul", "div", "relu", "exp", "log", "sqrt", "tanh", "sigmoid", "conv", "matmul", "gemm",
    "batch_norm", "reduce_sum", "reduce_max", "reduce_mean", "softmax", "transpose", "reshape", "identity",
    "erf", "where", "max", "min", "sum", "cast", "concat", "select", "pow", "rsqrt",
    "elemwise", "broadcast", "injective", "reduce", "complex", "opaque", "commutative", "stitch", "horizontal",
    "x", "y", "w", "b", "c", "r", "m", "axis", "axes", "eps", "attrs", "keepdims", "epsilon", "perm", "shape", "p",
    "const", "rank", "size", "dim", "value", "one_use", "same_shape", "is_scalar", "is_float", "all_equal",
    "broadcasting", "range", "len", "compose", "prod", "fired", "count", "nodes", "equivalent", "kernels",
    "grouped", "apollo", "tvm", "dp", "max_ops", "f32", "f64", "i64", "bool", "random", "pi", "def", "test",
    "input", "output", "_", "dtype", "float32",
)
_STRINGS = ('"std/ops.fuse"', '"std/algebra.fuse"', '"simplify.fuse"', '"missing.fuse"', '"tanh"', '"none"',
            '"h100"', '""', '"a\\"b"', '"std/../apollo.fuse"')


def _terminal_strategies() -> dict[str, st.SearchStrategy[str]]:
    ints = st.integers(0, 12).map(str) | st.just("99999999999999999999")
    return {
        "NAME": st.sampled_from(_NAMES) | st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True),
        "INT": ints,
        "SIGNED_INT": ints | st.integers(-5, -1).map(str),
        "DECIMAL": st.sampled_from(["0.5", "1e-5", ".25", "2.", "1e400", "0.0", "3.14159"]),
        "STRING": st.sampled_from(_STRINGS),
        "CMP_OP": st.sampled_from(["==", "!=", "<=", ">=", "<", ">"]),
        "ADD_OP": st.sampled_from(["+", "-"]),
        "MUL_OP": st.sampled_from(["*", "/", "//", "%"]),
    }


@lru_cache(maxsize=1)
def _grammar():
    parser = lark.Lark(GRAMMAR.read_text(), parser="lalr", maybe_placeholders=True)
    rules: dict[str, list[tuple]] = {}
    for rule in parser.rules:
        rules.setdefault(rule.origin.name, []).append(tuple(rule.expansion))
    literals = {t.name: t.pattern.value for t in parser.terminals if t.pattern.type == "str"}
    # the fewest expansion steps each nonterminal needs to end (a fixpoint over the rules)
    depth: dict[str, int] = {}
    changed = True
    while changed:
        changed = False
        for name, expansions in rules.items():
            for expansion in expansions:
                need = [depth.get(s.name) for s in expansion if not s.is_term]
                if all(d is not None for d in need):
                    d = 1 + max(need, default=0)
                    if d < depth.get(name, 1 << 30):
                        depth[name] = d
                        changed = True
    return rules, literals, depth


@st.composite
def fuse_sources(draw, *, max_depth: int = 9, max_items: int = 6) -> str:
    """A ``.fuse`` program generated from the grammar (tokens separated by spaces or
    newlines, an occasional comment)."""
    rules, literals, depth = _grammar()
    terminals = _terminal_strategies()
    out: list[str] = []
    budget = [max_items * 40]

    def expand(name: str, level: int) -> None:
        expansions = rules[name]
        if name.startswith("__start_star") or name == "start":
            # the item list: bound the number of items, not only the depth
            for _ in range(draw(st.integers(0, max_items))):
                expand("item", 1)
            return
        budget[0] -= 1
        if level >= max_depth or budget[0] <= 0:
            shortest = min(depth.get(name, 1 << 30), 1 << 30)
            expansions = [e for e in expansions
                          if 1 + max((depth.get(s.name, 1 << 30) for s in e if not s.is_term), default=0) <= shortest]
        expansion = draw(st.sampled_from(expansions))
        for symbol in expansion:
            if symbol.is_term:
                out.append(literals[symbol.name] if symbol.name in literals else draw(terminals[symbol.name]))
                out.append(draw(st.sampled_from([" ", " ", " ", "\n", " # note\n"])))
            else:
                expand(symbol.name, level + 1)

    expand("start", 0)
    return "".join(out)


_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|#[^\n]*|[A-Za-z_][A-Za-z0-9_]*|[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?|'
                    r'\*\*|//|==|!=|<=|>=|=>|->|\.\.|\S|\s+')


@st.composite
def mutated_sources(draw, sources, *, max_edits: int = 4) -> str:
    """One of ``sources`` with up to ``max_edits`` token edits: delete, duplicate or
    swap tokens, or insert a keyword, punctuation or name of the language."""
    rules, literals, _ = _grammar()
    vocabulary = sorted(set(literals.values())) + list(_NAMES[:40]) + ["1", "0.5", '"x"', "\n"]
    tokens = _TOKEN.findall(draw(st.sampled_from(list(sources))))
    for _ in range(draw(st.integers(1, max_edits))):
        if not tokens:
            tokens = [draw(st.sampled_from(vocabulary))]
            continue
        k = draw(st.integers(0, len(tokens) - 1))
        edit = draw(st.sampled_from(["delete", "duplicate", "swap", "insert", "replace"]))
        if edit == "delete":
            del tokens[k]
        elif edit == "duplicate":
            tokens.insert(k, tokens[k])
        elif edit == "swap" and k + 1 < len(tokens):
            tokens[k], tokens[k + 1] = tokens[k + 1], tokens[k]
        elif edit == "insert":
            tokens.insert(k, " " + draw(st.sampled_from(vocabulary)) + " ")
        else:
            tokens[k] = " " + draw(st.sampled_from(vocabulary)) + " "
    return "".join(tokens)


__all__ = ["GRAMMAR", "fuse_sources", "mutated_sources"]
