"""The `fusionlang` command line: one module per command (configure + run).

Every failure caused by input (a model, a rule file, a flag, a path) is a FuseError: it
is printed as one line (or a rendered diagnostic with caret) and the exit status is 2; so
is a flag argparse refuses, and a MemoryError no size check foresaw. A check that runs and
finds a mismatch exits 1. Nothing prints a Python traceback unless FUSIONLANG_DEBUG=1 is
set, and names from a model or rule file are printed escaped (:mod:`fusionlang.cli.text`).

Every command takes ``--quiet``, ``--no-color``, ``--json``, ``--log LEVEL`` and
``--timings`` (see :mod:`fusionlang.cli.modes` and :mod:`fusionlang.instrument`), before or
after the command name.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import re
import sys

from fusionlang import instrument
from fusionlang.cli.modes import EXIT_BAD_INPUT, EXIT_INTERNAL, add_instrument_flags, add_output_flags, use_color, wants_json
from fusionlang.cli.flags import OneLineParser
from fusionlang.cli.text import safe
from fusionlang.errors import FuseError
from fusionlang.version import VERSION

#: exit status when stdout is closed early (128 + SIGPIPE, as shells report it)
EXIT_PIPE = 141

#: command name -> its one-line help. Each command is the module fusionlang.cli.NAME
#: (configure + run); only the command being run is imported, so `fusionlang --help` and
#: a command's own --help do not pay for the others' imports.
COMMANDS = {
    "demo": "fuse, compile and run the embedded transformer block, checked against the reference",
    "fuse": "partition a model into fused groups and print a summary",
    "run": "run a model (compiled, or with the reference interpreter), or a compiled artifact",
    "compile": "compile a model for the C target and save it as an artifact directory",
    "explain": "explain why a node was (not) fused with its neighbours, or why a rewrite did (not) fire",
    "lint": "parse and check .fuse rule files and run their test blocks",
    "check": "property-check every rule of .fuse rule files",
    "campaign": "check random graphs end to end against the reference, sharded over workers or Ray",
    "sweep": "measure a rule change across a model zoo: policy A against baseline B, one row per model",
    "cache": "show (info) or empty (clear) the compiled-kernel cache",
}

#: flags before the command: what may stand before its name (those taking a value, with it)
_TOP_FLAGS = {"--quiet", "-q", "--no-color", "--json", "--version", "--help", "-h", "--timings"}
_TOP_VALUE_FLAGS = {"--log"}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``command``, only that command's flags are set up (the others
    are listed with their help), else every command's."""
    parser = OneLineParser(prog="fusionlang", description="Operator fusion with the policy written as data.")
    parser.add_argument("--version", action="version", version=f"fusionlang {VERSION}")
    parser.add_argument("--quiet", "-q", action="store_true", help="print only errors")
    parser.add_argument("--no-color", action="store_true", help="plain output")
    parser.add_argument("--json", action="store_true",
                        help="machine-readable output: one JSON document on stdout (every command)")
    add_instrument_flags(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, summary in COMMANDS.items():
        # "resolve": a command may redefine a common flag (fuse has --json [FILE])
        p = sub.add_parser(name, help=summary, description=summary, conflict_handler="resolve")
        if command is None or name == command:
            module = importlib.import_module(f"fusionlang.cli.{name}")
            add_output_flags(p)
            module.configure(p)
            p.set_defaults(func=module.run)
    return parser


def command_named(argv: list[str]) -> str | None:
    """The command ``argv`` names: the first word after the top-level flags, or None."""
    words = iter(argv)
    for word in words:
        if word in _TOP_VALUE_FLAGS:
            next(words, None)
        elif word not in _TOP_FLAGS and word.split("=", 1)[0] not in _TOP_VALUE_FLAGS:
            return word if word in COMMANDS else None
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(command_named(argv) or "")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0), or a bad flag already printed as one line (2)
        return 0 if exc.code is None else exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        if args.log:
            instrument.configure(args.log)
        else:
            instrument.configure_from_environment()
    except ValueError as exc:
        print(safe(f"fusionlang: error: {exc}", newlines=False), file=sys.stderr)
        return EXIT_BAD_INPUT
    if not args.timings:
        return _run_command(args)
    with instrument.collect_timings() as timings:
        try:
            return _run_command(args)
        finally:
            _print_timings(args, timings)


def _print_timings(args, timings: instrument.Timings) -> None:
    """``--timings``: the pass table on stderr (one JSON line under --json)."""
    if wants_json(args):
        print(json.dumps({"timings": timings.rows()}), file=sys.stderr)
    elif timings.passes:
        print(safe(timings.table()), file=sys.stderr)
    else:
        print("fusionlang: no pass was timed (this command runs none of the pipeline's stages)", file=sys.stderr)


def _run_command(args) -> int:
    """The command's exit status; every failure is one line on stderr (see the module docstring)."""
    try:
        return args.func(args)
    except FuseError as exc:
        print(format_error(exc, color=use_color(args, sys.stderr)), file=sys.stderr)
        return exc.exit_code
    except MemoryError as exc:
        # the last resort: commands check tensor sizes before allocating (ir/memory.py)
        print(safe(f"fusionlang: error: out of memory: {str(exc) or 'an allocation failed'}", newlines=False),
              file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (`fusionlang --json fuse m.onnx | head`): not an error of
        # ours; silence the flush Python attempts at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE
    except Exception as exc:  # a bug in fusionlang, not in the user's input
        if os.environ.get("FUSIONLANG_DEBUG"):
            raise
        print(safe(f"fusionlang: internal error: {type(exc).__name__}: {exc} "
                   "(please report it; FUSIONLANG_DEBUG=1 shows a traceback)", newlines=False), file=sys.stderr)
        return EXIT_INTERNAL


def _fields_on_one_line(diag):
    """``diag`` with control characters (newlines too) in its file name, message and hint
    escaped, so each keeps its one line of the rendering (a renamed file's source line is
    then not shown: the escaped name names no file)."""
    span = dataclasses.replace(diag.span, file=safe(diag.span.file, newlines=False))
    return dataclasses.replace(diag, span=span, message=safe(diag.message, newlines=False),
                               hint=safe(diag.hint, newlines=False))


def format_error(exc: FuseError, color: bool = False) -> str:
    """The message a FuseError prints: rendered diagnostics, or one line."""
    if found := getattr(exc, "diagnostics", None):
        from fusionlang.lang import render  # here: the parser stack is imported only where a diagnostic is shown

        diagnostics = [_fields_on_one_line(d) for d in found]
        plain = "\n".join(render(d) for d in diagnostics)
        if safe(plain) != plain:  # a source line or name holds control characters: no color
            return safe(plain)
        return "\n".join(render(d, color=color) for d in diagnostics) if color else plain
    text = str(exc)
    if lines := getattr(exc, "lines", None):  # a summary and its entries (every unsupported op): still one line
        text = " ".join(lines[:1] + [f"{entry};" for entry in lines[1:-1]] + lines[-1:])
    elif re.match(r"^\S+:\d+:\d+: ", text):
        return safe(text)
    text = safe(text, newlines=False)  # one line, whatever the message holds
    return f"fusionlang: \x1b[1;31merror:\x1b[0m {text}" if color else f"fusionlang: error: {text}"
