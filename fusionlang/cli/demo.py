"""`fusionlang demo`: the whole pipeline on the embedded transformer block.

Import ``fusionlang/data/demo_block.onnx``, fuse it with the default rules (apollo),
compile it (C, or CUDA when CuPy sees a device), run it on seeded input, run the NumPy
reference interpreter on the same input, and compare: exit 1 if they disagree. The
summary shows ops, kernels and global-memory bytes before and after fusion, the time of
each stage (:mod:`fusionlang.stages`), the interpreter's time (the oracle, not a
baseline), the largest error, and the groups.
"""

from __future__ import annotations

import time
from importlib import resources
from typing import Any, Callable

import numpy as np
from rich import box
from rich.console import JustifyMethod
from rich.table import Table
from rich.text import Text

from fusionlang.api import compile as compile_plan
from fusionlang.api import from_onnx, fuse, load_rules
from fusionlang.cli import flags
from fusionlang.cli.common import Stages, compare
from fusionlang.cli.modes import EXIT_MISMATCH, EXIT_OK, console, print_json, wants_json
from fusionlang.cli.feeds import read_feeds
from fusionlang.cli.paths import check_writable_file, write_text
from fusionlang.cli.text import print_line, safe
from fusionlang.reference import run as reference_run
from fusionlang.report import render_report
from fusionlang.stages import IMPORT, format_seconds, seconds_key, stage_line, stage_times



def configure(p) -> None:
    p.add_argument("--rules", default="apollo", help="rule set: apollo, tvm, dnnfusion or a .fuse file")
    p.add_argument("--strategy", choices=["apollo", "tvm", "dp"], default=None,
                   help="partitioner (default: the rule set's own strategy)")
    p.add_argument("--target", choices=["auto", "c", "cuda"], default="auto",
                   help="auto: cuda when CuPy sees a device, else c")
    p.add_argument("--seed", type=flags.seed, default=0, help=f"seed of the random input (0 to {flags.MAX_SEED})")
    p.add_argument("--repeat", type=flags.repeat, default=5, metavar="N",
                   help="time the fused program as the best of N runs (the interpreter: of min(N, 3))")
    p.add_argument("--report", metavar="FILE.html", help="also write the HTML report, with loop nests")
    p.add_argument("--rtol", type=flags.tolerance, default=1e-3, help="relative tolerance (>= 0)")
    p.add_argument("--atol", type=flags.tolerance, default=1e-4,
                   help="tolerance relative to each output's largest |value| (>= 0)")


def _best_of(n: int, fn: Callable[[], dict[str, np.ndarray]]) -> tuple[float, dict[str, np.ndarray]]:
    best, result = float("inf"), None  # type: float, Any
    for _ in range(max(1, n)):
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    return best, result


def run(args) -> int:
    from fusionlang.backend import default_target  # here: islpy's import cost, for this command only

    target = default_target() if args.target == "auto" else args.target
    model = resources.files("fusionlang").joinpath("data", "demo_block.onnx")
    if args.report:
        check_writable_file(args.report)  # before the work, not after it
    with Stages(args) as stages:
        with stages.step("import"):
            graph = from_onnx(model.read_bytes())
        with stages.step("load rules"):
            ruleset = load_rules(args.rules)
        with stages.step("rewrite + partition"):
            plan = fuse(graph, ruleset, args.strategy, target=target)
        with stages.step(f"codegen + compile ({target})"):
            compiled = compile_plan(plan, target)
        feeds = read_feeds(graph, None, args.seed)
        with stages.step(f"run ({target})"):
            fused_seconds, outputs = _best_of(args.repeat, lambda: compiled.run(feeds))
        with stages.step("reference interpreter"):
            reference_seconds, expected = _best_of(min(args.repeat, 3), lambda: reference_run(graph, feeds))
        if args.report:

            with stages.step("report"):
                write_text(args.report, render_report(plan, compiled=compiled,
                                                      title="fusionlang demo: transformer block"))
    problems = compare(outputs, expected, args.rtol, args.atol)
    max_error = max((float(np.max(np.abs(outputs[k].astype(np.float64) - expected[k].astype(np.float64))))
                     for k in expected if outputs[k].shape == expected[k].shape and expected[k].size), default=0.0)
    s = plan.stats
    op_of = {n.name: n.op for n in plan.graph.nodes}
    result = {
        "model": "demo_block.onnx",
        "graph": graph.name,
        "rules": plan.rules,
        "strategy": plan.strategy,
        "target": target,
        "seed": args.seed,
        "ops_before": len(graph.nodes),
        "ops_after_rewriting": len(plan.graph.nodes),
        "kernels_before": s.kernels_before,
        "kernels_after": s.kernels_after if s.kernels_after is not None else plan.launches,
        "bytes_before": s.bytes_before,
        "bytes_after": s.bytes_after,
        seconds_key(IMPORT): stages.timings["import"],
        **{seconds_key(stage): seconds for stage, seconds in stage_times(s, compiled.stats).items()},
        "run_seconds": fused_seconds,
        "reference_seconds": reference_seconds,
        "max_abs_error": max_error,
        "rtol": args.rtol,
        "atol": args.atol,
        "check": "ok" if not problems else problems,
        "groups": [{"id": g.id, "kind": g.kind, "category": g.category, "nodes": g.nodes,
                    "ops": [op_of[n] for n in g.nodes], "rules": g.rules} for g in plan.groups],
        "timings": stages.timings,
    }
    if args.report:
        result["report"] = args.report
    if wants_json(args):
        print_json(result)
    else:
        _print_summary(console(args), plan, result)
    if problems:
        for problem in problems:
            print_line(f"fusionlang: mismatch: {problem}")
        return EXIT_MISMATCH
    return EXIT_OK


def _mib(nbytes) -> str:
    return f"{nbytes / 2**20:.2f} MiB"


def _locations(rules: list[str]) -> str:
    """"apollo.fuse:25,26" from the notes "apollo.fuse:25:1: fuse ...", "apollo.fuse:26:1: fuse ..."."""
    lines: dict[str, list[str]] = {}
    for rule in rules:
        where = rule.split(": ", 1)[0].split(":")
        if len(where) >= 2 and where[1].isdigit():
            lines.setdefault(where[0], []).append(where[1])
    return " ".join(f"{path}:{','.join(dict.fromkeys(nums))}" for path, nums in lines.items()) or "-"


def _print_summary(out, plan, r: dict) -> None:
    title = Text("fusionlang demo", style="bold")
    title.append(safe(f"  transformer block · rules {r['rules']} · strategy {r['strategy']} · target {r['target']}"),
                 style="dim")
    out.print(title)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("")
    table.add_column("before", justify="right")
    table.add_column("after", justify="right")
    table.add_column("", style="dim")
    table.add_row("ops", str(r["ops_before"]), str(r["ops_after_rewriting"]), "after opening compound ops")
    kb, ka = r["kernels_before"], r["kernels_after"]
    table.add_row("kernels", str(kb), Text(str(ka), style="bold green"), f"{kb / ka:.1f}x fewer launches" if ka else "")
    bb, ba = r["bytes_before"], r["bytes_after"]
    table.add_row("global memory", _mib(bb), Text(_mib(ba), style="bold green"), f"{bb / ba:.2f}x less traffic" if ba else "")
    out.print(table)
    ok = r["check"] == "ok"
    # the interpreter is the oracle, not a baseline: it computes matmuls in float64 on
    # however many threads NumPy's BLAS takes, so its time is shown, never a speed-up
    lines = [
        ("time", stage_line(stage_times(r))),
        ("oracle", f"reference interpreter {format_seconds(r['reference_seconds'])} "
                   "(NumPy: the oracle the result is checked against, not a baseline)"),
    ]
    for label, value in lines:
        row = Text(f"{label:<10}", style="bold")
        row.append(value)
        out.print(row)
    check = Text(f"{'max error':<10}", style="bold")
    check.append(f"{r['max_abs_error']:.3g}  ")
    check.append("matches the reference" if ok else "MISMATCH", style="green" if ok else "bold red")
    check.append(f" (rtol {r['rtol']:g}, atol {r['atol']:g})", style="dim")
    out.print(check)
    out.print()
    groups = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title_justify="left",
                   title=f"groups ({len(plan.groups)}: {len(plan.kernels)} kernels)")
    stitched = {gid for gid, _ in plan.stitches}
    rows = []
    for g in r["groups"]:
        category = g["category"] + ("" if g["kind"] == "kernel" else f" ({g['kind']})")
        formed = _locations(g["rules"]) + (" stitched" if g["id"] in stitched else "")
        # category and rule file names come from the user's rule files: cells are made safe
        rows.append([safe(cell, newlines=False) for cell in
                     (f"g{g['id']}", category, str(len(g["ops"])), formed, " → ".join(g["ops"]))])
    headers = ["group", "category", "ops", "formed by", "op types"]
    fixed = [max(len(h), *(len(row[k]) for row in rows)) for k, h in enumerate(headers[:-1])]
    # the op types get what is left of the line (columns are 2 apart); ellipsis beyond
    room = max(12, out.width - sum(fixed) - 2 * len(fixed) - 6)
    aligns: tuple[JustifyMethod, ...] = ("right", "left", "right", "left", "left")
    for k, (name, justify) in enumerate(zip(headers, aligns)):
        groups.add_column(name, justify=justify, no_wrap=True)
    for row in rows:
        kinds = row[-1] if len(row[-1]) <= room else row[-1][: room - 1] + "…"
        groups.add_row(*(Text(cell) for cell in row[:-1]), Text(kinds))
    out.print(groups)
    if "report" in r:
        out.print(f"wrote {r['report']}")
