"""Strategies of ``.fuse`` text for fuzzing the front end.

:func:`fuse_sources` generates programs from the grammar itself (``fuse.lark``, as lark
compiles it): it walks the grammar's rules, choosing an expansion at each nonterminal,
and prints terminals from a vocabulary of real op, category, variable and function names
and numbers, so most programs parse and reach the checker (unknown ops, wrong arities,
ill-typed bodies, cyclic rewrites). :func:`mutated_sources` edits real rule files token
by token (delete, duplicate, swap, insert a token of the grammar), which makes
near-valid programs the parser's recovery must handle. :func:`hostile_sources` makes
programs that ask for too much: expressions nested around and far past the nesting
limit, static values past the integer, list and step limits, chains of defs whose
expansion explodes, imports of things that are not rule files, ill-typed guards.
Whatever the text, the front end may only ever raise a ``FuseError`` with diagnostics.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import lark
from hypothesis import strategies as st

from fusionlang.lang.limits import MAX_NESTING

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
        # mostly a real rule file, so an import often loads; the odd strings stay for the errors
        "STRING": st.sampled_from(_STRINGS[:3]) | st.sampled_from(_STRINGS),
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

    # half the programs import the standard ops and categories first, so what they name is
    # often defined and they get past the loader to the checker's deeper passes
    if draw(st.booleans()):
        out.append('import "std/ops.fuse"\n')
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


#: ways to nest an expression ``n`` deep around a tensor ``x``
_NESTINGS = {
    "sum": lambda n: " + ".join(["x"] * (n + 1)),
    "calls": lambda n: "neg(" * n + "x" + ")" * n,
    "minus": lambda n: "-" * n + "x",
    "parens": lambda n: "(" * n + "x" + ")" * n,
    "power": lambda n: " ** ".join(["x"] * (n + 1)),
    "lists": lambda n: "len(" + "[" * n + "1" + "]" * n + ") + x",
    "nots": lambda n: "select(" + "not " * n + "rank(x) > 1, x, x)",
}

#: where a nested expression goes: the template's {} receives it
_PLACES = (
    "rewrite r: mul(x, y) => {}\n",
    "rewrite r: mul(x, y) where {} > 0 => add(x, y)\n",
    "rewrite r: mul(x, y) => reshape(x) {{shape=[{}]}}\n",
    "def f(x) = {}\nrewrite r: mul(x, y) => f(x)\n",
    "decompose gelu(x) {{ return {} }}\n",
    "test t {{ input x: float32[4]\n y = {}\n output y\n expect nodes > 0 }}\n",
)

#: static values past a limit: constant, or depending on the graph through rank(x)
_HUGE_VALUES = (
    "10 ** 10 ** 10 ** {k}", "2 ** (1000 * {k})", "len([1] * (100000000000 * {k}))",
    "len(range(0, 10 ** 12 * {k}))", "len([[[{k}] * 1000] * 1000] * 1000)", "prod([2 ** 900] * (2 * {k}))",
    "len(range(0, 9000 * {k}) + range(0, 9000))", "{k} // 0", "{k} % (1 - 1)", '{k} + "a"', "[{k}] - 1",
)

#: import targets that are not readable rule files
_IMPORTS = ("/etc/passwd", "/etc/shadow", "/proc/self/mem", "/dev/zero", "/dev/stdin", ".", "..", "/",
            "missing.fuse", "/proc/self/mem.fuse", "std", "std/", "x.fuse/", "", "\\0", "/tmp")


@st.composite
def hostile_sources(draw) -> str:
    """A program that asks for too much (see the module docstring); each is small to
    write and, unbounded, would exhaust the stack, the memory or the clock."""
    kind = draw(st.sampled_from(["nesting", "huge", "defs", "import", "many"]))
    if kind == "nesting":
        # far past the limit too: hypothesis raises the recursion limit while it runs
        depth = draw(st.integers(MAX_NESTING - 3, MAX_NESTING + 3) | st.integers(1, 50 * MAX_NESTING))
        nested = _NESTINGS[draw(st.sampled_from(sorted(_NESTINGS)))](depth)
        return draw(st.sampled_from(_PLACES)).format(nested)
    if kind == "huge":
        value = draw(st.sampled_from(_HUGE_VALUES)).format(k=draw(st.sampled_from(["1", "rank(x)", "2"])))
        place = draw(st.sampled_from([
            "rewrite r: add(x, y) where {} > 1 => mul(x, y)\n",
            "rewrite r: add(x, y) => reshape(x) {{shape=[{}]}}\n",
            "decompose gelu(x) {{ n = {}\n return x }}\n"]))
        return place.format(value)
    if kind == "defs":
        length, fan_out = draw(st.integers(1, 45)), draw(st.integers(1, 3))
        lines = ["def f0(x) { return neg(x) }"]
        for k in range(1, length + 1):
            calls = "".join(f" a{j} = f{k - 1}({'x' if j == 0 else f'a{j - 1}'})\n" for j in range(fan_out))
            lines.append(f"def f{k}(x) {{\n{calls} return a{fan_out - 1}\n}}")
        use = draw(st.sampled_from(["rewrite r: add(x, y) => f{n}(x)",
                                    "test t {{ input x: float32[4]\n y = f{n}(x)\n output y\n expect nodes > 0 }}",
                                    "decompose gelu(x) {{ return f{n}(x) }}", ""]))
        return "\n".join(lines) + "\n" + use.format(n=length) + "\n"
    if kind == "import":
        return f'import "{draw(st.sampled_from(_IMPORTS))}"\nrewrite r: add(x, y) => mul(x, y)\n'
    n = draw(st.integers(100, 400))
    return "".join(f"rewrite r{k}: add(x, mul(y, {k})) => add(x, neg(y))\n" for k in range(n))


__all__ = ["GRAMMAR", "fuse_sources", "hostile_sources", "mutated_sources"]
