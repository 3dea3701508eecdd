"""`fusionlang run MODEL`: run a model compiled (c, cuda) or with the reference interpreter."""

from __future__ import annotations

import json
import time

import numpy as np

from fusionlang.api import compile as compile_plan
from fusionlang.api import fuse
from fusionlang.cli import flags
from fusionlang.cli.common import (Stages, add_model_arguments, compare, load_graph_for_feeds, parse_shapes,
                                   strategy_overrides)
from fusionlang.cli.modes import EXIT_MISMATCH, EXIT_OK, console, wants_json
from fusionlang.cli.feeds import complete_feeds, read_input_files
from fusionlang.ir.memory import check_tensor_sizes
from fusionlang.cli.outputs import write_outputs
from fusionlang.cli.paths import check_output_directory
from fusionlang.cli.text import print_line
from fusionlang.errors import InputError
from fusionlang.reference import run as reference_run
from fusionlang.stages import IMPORT, RUN, seconds_key, stage_line, stage_times



def configure(p) -> None:
    add_model_arguments(p)
    p.add_argument("--target", choices=["c", "cuda", "reference"], default="c")
    p.add_argument("--input", action="append", metavar="NAME=FILE.npy")
    p.add_argument("--random-inputs", type=flags.seed, metavar="SEED",
                   help=f"fill missing inputs with seeded noise (SEED: 0 to {flags.MAX_SEED})")
    p.add_argument("--output-dir", metavar="DIR", help="write each output as DIR/<name>.npy")
    p.add_argument("--check", action="store_true", help="compare with the reference interpreter (exit 1 on mismatch)")
    p.add_argument("--rtol", type=flags.tolerance, help="relative tolerance of --check (>= 0; default 1e-3, "
                   "float16 outputs 1e-2, bfloat16 6e-2)")
    p.add_argument("--atol", type=flags.tolerance,
                   help="tolerance of --check relative to each output's largest |value| (>= 0; default 1e-4, "
                   "float16 outputs 1e-2, bfloat16 6e-2)")
    p.add_argument("--threads", type=flags.threads, default=1, metavar="N",
                   help="run the compiled C on N threads (default 1; results do not depend on N)")
    p.add_argument("--precision", choices=["fp32", "tf32"], default="fp32",
                   help="--target cuda: conv and matmul on tensor cores in three TF32 passes as accurate as fp32 "
                   "(default), or in one, faster, about 1e-3 relative")
    p.add_argument("--profile", type=flags.repeat, metavar="RUNS",
                   help="--target c: time each kernel over RUNS more runs and show where the time goes")
    p.add_argument("--unchecked-indices", action="store_true",
                   help="drop the range check of gathered indices (only for indices known to be in range)")


#: kernels the --profile table lists (the rest are summed in one line)
PROFILE_ROWS = 15


def run(args) -> int:
    out = console(args)
    expected = None
    times = None
    if args.profile and args.target != "c":
        raise InputError(f"--profile times compiled C kernels: use it with --target c (not {args.target})")
    if args.output_dir:
        check_output_directory(args.output_dir)  # before the work, not after it
    with Stages(args) as stages:
        given = read_input_files(args.input)
        with stages.step("import"):
            # symbolic dims and inputs read as axes, pads, shape... take the --input arrays'
            graph, shaped, bound = load_graph_for_feeds(args.model, parse_shapes(args.input_shape), given)
        # before random inputs, the reference or a compile allocate them
        check_tensor_sizes(graph, random_inputs=args.random_inputs is not None)
        feeds = complete_feeds(graph, {n: a for n, a in given.items() if n not in bound}, args.random_inputs)
        started = time.perf_counter()
        compiled = None
        run_step = "run (reference interpreter)" if args.target == "reference" else f"run ({args.target})"
        if args.target == "reference":

            with stages.step(run_step):
                outputs = reference_run(graph, feeds)
        else:

            with stages.step("rewrite + partition"):
                plan = fuse(graph, args.rules, args.strategy, options=strategy_overrides(args), target=args.target)
            check_tensor_sizes(plan.graph)  # rewriting may have made new tensors
            with stages.step(f"codegen + compile ({args.target})"):
                options = {"threads": args.threads} if args.target == "c" else {"precision": args.precision}
                if args.profile:
                    options["profile"] = True
                compiled = compile_plan(plan, args.target, check_indices=not args.unchecked_indices, **options)
            with stages.step(run_step):
                outputs = compiled.run(feeds)
            if args.profile:
                with stages.step(f"profile ({args.profile} runs)"):
                    times = compiled.profile(feeds, runs=args.profile)
            if args.check:

                with stages.step("reference interpreter"):
                    expected = reference_run(graph, feeds)
        elapsed = time.perf_counter() - started
    stage_seconds = {IMPORT: stages.timings["import"], RUN: stages.timings[run_step]}
    if compiled is not None:
        stage_seconds.update(stage_times(plan.stats, compiled.stats))
    report = {"model": args.model, "target": args.target, "seconds": elapsed,
              **{seconds_key(stage): seconds for stage, seconds in stage_seconds.items()},
              "outputs": {k: list(v.shape) for k, v in outputs.items()}}
    if shaped or bound:
        report["specialized"] = {"shapes": sorted(shaped), "values": sorted(bound)}
    files = write_outputs(outputs, args.output_dir) if args.output_dir else {}
    if args.output_dir:
        report["files"] = {name: str(path) for name, path in files.items()}
        report["written"] = list(report["files"].values())
    problems = compare(outputs, expected, args.rtol, args.atol) if expected is not None else []
    report["check"] = "skipped" if expected is None else ("ok" if not problems else problems)
    report["timings"] = stages.timings
    if times is not None:
        report["profile"] = [t.to_dict() for t in times]
    if wants_json(args):
        print(json.dumps(report, indent=2))
    else:
        if shaped or bound:
            out.print("specialized on the --input files: " + "; ".join(
                f"{what} of {', '.join(sorted(names))}" for what, names in (("shapes", shaped), ("values", bound))
                if names))
        for name, value in outputs.items():
            out.print(f"{name}: {value.dtype}{list(value.shape)}  mean {float(np.mean(value)):.6g}")
        for name, path in files.items():
            # a file named otherwise than its output says whose it is
            out.print(f"wrote {path}" if path.name == f"{name}.npy" else f"wrote {path}  (output {name!r})")
        if expected is not None:
            out.print("check against the reference interpreter: " + ("ok" if not problems else "MISMATCH"))
        out.print(f"time ({args.target}): {stage_line(stage_seconds)}")
        if times is not None and compiled is not None:  # (times come from the compiled graph)
            for line in profile_table(times, compiled.graph, args.profile):
                out.print(line, markup=False, highlight=False)
    for problem in problems:
        print_line(f"fusionlang: mismatch: {problem}")
    return EXIT_MISMATCH if problems else EXIT_OK


def profile_table(times, graph, runs: int) -> list[str]:
    """Kernels by time, slowest first: ms per run, share, GFLOP/s of a conv or matmul,
    strategy (with a template's problem as a GEMM), what each computes."""
    total = sum(t.seconds for t in times)
    ranked = sorted(times, key=lambda t: -t.seconds)
    lines = [f"kernel time, mean of {runs} runs: {total * 1e3:.3f} ms in {len(times)} kernels",
             f"{'ms':>9} {'share':>6} {'GFLOP/s':>8}  {'strategy':<36} nodes"]
    for t in ranked[:PROFILE_ROWS]:
        nodes = ", ".join(f"{graph.node(n).op} {n}" for n in t.kernel.nodes[:4])
        more = f" (+{len(t.kernel.nodes) - 4})" if len(t.kernel.nodes) > 4 else ""
        rate = f"{t.kernel.flops / t.seconds * 1e-9:8.1f}" if t.kernel.flops and t.seconds > 0 else f"{'':8}"
        strategy = t.kernel.detail or t.kernel.strategy
        lines.append(f"{t.seconds * 1e3:9.3f} {t.share:6.1%} {rate}  {strategy[:36]:<36} {nodes}{more}")
    rest = ranked[PROFILE_ROWS:]
    if rest:
        lines.append(f"{sum(t.seconds for t in rest) * 1e3:9.3f} {sum(t.share for t in rest):6.1%} {'':8}  "
                     f"the other {len(rest)} kernels")
    return lines
