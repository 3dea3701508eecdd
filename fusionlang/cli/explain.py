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

from fusionlang.cli.common import EXIT_OK, Stages, console, load_graph, load_rules, parse_shapes, print_json, wants_json

HELP = "explain why a node was (not) fused with its neighbours"

#: rule locations in explanation lines ("apollo.fuse:18:1"), highlighted on a terminal
_LOCATION = re.compile(r"[^\s():]+\.fuse:\d+(?::\d+)?")


def configure(p) -> None:
    p.add_argument("model", help="an ONNX model file")
    p.add_argument("--node", required=True, metavar="NAME", help="a node of the model (or of the rewritten graph)")
    p.add_argument("--input-shape", action="append", metavar="NAME=DxD..",
                   help="static shape for an input with symbolic dims (repeatable)")
    p.add_argument("--rules", default="apollo", help="rule set: apollo, tvm, dnnfusion or a .fuse file")
    p.add_argument("--strategy", choices=["apollo", "tvm", "dp"], default=None,
                   help="partitioner (default: the rule set's own strategy)")


def run(args) -> int:
    from fusionlang.api import fuse
    from fusionlang.engine.explain import explain

    with Stages(args) as stages:
        with stages.step("import model"):
            graph = load_graph(args.model, parse_shapes(args.input_shape))
        with stages.step("load rules"):
            ruleset = load_rules(args.rules)
        with stages.step("rewrite + partition"):
            plan = fuse(graph, ruleset, args.strategy)
    explanation = explain(plan, ruleset, args.node)
    if wants_json(args):
        print_json(dataclasses.asdict(explanation) | {"strategy": plan.strategy, "rules": plan.rules,
                                                      "lines": explanation.lines()})
        return EXIT_OK
    out = console(args)
    from rich.text import Text

    for k, line in enumerate(explanation.lines()):
        text = Text(line, style="bold" if k == 0 else "")
        text.highlight_regex(_LOCATION, "cyan")
        if line.strip() == "not fused with:":
            text.stylize("yellow")
        out.print(text)
    return EXIT_OK
