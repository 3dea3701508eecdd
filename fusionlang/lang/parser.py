"""Parser: .fuse text -> :class:`~fusionlang.lang.ast.Module`, or syntax diagnostics.

lark (LALR, contextual lexer) builds a parse tree; a Transformer turns it into the AST,
stamping every node with its span. After a syntax error the file is split at lines
that start a top-level item and each piece is parsed on its own, so one run reports
every broken item rather than only the first.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from fusionlang.lang import ast as A
from fusionlang.lang.diagnostics import Diagnostics, Span, remember_source

_ITEM_START = re.compile(r"^(import|categories|class|def|decompose|rewrite|fuse|strategy|test)\b", re.M)

#: how terminals read in "expected ..." messages
_TERMINAL_WORDS = {
    "NAME": "a name",
    "INT": "an integer",
    "DECIMAL": "a number",
    "SIGNED_INT": "an integer",
    "STRING": "a string",
    "CMP_OP": "a comparison",
    "ADD_OP": "'+' or '-'",
    "MUL_OP": "'*' or '/'",
    "$END": "end of file",
}


@lru_cache(maxsize=1)
def _parser() -> Lark:
    grammar = resources.files("fusionlang.lang").joinpath("fuse.lark").read_text(encoding="utf-8")
    # cache=True keeps the built LALR tables in the temp dir: building them costs ~0.1 s
    return Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=True, cache=True)


def parse_module(text: str, path: str, diags: Diagnostics) -> A.Module | None:
    """Parse ``text`` (display path ``path``); None, with syntax errors in ``diags``, if it fails."""
    remember_source(path, text)
    try:
        tree = _parser().parse(text)
    except UnexpectedInput:
        _report_all_syntax_errors(text, path, diags)
        return None
    try:
        items = _ToAst(path, 0).transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, _LiteralError):
            diags.error(exc.orig_exc.span, exc.orig_exc.message, exc.orig_exc.hint)
            return None
        raise
    return A.Module(path, tuple(items))


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
    if len(words) > 8:
        words = words[:8] + ["..."]
    return ", ".join(words)


def _syntax_diagnostic(exc: UnexpectedInput, chunk: str, path: str, line_offset: int):
    from fusionlang.lang.diagnostics import Diagnostic

    if isinstance(exc, UnexpectedCharacters):
        char = chunk[exc.pos_in_stream] if exc.pos_in_stream < len(chunk) else "?"
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
    elif "__ANON_0" in expected or "MORETHAN" in expected:
        hint = ""
    if not hint and _ITEM_START.match(str(token)) and token.column == 1:
        hint = "the previous item is incomplete"
    if not hint and "RPAR" in expected and "COMMA" in expected:
        hint = "separate arguments with ','"
    return Diagnostic(span, "error", f"unexpected {_describe_token(token)}; expected {_expected_words(expected)}",
                      hint)


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


@v_args(meta=True)
class _ToAst(Transformer):
    def __init__(self, path: str, line_offset: int):
        super().__init__()
        self.path = path
        self.line_offset = line_offset

    # ----- helpers --------------------------------------------------------------------
    def _span(self, meta) -> Span:
        if getattr(meta, "empty", True):
            return Span(self.path, 0, 0)
        return Span(self.path, meta.line + self.line_offset, meta.column, meta.end_line + self.line_offset,
                    meta.end_column)

    def _tok_span(self, tok: Token) -> Span:
        return Span(self.path, tok.line + self.line_offset, tok.column, (tok.end_line or tok.line) + self.line_offset,
                    tok.end_column or tok.column + len(tok))

    def _name(self, tok: Token) -> A.Name:
        return A.Name(str(tok), self._tok_span(tok))

    @staticmethod
    def _kept(children):
        """Children without the keyword tokens lark keeps for named keyword terminals."""
        return [c for c in children if not (isinstance(c, Token) and c.type in ("DEF", "SHARED"))]

    # ----- items ----------------------------------------------------------------------
    def start(self, meta, children):
        return children

    def import_(self, meta, children):
        return A.Import(_unescape(str(children[0])), self._span(meta))

    def categories(self, meta, children):
        return A.Categories(tuple(self._name(t) for t in children), self._span(meta))

    def class_decl(self, meta, children):
        ops, props, guard = children
        category = None
        flags = []
        for name in props:
            if name.text in _CLASS_FLAGS or category is not None:
                flags.append(name)  # a second category lands here; the checker reports it
            else:
                category = name
        return A.ClassDecl(ops, category, tuple(flags), guard, self._span(meta))

    def class_ops(self, meta, children):
        return tuple(self._name(t) for t in children)

    def class_props(self, meta, children):
        return tuple(self._name(t) for t in children)

    def def_decl(self, meta, children):
        name, params, attrs, rhs = self._kept(children)
        formula = body = None
        if isinstance(rhs, tuple) and all(isinstance(s, (A.Let, A.Return)) for s in rhs):
            body = rhs
        else:
            formula = rhs
        return A.DefDecl(self._name(name), params, attrs or (), formula, body, self._span(meta))

    def decompose(self, meta, children):
        name, params, attrs, body = children
        return A.Decompose(self._name(name), params, attrs or (), body, self._span(meta))

    def params(self, meta, children):
        return tuple(self._name(t) for t in children)

    def attr_params(self, meta, children):
        return tuple(children)

    def attr_param(self, meta, children):
        name, default = children
        return A.AttrParam(self._name(name), default, self._span(meta))

    def block(self, meta, children):
        return tuple(children)

    def let(self, meta, children):
        *names, value = children
        return A.Let(tuple(self._name(t) for t in names), value, self._span(meta))

    def return_(self, meta, children):
        return A.Return(tuple(children), self._span(meta))

    def rewrite(self, meta, children):
        name, priority, shared, pattern, guard, replacement = children
        return A.Rewrite(self._name(name), priority if priority is not None else 0, shared is not None, pattern,
                         guard, replacement, self._span(meta))

    def priority(self, meta, children):
        return int(str(children[0]))

    def fuse(self, meta, children):
        producers, consumers, result, *opts = children
        opts = tuple(o for o in opts if o is not None)
        return A.FuseDecl(producers, consumers, self._name(result), opts, self._span(meta))

    def alts(self, meta, children):
        return tuple(self._name(t) for t in children)

    def fuse_opt(self, meta, children):
        name, value = children
        if isinstance(value, A.Num):
            value = value.value
        elif isinstance(value, A.Str):
            value = value.value
        elif isinstance(value, A.Neg) and isinstance(value.operand, A.Num):
            value = -value.operand.value
        elif isinstance(value, A.Var):
            value = value.name
        return A.FuseOpt(self._name(name), value, self._span(meta))

    def name_value(self, meta, children):
        return A.Var(str(children[0]), self._tok_span(children[0]))

    def strategy(self, meta, children):
        name, *options = children
        return A.StrategyDecl(self._name(name), tuple(o for o in options if o is not None), self._span(meta))

    def option(self, meta, children):
        name, value = children
        return A.Option(self._name(name), value, self._span(meta))

    def test(self, meta, children):
        name, strategy, *stmts = children
        return A.TestDecl(self._name(name), self._name(strategy) if strategy is not None else None, tuple(stmts),
                          self._span(meta))

    def t_input(self, meta, children):
        name, ttype = children
        return A.TInput(self._name(name), ttype, self._span(meta))

    def t_const(self, meta, children):
        name, ttype, init = children
        return A.TConst(self._name(name), ttype, init, self._span(meta))

    def t_output(self, meta, children):
        return A.TOutput(tuple(self._name(t) for t in children), self._span(meta))

    def t_expect(self, meta, children):
        return A.TExpect(children[0], self._span(meta))

    def ttype(self, meta, children):
        dtype, *dims = children
        return A.TType(self._name(dtype), tuple(int(str(d)) for d in dims if d is not None), self._span(meta))

    # ----- expressions ----------------------------------------------------------------
    def or_(self, meta, children):
        return self._boolop("or", children, meta)

    def and_(self, meta, children):
        return self._boolop("and", children, meta)

    def _boolop(self, op, children, meta):
        items = []
        for c in children:
            items.extend(c.items if isinstance(c, A.BoolOp) and c.op == op else [c])
        return A.BoolOp(op, tuple(items), self._span(meta))

    def not_(self, meta, children):
        return A.Not(children[0], self._span(meta))

    def compare(self, meta, children):
        left, op, right = children
        return A.Compare(str(op), left, right, self._span(meta))

    def binop(self, meta, children):
        left, op, right = children
        return A.BinOp(str(op), left, right, self._span(meta))

    def pow(self, meta, children):
        return A.BinOp("**", children[0], children[1], self._span(meta))

    def neg(self, meta, children):
        operand = children[0]
        return A.Neg(operand, self._span(meta))

    def index(self, meta, children):
        return A.Index(children[0], children[1], self._span(meta))

    def int_(self, meta, children):
        return A.Num(int(str(children[0])), self._tok_span(children[0]))

    def float_(self, meta, children):
        tok = children[0]
        value = float(str(tok))
        if value != value or value in (float("inf"), float("-inf")):
            raise _LiteralError(self._tok_span(tok), f"number {str(tok)!r} is out of range")
        return A.Num(value, self._tok_span(tok))

    def string(self, meta, children):
        return A.Str(_unescape(str(children[0])), self._tok_span(children[0]))

    def var(self, meta, children):
        return A.Var(str(children[0]), self._tok_span(children[0]))

    def call(self, meta, children):
        name, *rest = children
        attrs = rest[-1] if rest and (rest[-1] is None or isinstance(rest[-1], _Attrs)) else None
        args = rest[:-1] if rest and (rest[-1] is None or isinstance(rest[-1], _Attrs)) else rest
        args = tuple(a for a in args if a is not None)
        return A.Call(self._name(name), args, tuple(attrs) if attrs is not None else None, self._span(meta))

    def bind(self, meta, children):
        name, expr = children
        return A.Bind(self._name(name), expr, self._span(meta))

    def list(self, meta, children):
        return A.ListE(tuple(c for c in children if c is not None), self._span(meta))

    def attrs(self, meta, children):
        return _Attrs(c for c in children if c is not None)

    def attr_kv(self, meta, children):
        name, value = children
        return A.AttrItem(self._name(name), value, self._span(meta))

    def attr_rest(self, meta, children):
        return A.AttrRest(self._name(children[0]), self._span(meta))


class _Attrs(tuple):
    """Marks the ``{...}`` of a call among its children."""

    def __new__(cls, items):
        return super().__new__(cls, tuple(items))


_CLASS_FLAGS = ("commutative",)


