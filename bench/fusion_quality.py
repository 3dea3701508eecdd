"""Fusion quality on the light ONNX models: kernels and global-memory bytes before and
after fusion, fusion time (rewrite + partition), for each strategy, against ONNX Runtime (measured live) and
TVM Relax 0.27 FuseOps (measured by bench/tvm_relax_counts.py, read from
bench/results/tvm_relax_counts.json).

Kernels count launches: views (reshape of contiguous data, identity) and constants
folded at compile time do not count, for fusionlang and for the peers alike.

    python bench/fusion_quality.py [--models resnet50 ...] [--no-feedback]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import _checkout  # noqa: F401  (first: this checkout's fusionlang, not an installed copy)
import fusionlang
from peers import LIGHT_MODELS, light_model_path, ort_kernels, tvm_kernels

STRATEGIES = {"apollo": "apollo", "dp": "apollo", "tvm": "tvm"}  # strategy -> rule set


def measure(name: str, rules: dict, feedback: bool) -> dict:
    graph = fusionlang.from_onnx(light_model_path(name))
    row = {"model": name, "ops_imported": len(graph.nodes)}
    for strategy, ruleset in STRATEGIES.items():
        plan = fusionlang.fuse(graph, rules[ruleset], strategy, feedback=feedback)
        stats = plan.stats
        row[strategy] = {
            "kernels_before": stats.kernels_before,
            "kernels_after": stats.kernels_after,
            "bytes_before": stats.bytes_before,
            "bytes_after": stats.bytes_after,
            "fusion_seconds": stats.rewrite_seconds + stats.partition_seconds,
            "groups": len(plan.groups),
            "backend_refusals": len(stats.feedback or []),
        }
    row["ort"] = ort_kernels(light_model_path(name))
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", nargs="+", default=LIGHT_MODELS)
    parser.add_argument("--no-feedback", action="store_true", help="do not ask the backend to vet groups")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "fusion_quality.json"))
    args = parser.parse_args()
    rules = {name: fusionlang.load_rules(name) for name in set(STRATEGIES.values())}
    tvm = tvm_kernels()
    rows = []
    header = (f"{'model':<14}{'before':>7}{'apollo':>7}{'dp':>5}{'tvm*':>6}{'TVM':>6}{'ORT':>6}{'best peer':>10}"
              f"{'MiB before':>11}{'MiB after':>10}{'fusion s':>10}")
    print(header)
    totals = {"apollo": 0, "peer": 0}
    for name in args.models:
        row = measure(name, rules, not args.no_feedback)
        row["tvm_relax"] = tvm.get(name)
        peers = [v for v in (row["tvm_relax"], row["ort"]["best"]) if v is not None]
        row["best_peer"] = min(peers)
        rows.append(row)
        a = row["apollo"]
        totals["apollo"] += a["kernels_after"]
        totals["peer"] += row["best_peer"]
        print(f"{name:<14}{a['kernels_before']:>7}{a['kernels_after']:>7}{row['dp']['kernels_after']:>5}"
              f"{row['tvm']['kernels_after']:>6}{row['tvm_relax'] if row['tvm_relax'] is not None else '-':>6}"
              f"{row['ort']['best']:>6}{row['best_peer']:>10}{a['bytes_before'] / 2**20:>11.1f}"
              f"{a['bytes_after'] / 2**20:>10.1f}{a['fusion_seconds']:>10.2f}")
    print(f"{'total':<14}{'':>7}{totals['apollo']:>7}{'':>5}{'':>6}{'':>6}{'':>6}{totals['peer']:>10}")
    print("tvm* = fusionlang's tvm strategy with rules/tvm.fuse; TVM = TVM Relax 0.27 FuseOps (recorded)")
    meta = {"python": platform.python_version(), "machine": platform.machine(), "date": time.strftime("%Y-%m-%d"),
            "feedback": not args.no_feedback}
    Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows, "totals": totals}, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
