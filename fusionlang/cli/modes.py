"""Output modes, the same for every command: human-readable text on stdout by default;
``--quiet`` prints only errors; ``--json`` prints one JSON document on stdout instead of
the text (errors still go to stderr as text, and the exit status says what happened).
Also the exit codes. This module stays light (no NumPy, no compiler): the command line
imports it before it knows which command runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from fusionlang.cli.text import safe_console
from fusionlang.instrument import ENV, LEVELS

EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


def add_output_flags(p: argparse.ArgumentParser) -> None:
    """--quiet, --no-color and --json on a command's parser.

    They are also accepted before the command (``fusionlang --json fuse ...``); the
    defaults are suppressed here so that a flag given there is not reset by the command's
    parser. A command may redefine ``--json`` (fuse: ``--json [FILE]``).
    """
    p.add_argument("--quiet", "-q", action="store_true", default=argparse.SUPPRESS, help="print only errors")
    p.add_argument("--no-color", action="store_true", default=argparse.SUPPRESS, help="plain output")
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                   help="print one JSON document on stdout instead of text")
    add_instrument_flags(p, default=argparse.SUPPRESS)


def add_instrument_flags(p: argparse.ArgumentParser, default=None) -> None:
    """--log LEVEL and --timings (:mod:`fusionlang.instrument`): log records of every stage
    on stderr, and a table of each pass's time on stderr after the command."""
    p.add_argument("--log", choices=list(LEVELS), default=default,
                   help=f"print the stages' log records at this level and above on stderr (or set {ENV})")
    p.add_argument("--timings", action="store_true", default=False if default is None else default,
                   help="after the command, print each pass's calls, wall and CPU time on stderr "
                        "(one JSON line with --json)")


def wants_json(args) -> bool:
    return bool(getattr(args, "json", False))


def is_quiet(args) -> bool:
    return bool(getattr(args, "quiet", False))


def use_color(args, stream=None) -> bool:
    """Color only on a terminal, never with --no-color or NO_COLOR set."""
    stream = stream or sys.stderr
    return not getattr(args, "no_color", False) and "NO_COLOR" not in os.environ and stream.isatty()


def console(args, stderr: bool = False):
    """A rich console for human-readable output; silent under --quiet and --json. What it
    prints is made safe (:mod:`fusionlang.cli.text`): names never drive the terminal."""
    # model and rule names are data: never interpret them as rich markup
    color = use_color(args, sys.stderr if stderr else sys.stdout)
    # color_system=None: no escape sequences at all (no_color alone still prints bold and dim)
    return safe_console(stderr=stderr, quiet=is_quiet(args) or wants_json(args), markup=False, soft_wrap=True,
                        color_system="auto" if color else None, highlight=False)


def print_json(data) -> None:
    """The --json document: one JSON value on stdout."""
    print(json.dumps(data, indent=2, default=_jsonable))


def _jsonable(value):
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if hasattr(value, "item"):  # NumPy scalars
        return value.item()
    return str(value)
