"""Printer: a RuleSet (or one expression) back to .fuse text.

The text of :func:`format_ruleset` parses to an equal RuleSet: imports are flattened
into one file (an ``import ... for lowering`` stays an import: its rule set is its own),
every construct is written in its canonical form, and expressions get exactly the
parentheses their tree needs.
"""

from __future__ import annotations

import re

from fusionlang.lang import ast as A

_PREC = {"or": 1, "and": 2, "not": 3, "compare": 4, "+": 5, "-": 5, "*": 6, "/": 6, "//": 6, "%": 6,
         "neg": 7, "**": 8, "postfix": 9, "atom": 10}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _prec(e) -> int:
    if isinstance(e, A.BoolOp):
        return _PREC[e.op]
    if isinstance(e, A.Not):
        return _PREC["not"]
    if isinstance(e, A.Compare):
        return _PREC["compare"]
    if isinstance(e, A.BinOp):
        return _PREC[e.op]
    if isinstance(e, A.Neg):
        return _PREC["neg"]
    if isinstance(e, (A.Index, A.Bind)):
        return _PREC["postfix"]
    return _PREC["atom"]


def format_number(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    text = repr(float(value))
    return text if any(c in text for c in ".e") else text + ".0"


def format_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


def format_expr(e, min_prec: int = 0) -> str:
    """A rule-language expression as .fuse text, parenthesized when its precedence is
    below ``min_prec``."""
    text = _format(e)
    return f"({text})" if _prec(e) < min_prec else text


def _format(e) -> str:
    if isinstance(e, A.Num):
        if isinstance(e.value, bool):
            return "true" if e.value else "false"
        return format_number(e.value)
    if isinstance(e, A.Str):
        return format_string(e.value)
    if isinstance(e, A.Var):
        return e.name
    if isinstance(e, A.ListE):
        return "[" + ", ".join(format_expr(i) for i in e.items) + "]"
    if isinstance(e, A.Call):
        text = f"{e.func.text}({', '.join(format_expr(a) for a in e.args)})"
        if e.attrs is not None:
            text += " " + format_attrs(e.attrs)
        return text
    if isinstance(e, A.Bind):
        return f"{e.name.text} @ {format_expr(e.expr, _PREC['postfix'])}"
    if isinstance(e, A.BinOp):
        p = _PREC[e.op]
        if e.op == "**":
            return f"{format_expr(e.left, _PREC['postfix'])} ** {format_expr(e.right, _PREC['neg'])}"
        return f"{format_expr(e.left, p)} {e.op} {format_expr(e.right, p + 1)}"
    if isinstance(e, A.Neg):
        return "-" + format_expr(e.operand, _PREC["neg"])
    if isinstance(e, A.Compare):
        return f"{format_expr(e.left, _PREC['+'])} {e.op} {format_expr(e.right, _PREC['+'])}"
    if isinstance(e, A.BoolOp):
        inner = _PREC[e.op] + 1
        return f" {e.op} ".join(format_expr(i, inner) for i in e.items)
    if isinstance(e, A.Not):
        return "not " + format_expr(e.operand, _PREC["not"])
    if isinstance(e, A.Index):
        return f"{format_expr(e.base, _PREC['postfix'])}[{format_expr(e.index)}]"
    raise TypeError(f"cannot print {e!r}")


def format_attrs(attrs) -> str:
    parts = []
    for item in attrs:
        if isinstance(item, A.AttrRest):
            parts.append(f"..{item.name.text}")
        else:
            parts.append(f"{item.name.text}={format_expr(item.value)}")
    return "{" + ", ".join(parts) + "}"


def format_literal(value) -> str:
    """A static value (attribute default, option, fuse option) as source text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return format_number(value) if value >= 0 else "-" + format_number(-value)
    if isinstance(value, str):
        return format_string(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(format_literal(v) for v in value) + "]"
    raise TypeError(f"cannot print literal {value!r}")


def _body(stmts, indent: str = "    ") -> list[str]:
    lines = []
    for s in stmts:
        if isinstance(s, A.Return):
            lines.append(indent + "return " + ", ".join(format_expr(v) for v in s.values))
        else:
            lines.append(indent + ", ".join(n.text for n in s.names) + " = " + format_expr(s.value))
    return lines


def _oracle(o: A.Oracle) -> str:
    if o.body is not None:
        return "\n".join(["oracle {"] + _body(o.body) + ["}"])
    attrs = " " + format_attrs(o.attrs) if o.attrs else ""
    return f"oracle ({', '.join(format_expr(e) for e in o.inputs)}){attrs} => {format_expr(o.expected)}"


def _header(name: str, params, attr_texts: list[str]) -> str:
    text = f"{name}({', '.join(params)}"
    if attr_texts:
        text += "; " + ", ".join(attr_texts)
    return text + ")"


def format_ruleset(ruleset) -> str:
    """A whole RuleSet as one .fuse file that parses back to an equal RuleSet."""
    out: list[str] = [f"# rule set {ruleset.name!r}, printed from {', '.join(ruleset.files)}"]
    # a lowering rule set stays a file of its own: named by its root file (the last one loaded)
    out.extend(f"import {format_literal(lowering.files[-1])} for lowering" for lowering in ruleset.lowering)
    if ruleset.categories:
        out.append("categories " + " < ".join(ruleset.categories))
    for rule in ruleset.class_rules:
        props = ([rule.category] if rule.category else []) + (["commutative"] if rule.commutative else [])
        line = f"class {rule.op} : {', '.join(props)}"
        if rule.guard is not None:
            line += " when " + format_expr(rule.guard)
        out.append(line)
    for rule in ruleset.defs.values():
        d = rule.decl
        attrs = [f"{a.name.text}={format_expr(a.default)}" for a in d.attrs]
        head = "def " + _header(d.name.text, [p.text for p in d.params], attrs)
        if d.formula is not None:
            out.append(f"{head} = {format_expr(d.formula)}")
        else:
            out.append(head + " {")
            out.extend(_body(d.body))
            out.append("}")
        out.extend(_oracle(o) for o in d.oracles)
    for op, cases in ruleset.decompositions.items():
        for case in cases:
            if case.from_def:
                continue
            attrs = [attr for attr, _ in case.binds] + [f"{k}={format_literal(v)}" for k, v in case.requires]
            out.append("decompose " + _header(op, case.params, attrs) + _accepts(case.accepts) + " {")
            out.extend(_body(case.body))
            out.append("}")
    for rule in sorted(ruleset.rewrites, key=lambda r: r.order):
        head = f"rewrite {rule.name}"
        if rule.priority:
            head += f" priority {rule.priority}"
        if rule.shared:
            head += " shared"
        out.append(head + _accepts(rule.accepts) + ":")
        out.append("    " + format_expr(rule.pattern))
        if rule.guard is not None:
            out.append("    where " + format_expr(rule.guard))
        out.append("    => " + format_expr(rule.replacement))
    # entries in precedence order: in one file, first match wins
    for entry in ruleset.fuse_entries:
        out.append(format_fuse_entry(entry))
    out.extend(format_fuse_pattern(entry.decl) for entry in ruleset.fuse_patterns)
    for strategy in ruleset.strategies.values():
        opts = ", ".join(f"{k} = {format_literal(v)}" for k, v in strategy.options.items())
        out.append(f"strategy {strategy.name} {{ {opts} }}" if opts else f"strategy {strategy.name} {{ }}")
    for test in ruleset.tests:
        out.extend(format_test(test.decl))
    return "\n".join(out) + "\n"


def _accepts(names) -> str:
    """`` accepts overflow`` for a rule that accepts something, else ""."""
    return " accepts " + ", ".join(sorted(names)) if names else ""


def format_fuse_entry(entry) -> str:
    """A fuse or nofuse entry as one line of .fuse text."""
    producers, consumers = '|'.join(sorted(entry.producers)), '|'.join(sorted(entry.consumers))
    pair = f"sibling {producers}, {consumers}" if "sibling" in entry.flags else f"{producers} -> {consumers}"
    if entry.deny:
        line = f"nofuse {pair}"
    else:
        line = f"fuse {pair} : {entry.result}"
        opts = sorted(entry.flags - {"sibling"}) + [f"{k}={_fuse_value(v)}" for k, v in entry.options.items()]
        if opts:
            line += " [" + ", ".join(opts) + "]"
    if entry.guard is not None:
        line += " when " + format_expr(entry.guard)
    return line


def format_fuse_pattern(decl: A.FusePattern) -> str:
    """A ``fuse pattern`` entry as one line of .fuse text."""
    line = f"fuse pattern {decl.name.text}: {format_expr(decl.pattern)}"
    if decl.guard is not None:
        line += " where " + format_expr(decl.guard)
    return line + (f" as {decl.result.text}" if decl.result is not None else "")


def _fuse_value(value) -> str:
    if isinstance(value, str) and _IDENT.match(value):
        return value
    return format_literal(value)


def format_test(t: A.TestDecl) -> list[str]:
    head = f"test {t.name.text}" + (f" strategy {t.strategy.text}" if t.strategy is not None else "")
    lines = [head + " {"]
    for s in t.stmts:
        if isinstance(s, A.TInput):
            lines.append(f"    input {s.name.text}: {_ttype(s.ttype)}")
        elif isinstance(s, A.TConst):
            init = f" = {format_expr(s.init)}" if s.init is not None else ""
            lines.append(f"    const {s.name.text}: {_ttype(s.ttype)}{init}")
        elif isinstance(s, A.Let):
            lines.extend(_body([s]))
        elif isinstance(s, A.TOutput):
            lines.append("    output " + ", ".join(n.text for n in s.names))
        elif isinstance(s, A.TExpect):
            lines.append("    expect " + format_expr(s.expr))
    lines.append("}")
    return lines


def _ttype(tt: A.TType) -> str:
    return f"{tt.dtype.text}[{', '.join(map(str, tt.shape))}]"
