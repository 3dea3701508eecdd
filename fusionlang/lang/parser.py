"""Parser: .fuse text -> :class:`~fusionlang.lang.ast.Module`, or syntax diagnostics.

lark (LALR, contextual lexer) builds a parse tree; a Transformer turns it into the AST,
stamping every node with its span. After a syntax error the file is split at lines
that start a top-level item and each piece is parsed on its own, so one run reports
every broken item rather than only the first.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import cast

from lark import Lark, Token, Transformer, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from fusionlang.lang import ast as A
from fusionlang.lang.diagnostics import Diagnostic, Diagnostics, Span, remember_source
from fusionlang.lang.limits import MAX_NESTING
from fusionlang.lang.parse_tables import build_parser

#: the names that are boolean literals in expressions (guards, attribute values, formulas)
BOOLEAN_LITERALS = {"true": True, "false": False}

_ITEM_START = re.compile(r"^(import|categories|class|def|decompose|rewrite|fuse|nofuse|strategy|test)\b", re.M)

#: how terminals read in "expected ..." messages
_TERMINAL_WORDS = {
    "NAME": "a name",
    "INT": "an integer",
    "DECIMAL": "a number",
    "SIGNED_INT": "an integer",
    "STRING": "a string",
    "LOWERING": "'lowering'",
    "CMP_OP": "a comparison",
    "ADD_OP": "'+' or '-'",
    "MUL_OP": "'*' or '/'",
    "$END": "end of file",
}


@lru_cache(maxsize=1)
def _parser() -> Lark:
    # once per process, from the shipped JSON tables (never lark's pickle cache: see parse_tables)
    return build_parser()


def parse_module(text: str, path: str, diags: Diagnostics) -> A.Module | None:
    """Parse ``text`` (display path ``path``); None, with syntax errors in ``diags``, if it fails."""
    remember_source(path, text)
    try:
        tree = _parser().parse(text)
    except UnexpectedInput:
        _report_all_syntax_errors(text, path, diags)
        return None
    if _report_too_deep(tree, path, diags):
        return None
    try:
        items = _ToAst(path).transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, _LiteralError):
            diags.error(exc.orig_exc.span, exc.orig_exc.message, exc.orig_exc.hint)
            return None
        raise
    return A.Module(path, tuple(items))


def _report_too_deep(tree: Tree, path: str, diags: Diagnostics) -> bool:
    """Report each item whose expressions nest deeper than MAX_NESTING. The walk keeps
    its own stack, so any depth is measured safely, before any recursive stage runs."""
    found = False
    for item in tree.children:
        too_deep = _first_too_deep(item)
        if too_deep is not None:
            line, col = _first_token_pos(too_deep)
            diags.error(Span(path, line, col, line, col + 1), f"expression too deep: it nests more than "
                        f"{MAX_NESTING} levels", "split it with let statements or helper defs")
            found = True
    return found


def _first_too_deep(item) -> Tree | None:
    """The outermost subtree of ``item`` that sits deeper than MAX_NESTING, or None."""
    stack = [(item, 0)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, Tree):
            continue
        if depth > MAX_NESTING:
            return node
        # leftmost first, so the error points where the reader meets the nesting
        stack.extend((child, depth + 1) for child in reversed(node.children))
    return None


def _first_token_pos(node) -> tuple[int, int]:
    """Line and column of the first token under ``node`` (found without recursion)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, Token):
            return cast(int, current.line), cast(int, current.column)  # (lark types them optional; ours are set)
        if isinstance(current, Tree):
            stack.extend(reversed(current.children))
    return 1, 1


def _report_all_syntax_errors(text: str, path: str, diags: Diagnostics) -> None:
    starts = [m.start() for m in _ITEM_START.finditer(text)] or [0]
    if starts[0] != 0:
        starts.insert(0, 0)
    starts.append(len(text))
    reported = False
    for begin, end in zip(starts, starts[1:]):
        chunk = text[begin:end]
        line_offset = text.count("\n", 0, begin)
        try:
            _parser().parse(chunk)
        except UnexpectedInput as exc:
            diags.items.append(_syntax_diagnostic(exc, chunk, path, line_offset))
            reported = True
    if not reported:
        # the pieces parse alone but not together (a split inside a block): report the
        # first error of the whole file, which is then exact
        try:
            _parser().parse(text)
        except UnexpectedInput as exc:
            diags.items.append(_syntax_diagnostic(exc, text, path, 0))


def _describe_token(token: Token) -> str:
    if token.type == "$END":
        return "end of file"
    return repr(str(token))


def _expected_words(expected) -> str:
    words = []
    parser = _parser()
    for name in sorted(expected):
        if name in _TERMINAL_WORDS:
            word = _TERMINAL_WORDS[name]
        else:
            try:
                word = repr(parser.get_terminal(name).pattern.value)
            except KeyError:
                word = name.lower()
        if word not in words:
            words.append(word)
    return ", ".join(words)


def _syntax_diagnostic(exc: UnexpectedInput, chunk: str, path: str, line_offset: int):
    if isinstance(exc, UnexpectedCharacters):
        pos = cast(int, exc.pos_in_stream)  # (always set on UnexpectedCharacters)
        char = chunk[pos] if pos < len(chunk) else "?"
        span = Span(path, exc.line + line_offset, exc.column, exc.line + line_offset, exc.column + 1)
        hint = ""
        if char == "'":
            hint = "strings use double quotes"
        elif char == "=" or char == "!":
            hint = "compare with '==' or '!='"
        return Diagnostic(span, "error", f"unexpected character {char!r}", hint)
    if isinstance(exc, UnexpectedEOF) or (isinstance(exc, UnexpectedToken) and exc.token.type == "$END"):
        lines = chunk.rstrip().splitlines() or [""]
        line = len(lines) + line_offset
        col = len(lines[-1]) + 1
        expected = exc.expected if isinstance(exc, UnexpectedEOF) else exc.expected
        hint = "a '{' is not closed" if "RBRACE" in expected else ""
        return Diagnostic(Span(path, line, col, line, col + 1), "error",
                          f"unexpected end of input; expected {_expected_words(expected)}", hint)
    assert isinstance(exc, UnexpectedToken)
    token = exc.token
    line = token.line + line_offset
    span = Span(path, line, token.column, (token.end_line or token.line) + line_offset,
                token.end_column or token.column + 1)
    expected = set(exc.expected)
    hint = ""
    if "EQUAL" in expected and str(token) == "==":
        hint = "'=' binds a name or an attribute; '==' compares"
    elif str(token) == "=" and "CMP_OP" in expected:
        hint = "compare with '=='"
    words = _expected_words(expected)
    if not hint and "'=>'" in words:
        hint = "a rewrite reads: rewrite NAME: PATTERN [where GUARD] => REPLACEMENT"
    if not hint and _ITEM_START.match(str(token)) and token.column == 1:
        hint = "the previous item is incomplete"
    if not hint and "RPAR" in expected and "COMMA" in expected:
        hint = "separate arguments with ','"
    if len(expected) > 6:
        # a long list of alternatives says little; keep the message short and put it last
        hint = f"{hint}; " if hint else ""
        return Diagnostic(span, "error", f"unexpected {_describe_token(token)}", f"{hint}expected one of: {words}")
    return Diagnostic(span, "error", f"unexpected {_describe_token(token)}; expected {words}", hint)


class _LiteralError(Exception):
    def __init__(self, span: Span, message: str, hint: str = ""):
        self.span, self.message, self.hint = span, message, hint


def _unescape(text: str) -> str:
    body = text[1:-1]
    out, k = [], 0
    escapes = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}
    while k < len(body):
        ch = body[k]
        if ch == "\\" and k + 1 < len(body):
            nxt = body[k + 1]
            out.append(escapes.get(nxt, "\\" + nxt))
            k += 2
        else:
            out.append(ch)
            k += 1
    return "".join(out)


#: keyword tokens kept in the tree only for their positions
_KEYWORDS = frozenset({"IMPORT", "CATEGORIES", "CLASS", "DEF", "DECOMPOSE", "RETURN", "REWRITE", "PRIORITY", "FUSE",
                       "STRATEGY", "TEST", "INPUT", "CONST", "OUTPUT", "EXPECT", "NOT", "NEG", "LSQB", "SHARED"})
#: keyword tokens of items added later, kept apart so concurrent additions merge cleanly
_KEYWORDS |= {"SIBLING", "NOFUSE", "ORACLE"}
_KEYWORDS |= {"ACCEPTS"}
_KEYWORDS |= {"PATTERN", "AS", "WITHOUT"}


def _first_pos(items):
    for item in items:
        if isinstance(item, Token):
            return item.line, item.column
        span = getattr(item, "span", None)
        if span is not None and span.line:
            return span.line, span.col
        if isinstance(item, tuple):
            found = _first_pos(item)
            if found:
                return found
    return None


def _last_pos(items):
    for item in reversed(items):
        if isinstance(item, Token):
            return item.end_line or item.line, item.end_column or item.column + len(item)
        span = getattr(item, "span", None)
        if span is not None and span.line:
            return span.end_line or span.line, span.end_col or span.col
        if isinstance(item, tuple):
            found = _last_pos(item)
            if found:
                return found
    return None


def _positioned(method):
    """Wrap a transformer method: compute the span from all children (keywords
    included), then call it with the keyword tokens removed."""

    def wrapper(self, children):
        first, last = _first_pos(children), _last_pos(children)
        if first is None:
            span = Span(self.path, 0, 0)
        else:
            last = last or first
            span = Span(self.path, first[0], first[1], last[0], last[1])
        kept = [c for c in children if not (isinstance(c, Token) and c.type in _KEYWORDS)]
        return method(self, kept, span, children)

    wrapper.__name__ = method.__name__
    return wrapper


class _ToAst(Transformer):
    """Parse tree -> AST. Spans come from the tokens (lark's propagate_positions is
    the costliest part of parsing, and tokens carry everything a span needs)."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def _tok_span(self, tok: Token) -> Span:
        line, column = cast(int, tok.line), cast(int, tok.column)  # the lexer tracks positions
        return Span(self.path, line, column, tok.end_line or line, tok.end_column or column + len(tok))

    def _name(self, tok: Token) -> A.Name:
        return A.Name(str(tok), self._tok_span(tok))

    # ----- items ----------------------------------------------------------------------
    def start(self, children):
        return children

    @_positioned
    def import_(self, c, span, raw):
        path, lowering, *without = c
        dropped = tuple(self._name(t) for t in without if t is not None and t.type == "NAME")
        return A.Import(_unescape(str(path)), span, lowering=lowering is not None, without=dropped)

    @_positioned
    def categories(self, c, span, raw):
        return A.Categories(tuple(self._name(t) for t in c), span)

    @_positioned
    def class_decl(self, c, span, raw):
        ops, props, guard = c
        category = None
        flags = []
        for name in props:
            if name.text in _CLASS_FLAGS or category is not None:
                flags.append(name)  # a second category lands here; the checker reports it
            else:
                category = name
        return A.ClassDecl(ops, category, tuple(flags), guard, span)

    def class_ops(self, children):
        return tuple(self._name(t) for t in children)

    def class_props(self, children):
        return tuple(self._name(t) for t in children)

    @_positioned
    def def_decl(self, c, span, raw):
        name, params, attrs, rhs, *oracles = c
        formula = body = None
        if isinstance(rhs, _Block):
            body = tuple(rhs)
        else:
            formula = rhs
        return A.DefDecl(self._name(name), params, attrs or (), formula, body, span, tuple(oracles))

    @_positioned
    def oracle_body(self, c, span, raw):
        return A.Oracle(body=tuple(c[0]), span=span)

    @_positioned
    def oracle_vector(self, c, span, raw):
        *inputs, attrs, expected = c
        return A.Oracle(inputs=tuple(inputs), attrs=tuple(attrs or ()), expected=expected, span=span)

    @_positioned
    def decompose(self, c, span, raw):
        name, params, attrs, accepts, body = c
        return A.Decompose(self._name(name), params, attrs or (), tuple(body), span, accepts=accepts or ())

    def params(self, children):
        return tuple(self._name(t) for t in children)

    def attr_params(self, children):
        return tuple(children)

    @_positioned
    def attr_param(self, c, span, raw):
        name, default = c
        return A.AttrParam(self._name(name), default, span)

    def block(self, children):
        return _Block(children)

    @_positioned
    def let(self, c, span, raw):
        *names, value = c
        return A.Let(tuple(self._name(t) for t in names), value, span)

    @_positioned
    def return_(self, c, span, raw):
        return A.Return(tuple(c), span)

    @_positioned
    def rewrite(self, c, span, raw):
        name, priority, shared, accepts, pattern, guard, replacement = (
            c if len(c) == 7 else (c[0], c[1], None, *c[2:]))
        shared = any(isinstance(t, Token) and t.type == "SHARED" for t in raw)
        return A.Rewrite(self._name(name), priority if priority is not None else 0, shared, pattern, guard,
                         replacement, span, accepts=accepts or ())

    @_positioned
    def priority(self, c, span, raw):
        return int(str(c[0]))

    def accepts(self, children):
        return tuple(self._name(t) for t in children if not (isinstance(t, Token) and t.type == "ACCEPTS"))

    @_positioned
    def fuse(self, c, span, raw):
        producers, consumers, result, *opts, guard = c
        opts = tuple(o for o in opts if o is not None)
        return A.FuseDecl(producers, consumers, self._name(result), opts, span, guard=guard)

    @_positioned
    def nofuse(self, c, span, raw):
        producers, consumers, guard = c
        return A.NoFuseDecl(producers, consumers, span, guard)

    @_positioned
    def fuse_sibling(self, c, span, raw):
        first, second, result, *opts = c
        opts = tuple(o for o in opts if o is not None)
        return A.FuseDecl(first, second, self._name(result), opts, span, sibling=True)

    @_positioned
    def fuse_pattern(self, c, span, raw):
        name, pattern, guard, *rest = c  # rest: the result, after an absent `as`'s placeholder
        result = rest[-1]
        return A.FusePattern(self._name(name), pattern, guard, self._name(result) if result is not None else None,
                             span)

    def alts(self, children):
        return tuple(self._name(t) for t in children)

    @_positioned
    def fuse_opt(self, c, span, raw):
        name, value = c
        if isinstance(value, A.Num):
            value = value.value
        elif isinstance(value, A.Str):
            value = value.value
        elif isinstance(value, A.Neg) and isinstance(value.operand, A.Num):
            value = -value.operand.value
        elif isinstance(value, A.Var):
            value = value.name
        return A.FuseOpt(self._name(name), value, span)

    def name_value(self, children):
        return A.Var(str(children[0]), self._tok_span(children[0]))

    @_positioned
    def strategy(self, c, span, raw):
        name, *options = c
        return A.StrategyDecl(self._name(name), tuple(o for o in options if o is not None), span)

    @_positioned
    def option(self, c, span, raw):
        name, value = c
        return A.Option(self._name(name), value, span)

    @_positioned
    def test(self, c, span, raw):
        name, strategy, *stmts = c
        return A.TestDecl(self._name(name), self._name(strategy) if strategy is not None else None, tuple(stmts),
                          span)

    @_positioned
    def t_input(self, c, span, raw):
        name, ttype = c
        return A.TInput(self._name(name), ttype, span)

    @_positioned
    def t_const(self, c, span, raw):
        name, ttype, init = c
        return A.TConst(self._name(name), ttype, init, span)

    @_positioned
    def t_output(self, c, span, raw):
        return A.TOutput(tuple(self._name(t) for t in c), span)

    @_positioned
    def t_expect(self, c, span, raw):
        return A.TExpect(c[0], span)

    @_positioned
    def ttype(self, c, span, raw):
        dtype, *dims = c
        return A.TType(self._name(dtype), tuple(int(str(d)) for d in dims if d is not None), span)

    # ----- expressions ----------------------------------------------------------------
    @_positioned
    def or_(self, c, span, raw):
        return self._boolop("or", c, span)

    @_positioned
    def and_(self, c, span, raw):
        return self._boolop("and", c, span)

    def _boolop(self, op, children, span):
        items = []
        for c in children:
            items.extend(c.items if isinstance(c, A.BoolOp) and c.op == op else [c])
        return A.BoolOp(op, tuple(items), span)

    @_positioned
    def not_(self, c, span, raw):
        return A.Not(c[0], span)

    @_positioned
    def compare(self, c, span, raw):
        left, op, right = c
        return A.Compare(str(op), left, right, span)

    @_positioned
    def binop(self, c, span, raw):
        left, op, right = c
        return A.BinOp(str(op), left, right, span)

    @_positioned
    def pow(self, c, span, raw):
        return A.BinOp("**", c[0], c[-1], span)

    @_positioned
    def neg(self, c, span, raw):
        return A.Neg(c[0], span)

    @_positioned
    def index(self, c, span, raw):
        return A.Index(c[0], c[1], span)

    def int_(self, children):
        return A.Num(int(str(children[0])), self._tok_span(children[0]))

    def float_(self, children):
        tok = children[0]
        value = float(str(tok))
        if value != value or value in (float("inf"), float("-inf")):
            raise _LiteralError(self._tok_span(tok), f"number {str(tok)!r} is out of range")
        return A.Num(value, self._tok_span(tok))

    def string(self, children):
        return A.Str(_unescape(str(children[0])), self._tok_span(children[0]))

    def var(self, children):
        text = str(children[0])
        if text in BOOLEAN_LITERALS:
            # the booleans are static values, as a number is (Num holds a bool)
            return A.Num(BOOLEAN_LITERALS[text], self._tok_span(children[0]))
        return A.Var(text, self._tok_span(children[0]))

    @_positioned
    def call(self, c, span, raw):
        name, *rest = c
        has_attrs = rest and (rest[-1] is None or isinstance(rest[-1], _Attrs))
        attrs = rest[-1] if has_attrs else None
        args = tuple(a for a in (rest[:-1] if has_attrs else rest) if a is not None)
        return A.Call(self._name(name), args, tuple(attrs) if attrs is not None else None, span)

    @_positioned
    def bind(self, c, span, raw):
        name, expr = c
        return A.Bind(self._name(name), expr, span)

    @_positioned
    def list(self, c, span, raw):
        return A.ListE(tuple(x for x in c if x is not None), span)

    def attrs(self, children):
        return _Attrs(c for c in children if c is not None)

    @_positioned
    def attr_kv(self, c, span, raw):
        name, value = c
        return A.AttrItem(self._name(name), value, span)

    @_positioned
    def attr_rest(self, c, span, raw):
        return A.AttrRest(self._name(c[0]), span)


class _Block(tuple):
    """Marks a ``{ ... }`` body among a def's children."""

    def __new__(cls, items):
        return super().__new__(cls, tuple(items))


class _Attrs(tuple):
    """Marks the ``{...}`` of a call among its children."""

    def __new__(cls, items):
        return super().__new__(cls, tuple(items))


_CLASS_FLAGS = ("commutative",)


