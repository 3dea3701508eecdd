"""`fusionlang check FILE.fuse...`: property-check every rule of rule files.

Each rewrite and decomposition is run on instances hypothesis draws for its guard until
a coverage target is met or ``--budget`` rounds are spent (and proved with sympy over
the reals where both sides are scalar formulas; a float32 verdict says whether it is
also float-exact), each fuse entry is checked against the lattice (a nofuse entry for
deciding a pair), each strategy on random graphs, each in-file test run. Verdicts depend
on the files, the seed and the flags only, never on the machine's speed. A rule shared by several files (every policy imports simplify.fuse) is checked
once. Exit status: 0 when every rule holds (under-covered rules are reported, not
failed), 1 when one does not (its shrunk counterexample is printed with its
``file:line``), when no instance of a rewrite or decomposition could be drawn (unless it
says ``accepts uncovered``, or ``--allow-uncovered``) or, with ``--float-exact``, when
one changes float32 results; 2 when a file cannot be loaded.

``--jobs N`` or ``--ray [ADDRESS]`` spread the checks over worker processes or a Ray
cluster, one job per rule (and one per file for its test blocks; see
:mod:`fusionlang.testing.checkshards`): each worker parses the rule file itself and checks
with the same seed, so the verdicts, counterexamples and output are those of a serial
run, in the same order (printed once every job has answered). A rule whose job never
answers, past the executor's re-runs of a dead worker, is reported failed.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import NoReturn

from fusionlang.cli import flags
from fusionlang.cli.common import testing_module
from fusionlang.cli.scaleout import add_executor_flags, is_serial, run_jobs, value_or
from fusionlang.cli.modes import EXIT_MISMATCH, EXIT_OK, is_quiet, print_json, wants_json
from fusionlang.errors import InputError
from fusionlang.lang import load_rules
from fusionlang.lang.diagnostics import suggest
from fusionlang.testing.coverage import ROUND_BUDGET



def configure(p) -> None:
    p.add_argument("files", nargs="+", metavar="FILE.fuse", help="rule files (or library names: apollo, tvm, ...)")
    p.add_argument("--examples", type=int, default=60, metavar="N",
                   help="instances per rule (default 60): for rewrites and decompositions, the least number "
                        "that must satisfy the guard before the coverage target can be met")
    p.add_argument("--budget", type=flags.rounds, default=ROUND_BUDGET, metavar="ROUNDS",
                   help="rounds of drawing a rewrite or decomposition may take toward its coverage target "
                        "before it is reported under-covered (default %(default)s; the first round "
                        "draws --examples instances, each later one a third as many). A count, not a time: "
                        "the same files, seed and flags give the same verdicts on any machine")
    p.add_argument("--float-exact", action="store_true",
                   help="a rewrite or decomposition that changes float32 results (not float-exact) fails")
    p.add_argument("--allow-uncovered", action="store_true",
                   help="a rewrite or decomposition of which no instance could be drawn is reported "
                        "under-covered instead of failing (as if it said 'accepts uncovered')")
    p.add_argument("--seed", type=flags.seed, default=0,
                   help="hypothesis seed, 0 to 2**32-1: the same seed draws the same instances")
    p.add_argument("--seeds", type=flags.seed_count, default=1, metavar="N",
                   help="check every rule under N seeds, --seed to --seed + N - 1 (a verdict per rule and "
                        "seed; default 1); with --jobs or --ray each rule and seed is a job of its own")
    p.add_argument("--kinds", default=None, metavar="K,K",
                   help="check only these kinds: rewrite, decompose, def, fuse, strategy, test")
    p.add_argument("--rule", action="append", default=None, metavar="NAME",
                   help="check only this rule (repeatable): FILE.fuse::NAME as the output names it, or a "
                        "plain NAME when only one file's rule has it")
    add_executor_flags(p)


def run(args) -> int:
    checker = testing_module("checker", "check", "instances")
    checkshards = testing_module("checkshards", "check", "instances")
    KINDS, STATUSES = checker.KINDS, checker.STATUSES
    if args.examples < 1:
        raise InputError("--examples must be at least 1")
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip()) if args.kinds else KINDS
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise InputError(f"--kinds: unknown kind {unknown[0]!r} (known: {', '.join(KINDS)})")
    # load every file first: a file that cannot be loaded is bad input (exit 2) before any
    # long check runs
    rulesets = [load_rules(path) for path in args.files]
    names = _selected_rules(checkshards, args.rule, rulesets, kinds) if args.rule else None
    options = checkshards.CheckOptions(max_examples=args.examples, seed=args.seed, budget=args.budget,
                                       float_exact=args.float_exact, allow_uncovered=args.allow_uncovered)
    if args.seed + args.seeds - 1 > flags.MAX_SEED:
        raise InputError(f"--seeds: the last seed, {args.seed + args.seeds - 1}, is past {flags.MAX_SEED}")
    shards = checkshards.plan_shards(list(args.files), rulesets, kinds, names, options, args.seeds)
    quiet, as_json = is_quiet(args), wants_json(args)

    def show(check) -> None:
        if not as_json and (check.status == "failed" or not quiet):
            print(str(check), flush=True)

    reports = _check_shards(checkshards, rulesets, shards, args, show)
    failed = sum(len(r.failures) for r in reports)
    if as_json:
        print_json({"ok": failed == 0, "reports": [r.to_dict() for r in reports]})
    elif not quiet:
        total = {s: sum(r.counts()[s] for r in reports) for s in STATUSES}
        checked = f"{sum(len(r.checks) for r in reports)} " + ("rule(s)" if args.seeds == 1 else
                                                                 f"verdict(s) under {args.seeds} seeds")
        print(f"{len(args.files)} file(s), {checked}: " + ", ".join(f"{total[s]} {s}" for s in STATUSES))
    return EXIT_MISMATCH if failed else EXIT_OK


def _check_shards(checkshards, rulesets, shards, args, show):
    """The reports, each shard's verdicts shown in the serial order: as each is reached
    when the shards run here, else once the executor has them all."""
    merge = checkshards.Merge(rulesets)
    if is_serial(args):
        for shard in shards:
            for check in merge.add(shard, checkshards.check_shard(shard)):
                show(check)
        return merge.reports
    outcomes = run_jobs(checkshards.check_shard, {shard.label: shard for shard in shards}, args)
    for shard in shards:
        checks = value_or(outcomes[shard.label], lambda error: checkshards.lost_checks(shard, error))
        for check in merge.add(shard, checks):
            show(check)
    return merge.reports


def _selected_rules(checkshards, wanted, rulesets, kinds) -> set[str]:
    """The ``file.fuse::name`` of each --rule. Each must name a rule of the given kinds
    (checking nothing and exiting 0 would read as success), and a plain name the rule of
    one file only (checking both would hide which one the author meant)."""
    known: set[str] = set()
    for ruleset in rulesets:
        known |= checkshards.qualified_names(ruleset, kinds)
    return {_qualified(spec, known) for spec in wanted}


def _qualified(spec: str, known: set[str]) -> str:
    """``spec`` (``FILE::NAME`` or ``NAME``) as the one ``file.fuse::name`` of ``known`` it names."""
    if "::" in spec:
        file, _, name = spec.rpartition("::")
        qualified = f"{PurePath(file).name}::{name}"
        if qualified not in known:
            _unknown(spec, sorted(known))
        return qualified
    matches = sorted(q for q in known if q.split("::", 1)[1] == spec)
    if not matches:
        _unknown(spec, sorted({q.split("::", 1)[1] for q in known}))
    if len(matches) > 1:
        raise InputError(f"--rule: {spec!r} names rules of several files ({', '.join(matches)}); "
                         "nothing was checked (name one as FILE::NAME)")
    return matches[0]


def _unknown(spec: str, candidates: list[str]) -> NoReturn:
    hint = suggest(spec, candidates)
    raise InputError(f"--rule: unknown rule {spec!r}; nothing was checked" + (f" ({hint})" if hint else ""))
