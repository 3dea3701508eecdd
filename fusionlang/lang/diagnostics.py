"""Spans and diagnostics: where something was written, and what is wrong with it.

A diagnostic prints as ``path:line:col: error: message`` (its first line, what tools
and tests match), and :func:`render` adds the source line, a caret under the span and a
hint. Sources are remembered by display path when they are parsed, so a diagnostic can
be rendered long after parsing without re-reading files.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

_SOURCES: dict[str, str] = {}


def remember_source(path: str, text: str) -> None:
    """Keep ``text`` so diagnostics in ``path`` can show their source line."""
    _SOURCES[path] = text


def source_line(path: str, line: int) -> str | None:
    text = _SOURCES.get(path)
    if text is None:
        return None
    lines = text.splitlines()
    return lines[line - 1] if 0 < line <= len(lines) else None


@dataclass(frozen=True)
class Span:
    """Where something was written: file, line and column (1-based), and where it ends."""

    file: str
    line: int
    col: int
    end_line: int = 0
    end_col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def shifted(self, lines: int) -> "Span":
        """The same span ``lines`` further down (used when parsing a file piecewise)."""
        return Span(self.file, self.line + lines, self.col, self.end_line + lines if self.end_line else 0,
                    self.end_col)


#: span of things that were not written anywhere (built in Python)
NO_SPAN = Span("<builtin>", 0, 0)


@dataclass(frozen=True)
class Diagnostic:
    """An error or warning at a span, with an optional hint; ``str()`` is the one-line
    ``file:line:col: severity: message`` form, :func:`render` adds the source and a caret."""

    span: Span
    severity: str  # "error" | "warning"
    message: str
    hint: str = ""

    def __str__(self) -> str:
        return f"{self.span}: {self.severity}: {self.message}"

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def render(self, color: bool = False) -> str:
        return render(self, color=color)


#: characters of a source line a diagnostic shows, and how many of them before the column
SOURCE_WIDTH, SOURCE_CONTEXT = 160, 40


def render(diag: Diagnostic, color: bool = False) -> str:
    """The diagnostic with its source line, a caret under the span, and the hint."""
    red, blue, bold, reset = ("\x1b[31m", "\x1b[34m", "\x1b[1m", "\x1b[0m") if color else ("", "", "", "")
    kind_color = red if diag.is_error else blue
    lines = [f"{bold}{diag.span}:{reset} {kind_color}{diag.severity}:{reset} {bold}{diag.message}{reset}"]
    text = source_line(diag.span.file, diag.span.line)
    if text is not None:
        text = text.rstrip("\n")
        col = max(diag.span.col, 1)
        if diag.span.end_line == diag.span.line and diag.span.end_col > col:
            width = diag.span.end_col - col
        else:
            width = max(1, len(text.rstrip()) - col + 1)
        # a long line is shown as a window around the column (a 40,000-character list
        # was printed whole, twice per diagnostic)
        start = max(0, min(col - 1 - SOURCE_CONTEXT, len(text) - SOURCE_WIDTH))
        end = start + SOURCE_WIDTH
        before, after = ("…" if start else ""), ("…" if end < len(text) else "")
        width = max(1, min(width, end - (col - 1)))
        gutter = f"{diag.span.line:>4} | "
        lines.append(gutter + before + text[start:end] + after)
        # keep tabs so the caret lines up under tab-indented source
        pad = " " * len(before) + "".join(ch if ch == "\t" else " " for ch in text[start: col - 1])
        lines.append(" " * (len(gutter) - 2) + "| " + pad + kind_color + "^" + "~" * (width - 1) + reset)
    if diag.hint:
        lines.append(f"     = hint: {diag.hint}")
    return "\n".join(lines)


class Diagnostics:
    """Collects diagnostics during one parse-and-check run."""

    def __init__(self):
        self.items: list[Diagnostic] = []

    # span None (a node without a position) reports at NO_SPAN: sorted() reads every span
    def error(self, span: Span | None, message: str, hint: str = "") -> None:
        self.items.append(Diagnostic(span or NO_SPAN, "error", message, hint))

    def warning(self, span: Span | None, message: str, hint: str = "") -> None:
        self.items.append(Diagnostic(span or NO_SPAN, "warning", message, hint))

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.is_error]

    def sorted(self) -> list[Diagnostic]:
        """Diagnostics in file order (files in the order first reported), duplicates removed."""
        file_rank: dict[str, int] = {}
        for d in self.items:
            file_rank.setdefault(d.span.file, len(file_rank))
        unique = list(dict.fromkeys(self.items))
        return sorted(unique, key=lambda d: (file_rank[d.span.file], d.span.line, d.span.col))


def suggest(name: str, candidates) -> str:
    """A 'did you mean' hint for a misspelled name, or ''."""
    close = difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.6)
    if not close:
        return ""
    return "did you mean " + " or ".join(repr(c) for c in close) + "?"
