"""`fusionlang run MODEL`: run a model compiled (c, cuda) or with the reference interpreter,
or an artifact `fusionlang compile -o` saved (a directory), as it was compiled."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from fusionlang.backend.artifact import MANIFEST
from fusionlang.backend.artifact import load as load_artifact
from fusionlang.cli import flags
from fusionlang.cli.common import (Stages, add_build_arguments, add_model_arguments, compare, compile_graph,
                                   load_graph_for_feeds, parse_shapes)
from fusionlang.cli.modes import EXIT_MISMATCH, EXIT_OK, console, wants_json
from fusionlang.cli.feeds import complete_feeds, complete_inputs, read_input_files
from fusionlang.cli.outputs import write_outputs
from fusionlang.cli.paths import check_output_directory
from fusionlang.cli.text import print_line
from fusionlang.errors import InputError
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
    p.add_argument("--precision", choices=["fp32", "tf32"], default="fp32",
                   help="--target cuda: conv and matmul on tensor cores in three TF32 passes as accurate as fp32 "
                   "(default), or in one, faster, about 1e-3 relative")
    p.add_argument("--profile", type=flags.repeat, metavar="RUNS",
                   help="--target c: time each kernel over RUNS more runs and show where the time goes")
    add_build_arguments(p)


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
    artifact = (Path(args.model) / MANIFEST).is_file()  # `fusionlang compile -o` wrote it
    if artifact:
        refuse_model_flags(args)
    else:  # here: a model needs the compiler's libraries (2 s to import), an artifact none of them
        from fusionlang.ir.memory import check_tensor_sizes
        from fusionlang.reference import run as reference_run
    with Stages(args) as stages:
        given = read_input_files(args.input)
        shaped = bound = set()
        with stages.step("import"):
            if artifact:
                loaded = load_artifact(args.model)
            else:
                # symbolic dims and inputs read as axes, pads, shape... take the --input arrays'
                graph, shaped, bound = load_graph_for_feeds(args.model, parse_shapes(args.input_shape), given)
        if artifact:
            feeds = artifact_feeds(loaded, given, args.random_inputs)
        else:
            # before random inputs, the reference or a compile allocate them
            check_tensor_sizes(graph, random_inputs=args.random_inputs is not None)
            feeds = complete_feeds(graph, {n: a for n, a in given.items() if n not in bound}, args.random_inputs)
        started = time.perf_counter()
        compiled = None
        run_step = "run (reference interpreter)" if args.target == "reference" else f"run ({args.target})"
        if artifact:
            with stages.step(run_step):
                outputs = loaded.run(feeds)
        elif args.target == "reference":

            with stages.step(run_step):
                outputs = reference_run(graph, feeds)
        else:
            options = {} if args.target == "c" else {"precision": args.precision}
            if args.profile:
                options["profile"] = True
            plan, compiled = compile_graph(args, graph, stages, args.target, **options)
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
    report = {"model": args.model, "target": args.target, "artifact": artifact, "seconds": elapsed,
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


#: flags that say how to fuse, compile or check a model: an artifact was compiled already
#: (flag -> is it given?)
_MODEL_FLAGS = {"--rules": lambda a: a.rules is not None, "--target": lambda a: a.target != "c", "--check": lambda a: a.check,
                "--profile": lambda a: a.profile is not None, "--input-shape": lambda a: bool(a.input_shape),
                "--strategy": lambda a: a.strategy is not None, "--option": lambda a: bool(a.option),
                "--threads": lambda a: a.threads != 1, "--unchecked-indices": lambda a: a.unchecked_indices,
                "--precision": lambda a: a.precision != "fp32"}


def refuse_model_flags(args) -> None:
    """InputError for a flag that applies to a model, given with an artifact."""
    given = [flag for flag, is_given in _MODEL_FLAGS.items() if is_given(args)]
    if given:
        raise InputError(f"{args.model}: {given[0]} applies to a model, and this is an artifact, compiled "
                         f"already (pass it to `fusionlang compile`, or run the model)")


def artifact_feeds(loaded, given: dict, random_seed: int | None) -> dict:
    """The feeds of an artifact run: ``given`` and seeded noise, integers in the ranges
    `fusionlang compile` noted (read off the model), else in [0, 4)."""
    if all(name in given for name in loaded.inputs):
        return dict(given)
    from fusionlang.ir.types import TensorType  # here: only seeded noise needs the IR's types

    types = {i["name"]: TensorType(tuple(i["shape"]), i["dtype"]) for i in loaded.manifest["inputs"]}
    ranges = loaded.manifest.get("notes", {}).get("input_ranges", {})
    return complete_inputs(types, given, random_seed, lambda name: tuple(ranges.get(name, (0, 4))))


def profile_table(times, graph, runs: int) -> list[str]:
    """Kernels by time, slowest first: wall ms per run, share, process CPU ms per run,
    GFLOP/s of a conv or matmul (over wall time), strategy (with a template's problem as
    a GEMM), what each computes."""
    total = sum(t.seconds for t in times)
    ranked = sorted(times, key=lambda t: -t.seconds)
    lines = [f"kernel time, mean of {runs} runs: {total * 1e3:.3f} ms wall, "
             f"{sum(t.cpu_seconds for t in times) * 1e3:.3f} ms CPU in {len(times)} kernels",
             f"{'ms':>9} {'share':>6} {'cpu ms':>9} {'GFLOP/s':>8}  {'strategy':<36} nodes"]
    for t in ranked[:PROFILE_ROWS]:
        nodes = ", ".join(f"{graph.node(n).op} {n}" for n in t.kernel.nodes[:4])
        more = f" (+{len(t.kernel.nodes) - 4})" if len(t.kernel.nodes) > 4 else ""
        rate = f"{t.kernel.flops / t.seconds * 1e-9:8.1f}" if t.kernel.flops and t.seconds > 0 else f"{'':8}"
        strategy = t.kernel.detail or t.kernel.strategy
        lines.append(f"{t.seconds * 1e3:9.3f} {t.share:6.1%} {t.cpu_seconds * 1e3:9.3f} {rate}  {strategy[:36]:<36} "
                     f"{nodes}{more}")
    rest = ranked[PROFILE_ROWS:]
    if rest:
        lines.append(f"{sum(t.seconds for t in rest) * 1e3:9.3f} {sum(t.share for t in rest):6.1%} "
                     f"{sum(t.cpu_seconds for t in rest) * 1e3:9.3f} {'':8}  "
                     f"the other {len(rest)} kernels")
    return lines
