"""Threads on a busy machine: a model at threads=1 and at threads=2 (every core of the
2-core machine) while other processes each hold a core, wall-time medians.

libgomp's default wait spins an idle thread before it sleeps; with a core taken by another
process the spinning thread takes the time slice the working one needs (issue 35:
ResNet-18 4 to 17x slower at threads=2 than at one thread). fusionlang's OpenMP libraries
now carry their own pool (``backend/thread_pool.py``: a region's members are claimed, so a
late worker costs nothing, and a wait spins for a budget that halves when spins run out,
then sleeps). The JSON records ``OMP_WAIT_POLICY`` (null when unset; it matters only to
builds that use libgomp) and the machine's load average: other users' processes count as
busy ones too. Writes bench/results/threads_busy.json.

    python bench/threads_busy.py [--models resnet50,bert_layer] [--busy 1] [--rounds 9]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import _checkout  # noqa: F401  (first of ours: this checkout's fusionlang)
import fusionlang
import model_runtime

RESULTS = Path(__file__).resolve().parent / "results"


def _model(name: str):
    return model_runtime.light_model(name) if name in model_runtime.LIGHT_MODELS else model_runtime.BUILT[name]()


def measure(name: str, rounds: int) -> dict:
    model = _model(name)
    graph = fusionlang.from_onnx(model)
    feeds = model_runtime.feeds_for(model, graph)
    plan = fusionlang.fuse(graph, "apollo")
    fns = {f"threads={n}": (lambda c=fusionlang.compile(plan, "c", threads=n): c.run(feeds)) for n in (1, 2)}
    timing, _ = model_runtime.interleaved(fns, rounds)
    wall = {key: t["wall_ms"] for key, t in timing.items()}
    return {"workload": name, "wall_ms": wall, "two_over_one": wall["threads=2"] / wall["threads=1"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50,bert_layer")
    parser.add_argument("--busy", type=int, default=1, help="processes that each spin on a core")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args(argv)
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        rows = []
        for name in args.models.split(","):
            print(f"... {name}", file=sys.stderr, flush=True)
            rows.append(measure(name, args.rounds))
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    result = {"date": time.strftime("%Y-%m-%d"), "machine": platform.processor() or platform.machine(),
              "cores": os.cpu_count(), "busy_processes": args.busy, "rounds": args.rounds,
              "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"), "load_average": os.getloadavg(), "rows": rows}
    for r in rows:
        print(f"{r['workload']:12} threads=1 {r['wall_ms']['threads=1']:8.1f} ms  threads=2 "
              f"{r['wall_ms']['threads=2']:8.1f} ms  (2 / 1: {r['two_over_one']:.2f})")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "threads_busy.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
