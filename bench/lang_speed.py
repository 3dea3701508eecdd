"""How long parsing and checking the standard rule library takes.

Measures, per standard rule file, parsing alone and loading (parse + imports + checks)
with empty caches, then the whole library: every standard rule set loaded with empty
caches (each file parsed once, each rule set checked), in this process (best of N) and
in a fresh Python process (its first load: grammar tables from lark's cache, nothing
warm). The target is under 200 ms for the whole library. Prints a table and writes
bench/results/lang_speed.json.

    python bench/lang_speed.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import _checkout  # noqa: F401  (first: this checkout's fusionlang, not an installed copy)
from fusionlang.lang import clear_caches, load_rules, standard_names
from fusionlang.lang.diagnostics import Diagnostics
from fusionlang.lang.loader import resolve
from fusionlang.lang.parser import _parser, parse_module

TARGET_S = 0.200
FRESH_PROCESS = """
import time
import fusionlang.lang as L
start = time.perf_counter()
for name in L.standard_names():
    L.load_rules(name)
print(time.perf_counter() - start)
"""


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        clear_caches()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    names = standard_names()
    _parser()  # grammar tables: built once per process (lark caches them on disk)

    rows = []
    for name in names:
        path = resolve(name)
        text = Path(path).read_text()
        parse_s = best(lambda: parse_module(text, name, Diagnostics()), args.repeat)
        load_s = best(lambda: load_rules(name), args.repeat)
        rules = load_rules(name)
        rows.append({"file": f"{name}.fuse", "lines": len(text.splitlines()), "parse_ms": parse_s * 1e3,
                     "load_ms": load_s * 1e3, "imports": len(rules.files) - 1, "rewrites": len(rules.rewrites),
                     "decompositions": sum(len(c) for c in rules.decompositions.values()),
                     "tests": len(rules.tests)})

    whole = [best(lambda: [load_rules(n) for n in names], 1) for _ in range(args.repeat)]
    fresh = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", FRESH_PROCESS], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONWARNINGS": "ignore"})
        fresh.append(float(out.stdout.strip().splitlines()[-1]))

    print(f"{'file':<22} {'lines':>5} {'parse ms':>9} {'load ms':>8} {'imports':>7} {'rewrites':>8} "
          f"{'decomp':>6} {'tests':>5}")
    for r in rows:
        print(f"{r['file']:<22} {r['lines']:>5} {r['parse_ms']:>9.1f} {r['load_ms']:>8.1f} {r['imports']:>7} "
              f"{r['rewrites']:>8} {r['decompositions']:>6} {r['tests']:>5}")
    whole_ms = min(whole) * 1e3
    fresh_ms = min(fresh) * 1e3
    print(f"\nwhole library, every rule set loaded from empty caches: best {whole_ms:.1f} ms, "
          f"median {statistics.median(whole) * 1e3:.1f} ms (in process, {args.repeat} runs)")
    print(f"whole library in a fresh process (first load): best {fresh_ms:.1f} ms, "
          f"median {statistics.median(fresh) * 1e3:.1f} ms")
    verdict = "meets" if max(min(whole), min(fresh)) < TARGET_S else "MISSES"
    print(f"target {TARGET_S * 1e3:.0f} ms: {verdict}")

    result = {
        "benchmark": "lang_speed",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "files": rows,
        "whole_library_ms": {"best": whole_ms, "median": statistics.median(whole) * 1e3, "runs": len(whole)},
        "fresh_process_ms": {"best": fresh_ms, "median": statistics.median(fresh) * 1e3, "runs": len(fresh)},
        "target_ms": TARGET_S * 1e3,
    }
    out = Path(__file__).parent / "results" / "lang_speed.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
