"""Partition time against graph size (synthetic graphs of 5k to 40k ops).

The graphs repeat a transformer-like block (layer norm written as primitive ops, matmul,
bias, softmax chain, GELU as an erf formula, residual) with a side branch every few
blocks, so every strategy sees reductions, broadcasts, complex ops and joins.
Prints a table and writes bench/results/partition_speed.json.

    python bench/partition_speed.py [--sizes 5000 10000 20000 40000] [--strategies apollo dp tvm]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

import _checkout  # noqa: F401  (first: this checkout's fusionlang, not an installed copy)
from fusionlang.engine import partition
from fusionlang.lang import load_rules
from fusionlang.ops import GraphBuilder

ROWS, HIDDEN = 32, 64


def block(b: GraphBuilder, x: str, weight: str, bias: str) -> str:
    mean = b.reduce_mean(x, axes=(1,))
    centered = b.sub(x, mean)
    var = b.reduce_mean(b.mul(centered, centered), axes=(1,))
    normed = b.div(centered, b.sqrt(b.add(var, bias)))
    h = b.add(b.matmul(normed, weight), bias)
    m = b.reduce_max(h, axes=(1,))
    e = b.exp(b.sub(h, m))
    soft = b.div(e, b.reduce_sum(e, axes=(1,)))
    gelu = b.mul(b.mul(soft, b.add(b.erf(b.mul(soft, bias)), bias)), bias)
    return b.add(x, gelu)


def synthetic(n_ops: int):
    b = GraphBuilder(f"synthetic_{n_ops}")
    x = b.input("x", (ROWS, HIDDEN))
    weight = b.constant(np.zeros((HIDDEN, HIDDEN), np.float32), name="w")
    bias = b.constant(np.full((1, HIDDEN), 0.5, np.float32), name="b")
    side = x
    k = 0
    while len(b.graph.nodes) < n_ops:
        x = block(b, x, weight, bias)
        k += 1
        if k % 4 == 0:  # a join with an older value, as residual streams do
            x = b.add(x, b.relu(side))
            side = x
    b.output(x)
    return b.build(verify=False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 10000, 20000, 40000])
    parser.add_argument("--strategies", nargs="+", default=["apollo", "dp", "tvm"])
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "partition_speed.json"))
    args = parser.parse_args()
    rules = {name: load_rules("tvm" if name == "tvm" else "apollo") for name in args.strategies}
    rows = []
    print(f"{'strategy':<9}{'ops':>8}{'groups':>8}{'seconds':>9}{'us/op':>8}")
    for size in args.sizes:
        graph = synthetic(size)
        for name in args.strategies:
            started = time.perf_counter()
            plan = partition(graph, rules[name], name)
            elapsed = time.perf_counter() - started
            rows.append({"strategy": name, "ops": len(graph.nodes), "groups": len(plan.groups),
                         "kernels": plan.launches, "seconds": elapsed})
            print(f"{name:<9}{len(graph.nodes):>8}{len(plan.groups):>8}{elapsed:>9.2f}"
                  f"{1e6 * elapsed / len(graph.nodes):>8.1f}")
    meta = {"python": platform.python_version(), "machine": platform.machine(), "date": time.strftime("%Y-%m-%d")}
    Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
