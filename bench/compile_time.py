"""Compile time of the 9 light ONNX models, stage by stage: import -> plan -> compiled C.

Each model runs in a fresh Python process (so no verdict or schedule remembered in memory
from another model or an earlier run counts), twice:

* ``cold``: an empty C kernel cache (a new temporary ``$FUSIONLANG_CACHE_DIR``), so every
  kernel goes through the C compiler;
* ``warm``: the same cache again, now holding every kernel and library.

Stages: ``import`` (``fusionlang.from_onnx``), ``plan`` (``fusionlang.fuse(graph, "apollo")``
with the backend's feedback), ``compile`` (``fusionlang.compile(plan, "c")``). Each stage
reports process CPU time (this process plus the C compilers it waited for) with wall time
beside. Compiling a model costs seconds to a minute, so the default is one round per model
and cache state; ``--rounds N`` takes N, the checkouts interleaved round by round, and
reports medians (single rounds on this shared 2-core machine moved by up to 20%; CPU time
is what to compare).

Python's own bytecode is not what is measured: each checkout's ``fusionlang`` is byte-compiled
before the first run and the workers may read and write ``__pycache__`` (as an installed
package does; ``PYTHONDONTWRITEBYTECODE`` would make every worker compile the backend's
source again inside the ``plan`` stage).

``--baseline DIR`` times a second checkout (say ``git archive`` of an older commit) in the
same run, model by model interleaved with this one, and keeps its numbers as ``before``.
Prints a table and writes bench/results/compile_time.json.

    python bench/compile_time.py [--only resnet50,squeezenet] [--baseline /tmp/fusionlang-before] [--rounds 3]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _checkout  # noqa: F401  (first of ours: this checkout's root on sys.path)

HERE = Path(__file__).resolve()
RESULTS = HERE.parent / "results"
LIGHT_MODELS = ["resnet50", "densenet121", "inception_v1", "inception_v2", "shufflenet", "squeezenet", "vgg19",
                "zfnet512", "bvlc_alexnet"]
STAGES = ("import", "plan", "compile")


# ----- one model in its own process ------------------------------------------------------


def _cpu_seconds() -> float:
    """CPU time of this process and of the finished children it waited for (cc runs)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _timed(fn):
    cpu, wall = _cpu_seconds(), time.perf_counter()
    value = fn()
    return value, {"cpu_s": round(_cpu_seconds() - cpu, 3), "wall_s": round(time.perf_counter() - wall, 3)}


def worker(name: str, root: str) -> dict:
    """Time the three stages of ``name`` with the fusionlang found under ``root``."""
    sys.path.insert(0, root)
    import onnx

    import fusionlang

    assert Path(fusionlang.__file__).resolve().is_relative_to(Path(root).resolve()), fusionlang.__file__
    path = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"
    graph, t_import = _timed(lambda: fusionlang.from_onnx(str(path)))
    plan, t_plan = _timed(lambda: fusionlang.fuse(graph, "apollo"))
    compiled, t_compile = _timed(lambda: fusionlang.compile(plan, "c"))
    return {"import": t_import, "plan": t_plan, "compile": t_compile, "groups": len(plan.groups),
            "kernels": compiled.stats.kernels}


def run_model(name: str, root: Path, cache: Path) -> dict:
    env = dict(os.environ, FUSIONLANG_CACHE_DIR=str(cache))
    env.pop("PYTHONPATH", None)  # the worker puts ``root`` first itself
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode (module docstring)
    done = subprocess.run([sys.executable, str(HERE), "--worker", name, "--root", str(root)], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{name} under {root} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def measure(name: str, root: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="fusionlang-cache-") as cache:
        cold = run_model(name, root, Path(cache))
        warm = run_model(name, root, Path(cache))
    return {"cold": cold, "warm": warm}


def median_of(rounds: list[dict]) -> dict:
    """Per cache state and stage, the median CPU and wall seconds of the rounds (each taken
    on its own: a round's stages need not come from one run)."""
    out = {}
    for state in ("cold", "warm"):
        first = rounds[0][state]
        row = {key: value for key, value in first.items() if key not in STAGES}
        for stage in STAGES:
            row[stage] = {unit: round(statistics.median(r[state][stage][unit] for r in rounds), 3)
                          for unit in ("cpu_s", "wall_s")}
        out[state] = row
    return out


# ----- report ------------------------------------------------------------------------------


def total(row: dict, key: str) -> float:
    return sum(row[stage][key] for stage in STAGES)


def table(results: dict, before: dict | None) -> str:
    head = f"{'model':<14}{'cache':<6}" + "".join(f"{s + ' cpu/wall s':>22}" for s in STAGES) + f"{'total cpu/wall s':>22}"
    if before:
        head += f"{'before cpu s':>14}{'after/before':>14}"
    lines = [head, "-" * len(head)]
    for name, states in results.items():
        for state, row in states.items():
            cells = "".join(f"{row[s]['cpu_s']:>12.2f} /{row[s]['wall_s']:>7.2f}  " for s in STAGES)
            line = f"{name:<14}{state:<6}{cells}{total(row, 'cpu_s'):>12.2f} /{total(row, 'wall_s'):>7.2f}  "
            if before:
                old = total(before[name][state], "cpu_s")
                line += f"{old:>14.2f}{total(row, 'cpu_s') / old:>14.2f}"
            lines.append(line)
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated light model names")
    parser.add_argument("--baseline", help="another checkout to time in the same run (kept as 'before')")
    parser.add_argument("--rounds", type=int, default=1, help="rounds per model and checkout, interleaved; medians")
    parser.add_argument("--out", default=str(RESULTS / "compile_time.json"))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.root)))
        return 0
    names = args.only.split(",") if args.only else LIGHT_MODELS
    for root in [_checkout.ROOT, *([Path(args.baseline)] if args.baseline else [])]:
        compileall.compile_dir(str(Path(root) / "fusionlang"), quiet=1)
    results, before = {}, {} if args.baseline else None
    for name in names:
        after_rounds, before_rounds = [], []
        for _ in range(max(1, args.rounds)):
            if args.baseline:
                before_rounds.append(measure(name, Path(args.baseline)))
            after_rounds.append(measure(name, _checkout.ROOT))
        results[name] = median_of(after_rounds)
        if args.baseline:
            before[name] = median_of(before_rounds)
        print(f"{name}: done", file=sys.stderr, flush=True)
    print(table(results, before))
    out = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": platform.processor() or platform.machine(),
           "cpus": os.cpu_count(), "load_average": os.getloadavg(),
           "rounds": max(1, args.rounds),
           "note": "medians of the rounds per model, cache state and stage, the two checkouts interleaved; "
                   "cpu_s counts this process and the C compilers it ran; the machine is shared",
           "models": results}
    if before is not None:
        out["before"] = before
        out["baseline"] = str(args.baseline)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
