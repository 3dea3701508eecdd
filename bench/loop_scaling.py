"""Fuse time of an ONNX Loop unrolled at import, against its trip count M.

The model: a Loop of M iterations whose body is Add, Mul, Relu on a carried float
tensor of shape [4], with the carried value also a scan output (so the unrolled graph
ends in a concat of M pieces). The importer unrolls it to about 3*M + 2*M nodes; the
rewrite engine and the partitioner then see a long chain. Each run is a fresh
``fusionlang fuse MODEL --strategy S`` (and, with ``--check``, ``fusionlang run MODEL
--check``) process, timed by its process CPU time (from the rusage of the waited child)
and its wall time. Prints a table and writes bench/results/loop_scaling.json.

    python bench/loop_scaling.py [--trips 1000 5000 20000] [--strategies apollo tvm dp] [--check [--check-max M]]
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

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import _checkout  # noqa: F401  (first of ours: this checkout's root on sys.path)

ROOT = _checkout.ROOT
RESULTS = Path(__file__).resolve().parent / "results"
WIDTH = 4


def loop_model(trips: int) -> onnx.ModelProto:
    """x[4] -> Loop(M=trips){ acc = relu((acc + x) * 0.5); scan acc } -> (acc, stacked accs)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "x"], ["sum"]),
         helper.make_node("Mul", ["sum", "half"], ["scaled"]),
         helper.make_node("Relu", ["scaled"], ["acc_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["acc_out"], ["scan_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [WIDTH])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [WIDTH]),
         helper.make_tensor_value_info("scan_out", TensorProto.FLOAT, [WIDTH])])
    loop = helper.make_node("Loop", ["M", "cond", "acc0"], ["acc", "accs"], body=body)
    graph = helper.make_graph(
        [loop], f"loop_{trips}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [WIDTH]),
         helper.make_tensor_value_info("acc0", TensorProto.FLOAT, [WIDTH])],
        [helper.make_tensor_value_info("acc", TensorProto.FLOAT, [WIDTH]),
         helper.make_tensor_value_info("accs", TensorProto.FLOAT, [trips, WIDTH])],
        initializer=[numpy_helper.from_array(np.array(trips, np.int64), "M"),
                     numpy_helper.from_array(np.array(True), "cond"),
                     numpy_helper.from_array(np.array(0.5, np.float32), "half")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _rules_for(strategy: str) -> list[str]:
    """tvm's strategy reads categories only tvm's rule set declares."""
    return ["--rules", "tvm"] if strategy == "tvm" else []


def _timed_child(argv: list[str], timeout: float) -> dict:
    """Run ``argv``; its exit code, CPU seconds (user + system, its children included) and wall seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
        code, tail = done.returncode, (done.stdout + done.stderr).strip().splitlines()[-1:]
    except subprocess.TimeoutExpired:
        code, tail = None, [f"timed out after {timeout:.0f} s"]
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"exit": code, "cpu_s": round(cpu, 2), "wall_s": round(wall, 2), "last_line": tail[0] if tail else ""}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trips", type=int, nargs="+", default=[1000, 5000, 20000])
    parser.add_argument("--strategies", nargs="+", default=["apollo", "tvm", "dp"])
    parser.add_argument("--check", action="store_true", help="also time `run --check` (default strategy)")
    parser.add_argument("--check-max", type=int, default=2000, metavar="M",
                        help="run --check only up to this trip count (compiling is per kernel: minutes past it)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per command")
    parser.add_argument("--out", default=str(RESULTS / "loop_scaling.json"))
    args = parser.parse_args()
    cli = [sys.executable, "-m", "fusionlang"]
    rows = []
    print(f"{'M':>7} {'command':<22}{'exit':>5}{'cpu s':>9}{'wall s':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for trips in args.trips:
            path = Path(tmp) / f"loop_{trips}.onnx"
            onnx.save(loop_model(trips), path)
            commands = [(f"fuse --strategy {s}", ["fuse", str(path), "--strategy", s, *_rules_for(s)])
                        for s in args.strategies]
            if args.check and trips <= args.check_max:
                commands.append(("run --check", ["run", str(path), "--check", "--random-inputs", "0"]))
            for label, argv in commands:
                row = {"trips": trips, "command": label, **_timed_child(cli + argv, args.timeout)}
                rows.append(row)
                print(f"{trips:>7} {label:<22}{str(row['exit']):>5}{row['cpu_s']:>9.2f}{row['wall_s']:>9.2f}"
                      + ("" if row["exit"] == 0 else f"  {row['last_line']}"), flush=True)
    meta = {"python": platform.python_version(), "machine": platform.machine(), "date": time.strftime("%Y-%m-%d"),
            "cpus": os.cpu_count()}
    Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
