"""Every error fusionlang raises for bad input is a FuseError.

The CLI prints ``str(error)`` (one line, or a rendered diagnostic block) and exits 2;
nothing else about the error reaches the user. This module imports nothing of ours, so
every package may raise these.
"""

from __future__ import annotations

import re
from typing import Any

#: a list of numbers longer than LIST_SHOWN entries, as a message prints it
_LONG_LIST = re.compile(r"[\[(](?:\s*-?[\w.+-]+,){16,}\s*-?[\w.+-]+\s*[\])]")
#: entries of a long list a message shows (the first ones, then the last)
LIST_SHOWN = 8


def abbreviated(message: str) -> str:
    """``message`` with each list of more than 16 numbers cut to its first entries, its
    last and its length: an attribute of 200,000 entries made a 1.5 MB error line."""

    def cut(match: re.Match) -> str:
        text = match.group(0)
        items = text[1:-1].split(",")
        shown = ",".join(items[:LIST_SHOWN]).strip()
        return f"{text[0]}{shown}, ..., {items[-1].strip()}{text[-1]} ({len(items)} entries)"

    return _LONG_LIST.sub(cut, message) if len(message) > 200 else message


class FuseError(Exception):
    """Base class: bad input described in words a user can act on (long lists of numbers
    in the message are abbreviated)."""

    #: exit status the CLI uses for this error
    exit_code = 2

    def __init__(self, *args):
        if args and isinstance(args[0], str):
            args = (abbreviated(args[0]), *args[1:])
        super().__init__(*args)


class GraphError(FuseError):
    """A graph is malformed: dangling edge, cycle, duplicate name, type mismatch."""


class ShapeError(FuseError):
    """An op received inputs whose shapes, dtypes or attributes it cannot accept."""


class UnsupportedOpError(FuseError):
    """An op (from a model or a rule file) that fusionlang does not know."""


class ModelError(FuseError):
    """A model file cannot be read or imported (truncated, malformed, unsupported form)."""


class RuntimeInputError(ModelError):
    """A valid model needs what only a run knows about some graph inputs: their shapes
    (symbolic dims) or their values (axes, pads, shape... fed as inputs, which fusionlang
    compiles as constants). ``shapes`` and ``values`` name those inputs; the message says
    how to give them. Specializing on each run's feeds (``fusionlang.Specializer``, the
    ONNX backend, ``fusionlang run --input``) gives both."""

    def __init__(self, message: str, *, shapes=(), values=()):
        super().__init__(message)
        self.shapes = tuple(shapes)
        self.values = tuple(values)


class RuleError(FuseError):
    """A .fuse rule file is malformed; carries one or more diagnostics."""

    def __init__(self, diagnostics):
        self.diagnostics = list(diagnostics)
        super().__init__("\n".join(str(d) for d in self.diagnostics))


class BudgetError(FuseError):
    """Work a rule file or model asks for passed a limit on its total (every guard of a
    fuse table evaluated on one graph, say), though each step was within its own limit."""


class RewriteError(FuseError):
    """The rewrite engine stopped abnormally (e.g. a rule set kept firing past its budget)."""

    #: the rewrite as far as it got: a RewriteResult, which apply_rules sets as the error leaves it
    result: Any


class PlanError(FuseError):
    """A fusion plan is inconsistent (an op in two groups, a cyclic quotient graph)."""


class CodegenError(FuseError):
    """A group cannot be turned into loops or compiled."""


class InputError(FuseError):
    """Feeds given to a compiled or interpreted graph do not match its inputs."""


class ResourceError(FuseError):
    """A run needed more of a machine resource (memory) than it could get."""


class ArtifactError(FuseError):
    """A saved compiled graph cannot be written, or is refused on loading: missing or
    corrupt files, another format or fusionlang version, CPU features this machine lacks,
    a library or constants whose bytes are not the ones saved."""
