"""A Pygments lexer for .fuse rule files (registered as the ``fuse`` lexer).

    pygmentize -l fuse fusionlang/rules/apollo.fuse
    pygments.highlight(text, FuseLexer(), formatter)

It highlights for people; it does not check anything (``fusionlang lint`` does). Keywords
are exactly those of ``fuse.lark`` (a test keeps the lists in sync); names take their
role from where they stand: categories in ``categories``, ``class`` and ``fuse``
lines, declared names after ``rewrite``/``def``/``decompose``/``strategy``/``test``, ops
where they are called. The editor grammar in ``editors/fuse.tmLanguage.json`` follows
the same rules.
"""

from __future__ import annotations

from pygments.lexer import RegexLexer, bygroups, default, include, words
from pygments.token import (Comment, Keyword, Name, Number, Operator, Punctuation, String, Text,
                            Whitespace)

__all__ = ["FuseLexer"]

#: every keyword of the grammar (fusionlang/lang/fuse.lark), contextual ones included
KEYWORDS = ("and", "categories", "class", "const", "decompose", "def", "expect", "fuse", "import", "input", "not",
            "or", "output", "priority", "return", "rewrite", "shared", "strategy", "test", "when", "where")
#: keywords of items added later, kept apart so concurrent additions merge cleanly
KEYWORDS += ("sibling", "nofuse", "oracle", "for", "lowering")
KEYWORDS += ("accepts",)
KEYWORDS += ("pattern", "as", "without")
#: keywords that declare a name
DECLARATIONS = ("decompose", "def", "rewrite", "strategy", "test")

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"


class FuseLexer(RegexLexer):
    """Pygments lexer for the .fuse rule language of fusionlang."""

    name = "Fuse"
    aliases = ["fuse", "fusionlang"]
    filenames = ["*.fuse"]
    mimetypes = ["text/x-fuse"]

    tokens = {
        "spaces": [
            (r"[ \t\r\f]+", Whitespace),
            (r"#[^\n]*", Comment.Single),
        ],
        "literals": [
            (r'"([^"\\\n]|\\.)*"', String.Double),
            # an unterminated string still reads as one (lint reports it)
            (r'"[^\n]*', String.Double),
            (r"([0-9]+\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+", Number.Float),
            (r"[0-9]+", Number.Integer),
        ],
        "root": [
            include("spaces"),
            (r"\n", Whitespace),
            include("literals"),
            (r"(" + "|".join(DECLARATIONS) + r")\b([ \t]+)(" + _NAME + r")",
             bygroups(Keyword.Declaration, Whitespace, Name.Function)),
            (r"(categories)\b", Keyword.Declaration, "categories"),
            (r"(class)\b", Keyword.Declaration, "class_ops"),
            (r"(nofuse|fuse)\b", Keyword.Declaration, "fuse_entry"),
            (words(KEYWORDS, suffix=r"\b"), Keyword),
            (words(("true", "false"), suffix=r"\b"), Keyword.Constant),
            (_NAME + r"(?=\s*\()", Name.Function),
            (r"(" + _NAME + r")(@)", bygroups(Name.Variable, Operator)),
            (_NAME, Name),
            (r"=>|->|\.\.|\*\*|//|==|!=|<=|>=|[-+*/%<>=|@]", Operator),
            (r"[()\[\]{},:;]", Punctuation),
        ],
        # categories elemwise < broadcast < ...
        "categories": [
            include("spaces"),
            (r"\n", Whitespace, "#pop"),
            (r"<", Operator),
            (_NAME, Name.Class),
            default("#pop"),
        ],
        # class add, mul : elemwise, commutative [when GUARD]
        "class_ops": [
            include("spaces"),
            (r"\n", Whitespace),
            (r"def\b", Keyword),
            (_NAME, Name.Function),
            (r",", Punctuation),
            (r":", Punctuation, ("#pop", "class_props")),
            default("#pop"),
        ],
        "class_props": [
            include("spaces"),
            (r"\n", Whitespace, "#pop"),
            (r"when\b", Keyword, "#pop"),
            (_NAME, Name.Class),
            (r",", Punctuation),
            default("#pop"),
        ],
        # fuse elemwise|broadcast -> reduce : reduce [stitch, key=value]
        # fuse sibling reduce, reduce : reduce
        "fuse_entry": [
            include("spaces"),
            (r"\n", Whitespace, "#pop"),
            (r"sibling\b", Keyword),
            # fuse pattern NAME: the rest of the entry is a pattern
            (r"(pattern)\b([ \t]+)(" + _NAME + r")", bygroups(Keyword, Whitespace, Name.Function), "#pop"),
            (r"->|\|", Operator),
            (r"[:,]", Punctuation),
            (r"\[", Punctuation, "fuse_options"),
            # a guard: the rest of the entry is an expression
            (r"(when)\b", Keyword, "#pop"),
            (_NAME, Name.Class),
            default("#pop"),
        ],
        "fuse_options": [
            include("spaces"),
            (r"\n", Whitespace),
            (r"\]", Punctuation, "#pop"),
            include("literals"),
            (r"[,]", Punctuation),
            (r"[=-]", Operator),
            (_NAME, Name.Attribute),
            (r"[^\]\n]", Text),
        ],
    }
