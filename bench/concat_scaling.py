"""Cost of a Concat of N inputs as N grows: import -> fuse -> codegen -> C compile -> run.

The models are ONNX Concat(axis=1) of N Relu(x_i), each x_i f32[1,4], and Concat(axis=1) of
one input x f32[1,4] named N times (issue 38: "a Concat of 5,000 inputs (a 15 KB model)
takes 7.8 GB and exits 3 in isl"). Each N runs in a fresh Python process with
an empty C kernel cache (a new temporary ``$FUSIONLANG_CACHE_DIR``), as ``fusionlang run
MODEL --check`` does it: ``from_onnx``, ``fuse(graph, "apollo")`` with the backend's
feedback, ``compile(plan, "c")`` (split by the compiled graph's own stats into codegen, all
but the C compiler, and compile, the C compiler), one run, and the reference interpreter's
answer, which the outputs must equal bit for bit.

Per stage: process CPU time (this process plus the C compilers it waited for) and wall
time; per N: the worker's peak RSS (``ru_maxrss``), the groups and kernels of the plan, the
widest concat left in the plan's graph and the most statements of one group's polyhedral
program (the size of the largest isl problem). Prints a table and writes
bench/results/concat_scaling.json.

    python bench/concat_scaling.py [--sizes 300,1000,3000,5000] [--models relu,repeat]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _checkout  # noqa: F401  (first of ours: this checkout's root on sys.path)
from compile_time import _timed  # process CPU (the C compilers included) and wall seconds of a call

HERE = Path(__file__).resolve()
RESULTS = HERE.parent / "results"
SIZES = (300, 1000, 3000, 5000)
STAGES = ("import", "fuse", "codegen", "compile", "run", "reference")


def concat_model(n: int, path: Path, kind: str = "relu") -> Path:
    """ONNX Concat(axis=1) of ``n`` Relu(x_i), x_i f32[1,4] (``kind`` "relu"), or of one
    input x f32[1,4] named ``n`` times ("repeat": the report's 15 KB model); one output
    f32[1,4n]."""
    import onnx
    from onnx import TensorProto, helper

    if kind == "repeat":
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])]
        nodes = [helper.make_node("Concat", ["x"] * n, ["y"], name="concat", axis=1)]
    else:
        inputs = [helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [1, 4]) for i in range(n)]
        nodes = [helper.make_node("Relu", [f"x{i}"], [f"r{i}"], name=f"relu{i}") for i in range(n)]
        nodes.append(helper.make_node("Concat", [f"r{i}" for i in range(n)], ["y"], name="concat", axis=1))
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4 * n])
    graph = helper.make_graph(nodes, f"concat{n}", inputs, [output])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


# ----- one size in its own process ---------------------------------------------------------


def _cpu(who) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _compiled_in_two(fusionlang, plan):
    """compile(plan, "c") timed as codegen (this process's CPU; the wall time but the C
    compiler's) and compile (the C compilers' CPU, children waited for; their wall time as
    the compiled graph measured it)."""
    own, children, wall = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
    compiled = fusionlang.compile(plan, "c")
    wall = time.perf_counter() - wall
    compiler_wall = compiled.stats.compile_seconds
    codegen = {"cpu_s": round(_cpu(resource.RUSAGE_SELF) - own, 3), "wall_s": round(wall - compiler_wall, 3)}
    compiler = {"cpu_s": round(_cpu(resource.RUSAGE_CHILDREN) - children, 3), "wall_s": round(compiler_wall, 3)}
    return compiled, codegen, compiler


def _largest_program(plan) -> int:
    """The most statements of one kernel group's polyhedral program (one isl problem)."""
    from fusionlang.backend.poly import build_program

    return max(len(build_program(plan.graph, group.nodes).stmts) for group in plan.kernels)


def worker(n: int, kind: str) -> dict:
    import numpy as np

    import fusionlang
    from fusionlang.reference import run as reference_run

    assert Path(fusionlang.__file__).resolve().is_relative_to(_checkout.ROOT), fusionlang.__file__
    with tempfile.TemporaryDirectory(prefix="concat-model-") as folder:
        path = concat_model(n, Path(folder) / f"concat{n}.onnx", kind)
        graph, t_import = _timed(lambda: fusionlang.from_onnx(str(path)))
    feeds = {name: np.random.default_rng(k).standard_normal((1, 4)).astype(np.float32)
             for k, name in enumerate(graph.inputs)}
    plan, t_fuse = _timed(lambda: fusionlang.fuse(graph, "apollo"))
    compiled, t_codegen, t_compile = _compiled_in_two(fusionlang, plan)
    outputs, t_run = _timed(lambda: compiled.run(feeds))
    expected, t_reference = _timed(lambda: reference_run(graph, feeds))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    widest = max(len(node.inputs) for node in plan.graph.nodes if node.op == "concat")
    return {"model": kind, "n": n, "import": t_import, "fuse": t_fuse, "codegen": t_codegen, "compile": t_compile,
            "run": t_run, "reference": t_reference, "peak_rss_bytes": peak,
            "bit_identical": all(np.array_equal(outputs[k], expected[k]) for k in expected),
            "groups": len(plan.groups), "kernels": compiled.stats.kernels,
            "concats_in_place": compiled.stats.concats_in_place, "widest_concat": widest,
            "largest_isl_statements": _largest_program(plan)}


def measure(n: int, kind: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="fusionlang-cache-") as cache:
        env = dict(os.environ, FUSIONLANG_CACHE_DIR=cache)
        env.pop("PYTHONPATH", None)  # the worker finds this checkout through _checkout
        done = subprocess.run([sys.executable, str(HERE), "--worker", str(n), "--model", kind], env=env, capture_output=True,
                              text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{kind} N={n} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


# ----- report ------------------------------------------------------------------------------


def total(row: dict, unit: str) -> float:
    return sum(row[stage][unit] for stage in STAGES)


def table(rows: list[dict]) -> str:
    head = (f"{'model':<8}{'N':>6}" + "".join(f"{s + ' cpu/wall s':>22}" for s in STAGES) + f"{'total cpu/wall s':>22}"
            f"{'peak MB':>9}{'groups':>8}{'widest':>8}{'isl stmts':>10}{'exact':>7}")
    lines = [head, "-" * len(head)]
    for row in rows:
        cells = "".join(f"{row[s]['cpu_s']:>12.2f} /{row[s]['wall_s']:>7.2f}  " for s in STAGES)
        lines.append(f"{row['model']:<8}{row['n']:>6}{cells}{total(row, 'cpu_s'):>12.2f} /{total(row, 'wall_s'):>7.2f}  "
                     f"{row['peak_rss_bytes'] / 1e6:>9.0f}{row['groups']:>8}{row['widest_concat']:>8}"
                     f"{row['largest_isl_statements']:>10}{'yes' if row['bit_identical'] else 'NO':>7}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma-separated input counts")
    parser.add_argument("--models", default="relu,repeat",
                        help="relu: Concat of N Relu(x_i); repeat: Concat of one input N times")
    parser.add_argument("--model", default="relu", help=argparse.SUPPRESS)  # the worker's
    parser.add_argument("--out", default=str(RESULTS / "concat_scaling.json"))
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.model)))
        return 0
    rows = []
    for kind in args.models.split(","):
        for n in (int(s) for s in args.sizes.split(",")):
            rows.append(measure(n, kind))
            print(f"{kind} N={n}: done", file=sys.stderr, flush=True)
    print(table(rows))
    out = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": platform.processor() or platform.machine(),
           "cpus": os.cpu_count(), "load_average": os.getloadavg(),
           "note": "one fresh process per N, empty kernel cache; cpu_s counts this process and the C compilers "
                   "it ran; peak_rss_bytes is the worker's ru_maxrss; the machine is shared",
           "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    return 0 if all(row["bit_identical"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
