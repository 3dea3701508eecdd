"""`fusionlang campaign --graphs N [--strategy S] [--rules R] [--seed K] [--jobs J | --ray [ADDRESS]]`:
the random-graph equivalence campaign (:mod:`fusionlang.testing.campaign`), one job per
shard of graphs. Prints every graph not shown equivalent with its reproducer, then a
summary line (``--json``: one document). Exit status: 0 when every graph was equivalent,
1 on a mismatch, a crash or a shard that never answered, 2 on bad flags.
"""

from __future__ import annotations

import sys

from fusionlang.cli import flags
from fusionlang.cli.common import testing_module
from fusionlang.cli.modes import EXIT_MISMATCH, EXIT_OK, is_quiet, print_json, wants_json
from fusionlang.cli.scaleout import add_executor_flags, executor_place
from fusionlang.errors import InputError
from fusionlang.lang import load_rules

def configure(p) -> None:
    p.add_argument("--graphs", type=flags.graph_count, default=1000,
                   metavar="N", help="random graphs to check (default %(default)s)")
    p.add_argument("--strategy", default="apollo", metavar="S",
                   help="partitioning strategy (default apollo; the equivalence tests also run tvm and dp)")
    p.add_argument("--rules", default=None, metavar="RULES",
                   help="rule set or .fuse file (default: the strategy's own: apollo, tvm, dnnfusion for dp)")
    p.add_argument("--seed", type=flags.seed, default=0,
                   help="campaign seed: the same seed, --graphs and --shard-graphs check the same graphs")
    p.add_argument("--shard-graphs", type=flags.shard_graphs, default=200,
                   metavar="M", help="graphs per job (default %(default)s)")
    add_executor_flags(p)


def run(args) -> int:
    campaign = testing_module("campaign", "campaign", "graphs")
    rules = args.rules or campaign.STRATEGY_RULES.get(args.strategy, args.strategy)
    ruleset = load_rules(rules)  # bad rules are bad input (exit 2) before any worker starts
    if args.strategy not in ruleset.strategies:
        raise InputError(f"--strategy: {args.strategy!r} is not a strategy of {rules} "
                         f"(it has: {', '.join(sorted(ruleset.strategies)) or 'none'})")
    jobs, ray = executor_place(args)
    progress = _progress_line if sys.stderr.isatty() and not is_quiet(args) and not wants_json(args) else None
    report = campaign.run_campaign(args.graphs, seed=args.seed, strategy=args.strategy, rules=rules,
                                   shard_graphs=args.shard_graphs, jobs=jobs, ray=ray, progress=progress)
    if wants_json(args):
        print_json(report.to_dict())
    else:
        for finding in report.findings:
            print(str(finding))
        for index, error in sorted(report.lost.items()):
            print(f"shard {index}: lost: {error}")
        if not is_quiet(args) or not report.ok:
            print(report.summary())
    return EXIT_OK if report.ok else EXIT_MISMATCH


def _progress_line(done: int, total: int) -> None:
    print(f"\r{done}/{total} shards", end="\n" if done == total else "", file=sys.stderr, flush=True)
