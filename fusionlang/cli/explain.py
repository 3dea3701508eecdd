"""`fusionlang explain MODEL --node NAME`: why a node is in its group, and why each
neighbour is not.

Prints :func:`fusionlang.engine.explain.explain`: the node's category and the class rule
that gave it, the rewrites that touched it (file:line), its group and the fuse entries
that formed it, and for every neighbour in another group the first rule or limit that
refused the merge. NAME may be a node of the imported model that a rewrite replaced; the
explanation is then about the node that replaced it. An unknown NAME is a one-line
error (exit 2).
"""

from __future__ import annotations

import dataclasses
import re

from fusionlang.cli.common import (EXIT_OK, Stages, add_model_arguments, console, fuse_model, print_json,
                                   strategy_overrides, wants_json)
from fusionlang.cli.text import safe

HELP = "explain why a node was (not) fused with its neighbours"

#: rule locations in explanation lines ("apollo.fuse:18:1"), highlighted on a terminal
_LOCATION = re.compile(r"[^\s():]+\.fuse:\d+(?::\d+)?")


def configure(p) -> None:
    add_model_arguments(p)
    p.add_argument("--node", required=True, metavar="NAME", help="a node of the model (or of the rewritten graph)")


def run(args) -> int:
    from fusionlang.engine.explain import explain

    with Stages(args) as stages:
        _, ruleset, plan = fuse_model(args, stages)
    explanation = explain(plan, ruleset, args.node, options=strategy_overrides(args))
    if wants_json(args):
        print_json(dataclasses.asdict(explanation) | {"strategy": plan.strategy, "rules": plan.rules,
                                                      "lines": explanation.lines()})
        return EXIT_OK
    out = console(args)
    from rich.text import Text

    for k, line in enumerate(explanation.lines()):
        # made safe before rich sees it: Text() would drop some control characters unseen
        text = Text(safe(line), style="bold" if k == 0 else "")
        text.highlight_regex(_LOCATION, "cyan")
        if line.strip() == "not fused with:":
            text.stylize("yellow")
        out.print(text)
    return EXIT_OK
