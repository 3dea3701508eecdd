"""`fusionlang fuse MODEL`: partition a model into fused groups and report them.

``--json FILE`` writes the plan to FILE (``--json -`` or a bare ``--json`` prints it on
stdout, like the global ``fusionlang --json fuse MODEL``); ``--report F.html`` writes
the HTML report, with each group's loop nests when ``--loops`` compiles the plan too;
``--save-onnx OUT.onnx`` writes the model with each kernel group as a local ONNX function
(fusionlang.export), for Netron or onnxruntime.
The text output lists the rewrites that fired (and the compound ops opened), each with
how often and where it is written.
"""

from __future__ import annotations

import sys

from fusionlang.api import compile as compile_plan, save_fused_onnx
from fusionlang.cli.common import Stages, add_model_arguments, fuse_model
from fusionlang.cli.modes import EXIT_OK, console, wants_json
from fusionlang.ir.memory import check_tensor_sizes
from fusionlang.cli.paths import check_writable_file, write_text
from fusionlang.engine.pattern_groups import pattern_outcomes
from fusionlang.report import render_report
from fusionlang.stages import stage_line, stage_times



def configure(p) -> None:
    add_model_arguments(p)
    p.add_argument("--json", dest="json_file", metavar="FILE", nargs="?", const="-",
                   help="write the plan as JSON to FILE (- or no FILE: to stdout)")
    p.add_argument("--report", metavar="FILE.html", help="write a self-contained HTML report")
    p.add_argument("--save-onnx", metavar="OUT.onnx",
                   help="write the model with each fused group as a local ONNX function (for Netron, onnxruntime)")
    p.add_argument("--loops", action="store_true",
                   help="compile the plan (target c) and show each group's loop nests in the report")
    p.add_argument("--layout", choices=["auto", "dot", "layered"], default="auto",
                   help="report graph layout: Graphviz dot (auto: when installed) or the built-in layered one")
    p.add_argument("--verbose", "-v", action="store_true", help="list every group")
    p.add_argument("--show-rewrites", action="store_true",
                   help="list the rewrites in the order they first fired, with their priority (phase)")


def fired_lines(fired: dict[str, int], ruleset) -> list[str]:
    """The rewrites that fired, then the decompositions, most frequent first, each with
    where it is written: "    fold_conv_bn (simplify.fuse:13) x53"."""
    if not fired:
        return ["  rewrites fired: none"]
    rewrites = {r.name: r.where for r in ruleset.rewrites}
    opened = {f"decompose {op}": ", ".join(dict.fromkeys(c.where for c in cases))
              for op, cases in ruleset.decompositions.items()}
    by_count = sorted(fired.items(), key=lambda item: (-item[1], item[0]))
    lines = []
    for title, where in (("rewrites fired", rewrites), ("compound ops opened", opened)):
        rows = [f"    {name} ({where[name]}) x{count}" for name, count in by_count if name in where]
        if rows:
            lines += [f"  {title} {sum(fired[n] for n in fired if n in where)}:", *rows]
    return lines


def pattern_lines(plan, ruleset) -> list[str]:
    """'  fuse pattern rms_norm_matmul (ext.fuse:15): 2 group(s), refused 1 (feedback refused)'."""
    lines = []
    for entry, groups, refused in pattern_outcomes(plan, ruleset):
        why = ", ".join(f"{count} {verdict}" for verdict, count in refused.items())
        lines.append(f"  fuse pattern {entry.name} ({entry.where}): {groups} group(s)"
                     + (f", refused: {why}" if why else ""))
    return lines


def rewrite_order_lines(order: list[dict]) -> list[str]:
    """'    1. fold_conv_bn_no_bias (simplify.fuse:23, priority 10) x1 from step 1', in firing order."""
    if not order:
        return ["  rewrite order: none fired"]
    return ["  rewrite order (higher priorities run as earlier phases):"] + [
        f"    {k}. {row['rule']} ({row['where']}, priority {row['priority']}) x{row['count']} from step "
        f"{row['first_step']}" for k, row in enumerate(order, 1)]


def run(args) -> int:
    if args.json_file == "-":
        args.json = True  # the plan on stdout is this command's --json output
    out = console(args)
    to_stdout = wants_json(args)
    for path in (args.json_file, args.report, args.save_onnx):
        if path and path != "-":
            check_writable_file(path)  # before the work, not after it
    with Stages(args) as stages:
        _, ruleset, plan = fuse_model(args, stages)
        compiled = None
        if args.loops:
            check_tensor_sizes(plan.graph)  # compiling lays out (allocates) every tensor
            with stages.step("codegen + compile (c)"):
                compiled = compile_plan(plan, "c")
        if args.json_file and args.json_file != "-":
            write_text(args.json_file, plan.to_json(indent=2))
        if args.report:

            with stages.step("report"):
                write_text(args.report, render_report(plan, compiled=compiled, layout=args.layout))
        fused = None
        if args.save_onnx:
            with stages.step("save onnx"):
                fused = save_fused_onnx(args.model, plan, args.save_onnx)
    if to_stdout:
        sys.stdout.write(plan.to_json(indent=2) + "\n")
        return EXIT_OK
    out.print(plan.summary())
    for line in fired_lines(plan.stats.rewrites or {}, ruleset):
        out.print(line, highlight=False, markup=False)
    for line in pattern_lines(plan, ruleset):
        out.print(line, highlight=False, markup=False)
    if args.show_rewrites:
        for line in rewrite_order_lines(plan.stats.rewrite_order or []):
            out.print(line, highlight=False, markup=False)
    if compiled is not None:
        out.print(f"  loop nests {compiled.stats.loop_nests}, time {stage_line(stage_times(compiled.stats))}")
    if args.verbose:
        ops = {n.name: n.op for n in plan.graph.nodes}
        for group in plan.groups:
            members = ", ".join(f"{n}:{ops[n]}" for n in group.nodes)
            kernel = f" ({group.kernel})" if group.kernel else ""
            out.print(f"  group {group.id} [{group.kind}/{group.category}]{kernel} {members}")
    for path in (args.json_file, args.report):
        if path:
            out.print(f"wrote {path}")
    if fused is not None:
        for line in saved_onnx_lines(args.save_onnx, fused, len(plan.kernels), args.verbose):
            out.print(line, highlight=False, markup=False)
    return EXIT_OK


def saved_onnx_lines(path: str, fused, kernels: int, verbose: bool) -> list[str]:
    """"wrote OUT.onnx: 12 functions for 12 kernel groups", then the exporter's notes
    (split nodes kept whole, merged groups): all with --verbose, else how many there are."""
    lines = [f"wrote {path}: {len(fused.functions)} functions for {kernels} kernel groups"]
    if verbose:
        lines += [f"  note: {note}" for note in fused.notes]
    elif fused.notes:
        lines.append(f"  {len(fused.notes)} notes on groups whose function differs from the plan (see --verbose)")
    return lines
