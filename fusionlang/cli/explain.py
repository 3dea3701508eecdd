"""`fusionlang explain MODEL --node NAME`: why a node is in its group, and why each
neighbour is not. `fusionlang explain MODEL --rule NAME`: where a rewrite fired, or why
it did not (the failing part of its pattern or guard, with its column, at each node of
the rewritten graph its pattern starts at); with `--node` too, why not at that node.

Prints :func:`fusionlang.engine.explain.explain`: the node's category and the class rule
that gave it, the rewrites that touched it (file:line), its group and the fuse entries
that formed it, and for every neighbour in another group the first rule or limit that
refused the merge. NAME may be a node of the imported model that a rewrite replaced; the
explanation is then about the node that replaced it. An unknown NAME is a one-line
error (exit 2), and so is an unknown rule (with a did-you-mean).
"""

from __future__ import annotations

import dataclasses
import re

from rich.text import Text

from fusionlang.cli.common import (Stages, add_model_arguments, fuse_model, load_graph, load_rules, parse_shapes,
                                   rules_named, strategy_overrides)
from fusionlang.cli.modes import EXIT_OK, console, print_json, wants_json
from fusionlang.cli.text import safe
from fusionlang.engine.explain import explain
from fusionlang.engine.rule_report import rule_at_node, rule_report
from fusionlang.engine.whynot import rewrite_named
from fusionlang.errors import FuseError, InputError


#: rule locations in explanation lines ("apollo.fuse:18:1"), highlighted on a terminal
_LOCATION = re.compile(r"[^\s():]+\.fuse:\d+(?::\d+)?")


def configure(p) -> None:
    add_model_arguments(p)
    p.add_argument("--node", metavar="NAME", help="a node of the model (or of the rewritten graph)")
    p.add_argument("--rule", metavar="NAME", help="a rewrite rule: where it fired, or why it did not")


def run(args) -> int:
    if args.rule is not None:
        return _explain_rule(args)
    if args.node is None:
        raise InputError("explain needs --node NAME (a node's group) or --rule NAME (a rewrite)")
    with Stages(args) as stages:
        _, ruleset, plan = fuse_model(args, stages)
    explanation = explain(plan, ruleset, args.node, options=strategy_overrides(args))
    if wants_json(args):
        print_json(dataclasses.asdict(explanation) | {"strategy": plan.strategy, "rules": plan.rules,
                                                      "lines": explanation.lines()})
        return EXIT_OK
    _print_lines(args, explanation.lines())
    return EXIT_OK


def _explain_rule(args) -> int:
    """Rewrite the model (no partitioning) and report on one rule: everywhere, or at
    ``--node``."""

    with Stages(args) as stages:
        with stages.step("import"):
            graph = load_graph(args.model, parse_shapes(args.input_shape))
        with stages.step("load rules"):
            ruleset = load_rules(rules_named(args))
            rewrite_named(ruleset, args.rule)
        with stages.step("rewrite"):
            if args.node is None:
                report = rule_report(graph, ruleset, args.rule)
                data, lines = dataclasses.asdict(report), report.lines()
            else:
                answer = _why_not_at(graph, ruleset, args.rule, args.node)
                data, lines = dataclasses.asdict(answer), [str(answer)]
    if wants_json(args):
        print_json(data | {"rules": rules_named(args), "lines": lines})
        return EXIT_OK
    _print_lines(args, lines)
    return EXIT_OK


def _why_not_at(graph, ruleset, rule: str, node: str):
    """The rule at ``node``, consistent with a run of the whole rule set (rule_at_node)."""
    try:
        return rule_at_node(graph, ruleset, rule, node)
    except FuseError as exc:
        raise InputError(str(exc)) from None


def _print_lines(args, lines: list[str]) -> None:
    out = console(args)

    for k, line in enumerate(lines):
        # made safe before rich sees it: Text() would drop some control characters unseen
        text = Text(safe(line), style="bold" if k == 0 else "")
        text.highlight_regex(_LOCATION, "cyan")
        if line.strip() == "not fused with:":
            text.stylize("yellow")
        out.print(text)
