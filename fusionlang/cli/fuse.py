"""`fusionlang fuse MODEL`: partition a model into fused groups and report them."""

from __future__ import annotations

from pathlib import Path

from fusionlang.cli.common import EXIT_OK, console, load_graph, parse_shapes

HELP = "partition a model into fused groups and print a summary"


def configure(p) -> None:
    p.add_argument("model", help="an ONNX model file")
    p.add_argument("--input-shape", action="append", metavar="NAME=DxD..",
                   help="static shape for an input with symbolic dims (repeatable)")
    p.add_argument("--rules", default="apollo", help="rule set: apollo, tvm, dnnfusion or a .fuse file")
    p.add_argument("--strategy", choices=["apollo", "tvm", "dp"], default=None,
                   help="partitioner (default: the rule set's own strategy)")
    p.add_argument("--json", dest="json_file", metavar="FILE", help="write the plan as JSON to FILE")
    p.add_argument("--report", metavar="FILE.html", help="write a self-contained HTML report")
    p.add_argument("--verbose", "-v", action="store_true", help="list every group")


def run(args) -> int:
    from fusionlang.api import fuse

    out = console(args)
    graph = load_graph(args.model, parse_shapes(args.input_shape))
    plan = fuse(graph, args.rules, args.strategy)
    if args.json_file:
        Path(args.json_file).write_text(plan.to_json(indent=2))
    if args.report:
        from fusionlang.report import write_report

        write_report(plan, args.report)
    out.print(plan.summary())
    if args.verbose:
        ops = {n.name: n.op for n in plan.graph.nodes}
        for group in plan.groups:
            members = ", ".join(f"{n}:{ops[n]}" for n in group.nodes)
            out.print(f"  group {group.id} [{group.kind}/{group.category}] {members}")
    for path in (args.json_file, args.report):
        if path:
            out.print(f"wrote {path}")
    return EXIT_OK
