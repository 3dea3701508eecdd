"""`fusionlang lint FILE.fuse...`: parse and check rule files."""

from __future__ import annotations

import sys

from fusionlang.cli.common import EXIT_BAD_INPUT, EXIT_OK

HELP = "parse and check .fuse rule files"


def configure(p) -> None:
    p.add_argument("files", nargs="+", metavar="FILE.fuse")


def run(args) -> int:
    from fusionlang.lang import lint, render

    diagnostics = lint(args.files)
    errors = [d for d in diagnostics if d.severity == "error"]
    color = not args.no_color and sys.stderr.isatty()
    for d in diagnostics:
        print(render(d, color=color), file=sys.stderr)
    if not args.quiet:
        print(f"{len(args.files)} file(s): {len(errors)} error(s), {len(diagnostics) - len(errors)} warning(s)")
    return EXIT_BAD_INPUT if errors else EXIT_OK
