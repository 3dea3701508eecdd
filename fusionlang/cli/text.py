"""Text for a terminal or a pipe: names from a model or a rule file are data, never
terminal commands.

A node, tensor or op name may hold ``\\x1b[31m`` (an escape sequence the terminal would
obey), ``\\r`` (which rewrites the line shown), a bidirectional override (which reorders
it) or a lone surrogate (which cannot be encoded at all). :func:`safe` writes every such
character as Python's repr does (``\\x1b``, ``\\r``, ``\\u202e``); every printer of the
CLI goes through it: :func:`console` for the commands' text, :func:`print_line` for
errors. JSON output needs nothing: ``json.dumps`` escapes control characters itself.
"""

from __future__ import annotations

import re
import sys

from rich.console import Console
from rich.text import Text

#: C0 and C1 controls but tab and newline, DEL, line and paragraph separators,
#: bidirectional embeddings, overrides and isolates, and lone surrogates
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_OR_NEWLINE = re.compile(_UNSAFE.pattern[:-1] + "\n]")


def _escape(match: re.Match) -> str:
    ch = match.group()
    if ch in "\r\n":
        return repr(ch)[1:-1]
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def safe(text: str, *, newlines: bool = True) -> str:
    """``text`` with every character a terminal would act on written as an escape;
    newlines are kept (``newlines=True``, for multi-line text we format) or escaped."""
    return (_UNSAFE if newlines else _UNSAFE_OR_NEWLINE).sub(_escape, text)


def print_line(text: str, stream=None) -> None:
    """Print ``text`` made safe, as one line (newlines escaped too), on ``stream``
    (stderr by default)."""
    print(safe(text, newlines=False), file=stream or sys.stderr)


def safe_console(**options):
    """A rich Console whose ``print`` makes every string and Text it is given safe."""

    class SafeConsole(Console):
        def print(self, *objects, **kwargs):
            return super().print(*(_safe_renderable(o, Text) for o in objects), **kwargs)

    return SafeConsole(**options)


def _safe_renderable(obj, text_type):
    if isinstance(obj, str):
        return safe(obj)
    if isinstance(obj, text_type) and safe(obj.plain) != obj.plain:
        # styles are spans over the old characters: escaping moves them, keep the base style
        # (Text() itself drops \r and a few others: printers pass safe() text to it first)
        return text_type(safe(obj.plain), style=obj.style)
    return obj
