"""`fusionlang sweep ZOO --rules A --baseline B`: a rule change measured across a model zoo.

ZOO is a folder of ``.onnx`` models or a text file listing them (paths relative to the
file). Each model is built with A and with B (fused, compiled for C, run on seeded
inputs, checked against the reference interpreter and onnxruntime); ``--strategy`` and
``--option`` apply to both. One row per model, a summary with geomeans of A/B, ``--json
OUT`` and ``--report OUT.html`` (a table and bar charts; each model's own report under
both policies goes to ``OUT_models/``, linked from its row). ``--measure`` also times both
compiled models in interleaved rounds, after the builds, one model at a time.

Builds run on a local process pool (``--jobs N``, default the cores; 1: in this process)
or with ``--ray`` on a local Ray cluster this command starts (``--jobs`` its CPUs), or
with ``--ray ADDRESS`` on the cluster there. Build results are cached (see
:mod:`fusionlang.sweep.cache`), so a rerun resumes; ``--no-cache`` builds everything.

Exit status: 0 when every row built and every check passed; 1 when a row failed (a broken
model, a compiler crash: the row holds its one-line error, and the sweep still completes)
or a compiled model's outputs differ from the reference or onnxruntime; 2 on bad input
(ZOO, a rule set, a flag, an output path).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fusionlang.cli import flags
from fusionlang.cli.common import strategy_overrides
from fusionlang.cli.modes import EXIT_MISMATCH, EXIT_OK, console, is_quiet, print_json, wants_json
from fusionlang.cli.scaleout import check_ray_flags
from fusionlang.cli.paths import check_output_directory, check_writable_file, write_text
from fusionlang.errors import InputError
from fusionlang.executors import ExecutorUnavailable
from fusionlang.sweep import Policy, SweepSettings, run_sweep
from fusionlang.sweep.html import shown_bytes, sweep_html
from fusionlang.sweep.zoo import zoo_models

#: the most timing rounds --rounds takes
MAX_ROUNDS = 10_000


def timing_rounds(text: str) -> int:
    """A count of --measure rounds: an integer from 1 to MAX_ROUNDS."""
    return flags._count(text, "the round count", MAX_ROUNDS)


def configure(p) -> None:
    p.add_argument("zoo", metavar="ZOO", help="a folder of .onnx models, or a text file listing model paths")
    p.add_argument("--rules", required=True, metavar="A", help="the policy under test: a rule set name or .fuse file")
    p.add_argument("--baseline", required=True, metavar="B", help="the policy it is measured against")
    p.add_argument("--strategy", choices=["apollo", "tvm", "dp"], default=None,
                   help="partitioner for both policies (default: each rule set's own)")
    p.add_argument("--option", action="append", type=flags.strategy_option, metavar="KEY=VALUE",
                   help="strategy option for both policies (repeatable), e.g. max_ops=32")
    p.add_argument("--measure", action="store_true",
                   help="also time both compiled models in interleaved rounds (CPU and wall, ratio A/B)")
    p.add_argument("--rounds", type=timing_rounds, default=5, metavar="N", help="timing rounds of --measure (default 5)")
    p.add_argument("--json", dest="json_file", metavar="OUT", nargs="?", const="-",
                   help="write the sweep as JSON to OUT (- or no OUT: to stdout)")
    p.add_argument("--report", metavar="OUT.html", help="write an HTML page: the table and bar charts of A against B")
    p.add_argument("--jobs", type=flags.jobs, default=None, metavar="N",
                   help="worker processes (default: the cores; 1 builds in this process); with a bare --ray, "
                        "the CPUs of the local cluster")
    p.add_argument("--ray", nargs="?", const=True, default=None, metavar="ADDRESS",
                   help="build on Ray: a local cluster this command starts, or the cluster at ADDRESS "
                        "(needs pip install 'fusionlang[ray]')")
    p.add_argument("--no-cache", action="store_true", help="build every model again (results are still stored)")


def run(args) -> int:
    if args.json_file == "-":
        args.json = True
    check_ray_flags(args)
    for path in (args.json_file, args.report):
        if path and path != "-":
            check_writable_file(path)  # before the work, not after it
    if args.report:
        check_output_directory(_reports_dir(args.report))
    options = tuple(sorted((strategy_overrides(args) or {}).items()))
    settings = SweepSettings(models=tuple(zoo_models(args.zoo)), a=_policy(args.rules, args, options),
                             b=_policy(args.baseline, args, options), jobs=args.jobs, ray=args.ray,
                             measure=args.measure, rounds=args.rounds, cache=not args.no_cache,
                             reports_dir=_reports_dir(args.report))
    try:
        with ProgressBar(args) as progress:
            doc = run_sweep(settings, progress)
    except ExecutorUnavailable as exc:
        raise InputError(str(exc)) from None
    if args.json_file and args.json_file != "-":
        write_text(args.json_file, _dumps(doc))
    if args.report:
        write_text(args.report, sweep_html(doc))
    if wants_json(args):
        print_json(doc)
    elif not is_quiet(args):
        _print_text(console(args), doc, args)
    return _exit_status(doc)


def _reports_dir(page: str | None) -> str | None:
    """OUT.html's per-model report pages go to OUT_models/ beside it."""
    if not page:
        return None
    path = Path(page)
    return str(path.with_name(f"{path.stem}_models"))


def _policy(rules: str, args, options) -> Policy:
    """The policy, checked before any build: a rule set that does not load, or a strategy
    option it does not take, is bad input (exit 2), not a failed row for every model."""
    from fusionlang.api import load_rules
    from fusionlang.engine.partition import STRATEGIES, default_strategy
    from fusionlang.engine.policy import strategy_options

    ruleset = load_rules(rules)
    strategy = args.strategy or default_strategy(ruleset)
    strategy_options(ruleset, strategy, STRATEGIES[strategy][1], dict(options) or None)
    return Policy(rules, args.strategy, options)


def _dumps(doc: dict) -> str:
    return json.dumps(doc, indent=2) + "\n"


def _exit_status(doc: dict) -> int:
    summary = doc["summary"]
    if summary["failed"] or summary["check_failures"]:
        print(f"fusionlang: sweep: {summary['failed']} of {summary['models']} rows failed, "
              f"{summary['check_failures']} with outputs that differ from the reference or onnxruntime",
              file=sys.stderr)
        return EXIT_MISMATCH
    return EXIT_OK


def _print_text(out, doc: dict, args) -> None:
    for row in doc["rows"]:
        if row["status"] != "ok":
            out.print(f"{row['name']}: failed: {row['error']}")
            continue
        a, b = row["a"], row["b"]
        check = "ok" if row["checks_ok"] else "MISMATCH"
        timing = ""
        if "cpu_ratio" in row.get("measure", {}):
            timing = f", run A/B cpu {row['measure']['cpu_ratio']:.3f} wall {row['measure']['wall_ratio']:.3f}"
        out.print(f"{row['name']}: kernels {a['kernels']} vs {b['kernels']}, bytes {shown_bytes(a['bytes'])} vs "
                  f"{shown_bytes(b['bytes'])}, "
                  f"groups differ {row['groups_differ']}, checks {check}{timing}")
    s = doc["summary"]
    out.print(f"{s['models']} models: {s['ok']} ok, {s['failed']} failed; builds run {doc['builds']['run']}, "
              f"cached {doc['builds']['cached']}")
    for name, g in s["geomean_a_over_b"].items():
        out.print(f"  geomean A/B {name}: {g['value']:.3f} ({g['models']} models)")
    for path in (args.json_file, args.report):
        if path and path != "-":
            out.print(f"wrote {path}")


class ProgressBar:
    """A rich progress bar (counts, ETA) on stderr when it is a terminal and neither
    --quiet nor --json is given; yields the progress(stage, done, total) callback or None."""

    def __init__(self, args):
        self.enabled = sys.stderr.isatty() and not is_quiet(args) and not wants_json(args)
        self.bar = None
        self.tasks: dict[str, int] = {}

    def __enter__(self):
        if not self.enabled:
            return None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("ETA"), TimeRemainingColumn(), console=Console(file=sys.stderr),
                            transient=True)
        self.bar.start()
        return self.advance

    def advance(self, stage: str, done: int, total: int) -> None:
        if stage not in self.tasks:
            self.tasks[stage] = self.bar.add_task(stage, total=total)
        self.bar.update(self.tasks[stage], completed=done)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False
