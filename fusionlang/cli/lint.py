"""`fusionlang lint FILE.fuse...`: parse and check rule files, then run their test blocks.

A file that loads without errors has its `test` blocks run (its own and those of the
files it imports, in its rule set); a failing block is an error at the failing
expectation's file:line:col."""

from __future__ import annotations

import sys

from fusionlang.cli.common import Stages
from fusionlang.cli.modes import EXIT_BAD_INPUT, EXIT_OK, is_quiet, print_json, use_color, wants_json
from fusionlang.lang import lint, load_rules, render


def configure(p) -> None:
    p.add_argument("files", nargs="+", metavar="FILE.fuse")


def run(args) -> int:
    diagnostics = []
    tests_run = 0
    with Stages(args) as stages:
        with stages.step("lint", total=len(args.files)) as tick:
            for path in args.files:
                found = lint([path])
                if not any(d.is_error for d in found):
                    found += _policy_diagnostics(path)
                diagnostics.extend(found)
                if not any(d.is_error for d in found):
                    ran, failures = _test_diagnostics(path)
                    tests_run += ran
                    diagnostics.extend(failures)
                tick()
    diagnostics = _once(diagnostics)
    errors = [d for d in diagnostics if d.severity == "error"]
    if wants_json(args):
        print_json({"files": args.files, "errors": len(errors), "warnings": len(diagnostics) - len(errors),
                    "tests_run": tests_run,
                    "diagnostics": [{"file": d.span.file, "line": d.span.line, "col": d.span.col,
                                     "severity": d.severity, "message": d.message, "hint": d.hint}
                                    for d in diagnostics]})
    else:
        color = use_color(args, sys.stderr)
        for d in diagnostics:
            print(render(d, color=color), file=sys.stderr)
        if not is_quiet(args):
            print(f"{len(args.files)} file(s): {len(errors)} error(s), {len(diagnostics) - len(errors)} warning(s)")
    return EXIT_BAD_INPUT if errors else EXIT_OK


def _once(diagnostics: list) -> list:
    """Each diagnostic once: a rule in a file that several linted files import is reported
    at its own line once, not once per importing file."""
    seen: set = set()
    out = []
    for d in diagnostics:
        key = (str(d.span), d.severity, d.message)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def _policy_diagnostics(path: str) -> list:
    """The rule set's strategies and fuse entries against the partitioners (engine.policy_check).

    Imported only for a rule set that declares a policy: the engine brings in the cost
    model and the partitioners (half a second), which a file of rules alone does not need
    (issue 36: lint of a small file well under a second)."""
    ruleset = load_rules(path)
    if not (ruleset.strategies or ruleset.fuse_entries or ruleset.fuse_patterns):
        return []
    from fusionlang.engine.policy_check import policy_diagnostics
    return policy_diagnostics(ruleset)


def _test_diagnostics(path: str) -> tuple[int, list]:
    """How many `test` blocks ran and the failures; the block runner (the rewrite engine
    and the partitioners) is imported only for a rule set that has blocks."""
    ruleset = load_rules(path)
    if not ruleset.tests:
        return 0, []
    from fusionlang.testing.testblocks import failed_test_diagnostics
    return failed_test_diagnostics(ruleset)
