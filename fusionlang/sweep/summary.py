"""The sweep's summary: counts, and geomeans of A/B over the models both built."""

from __future__ import annotations

import math

#: (summary key, how to read A/B off an ok row): kernels, bytes, build times, run times
RATIOS = {
    "kernels": lambda row: (row["a"]["kernels"], row["b"]["kernels"]),
    "bytes": lambda row: (row["a"]["bytes"], row["b"]["bytes"]),
    "fuse_seconds": lambda row: (row["a"]["fuse_seconds"], row["b"]["fuse_seconds"]),
    "compile_seconds": lambda row: (row["a"]["compile_seconds"], row["b"]["compile_seconds"]),
    "run_cpu": lambda row: (row["measure"]["a_cpu_seconds"], row["measure"]["b_cpu_seconds"])
    if row.get("measure") else (None, None),
    "run_wall": lambda row: (row["measure"]["a_wall_seconds"], row["measure"]["b_wall_seconds"])
    if row.get("measure") else (None, None),
}


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summarize(rows: list[dict]) -> dict:
    """Counts of rows, failed rows and rows whose checks failed, and for each ratio the
    geomean of A/B over the ok rows where both are positive (with how many there were)."""
    ok = [row for row in rows if row["status"] == "ok"]
    summary: dict = {"models": len(rows), "ok": len(ok), "failed": len(rows) - len(ok),
                     "check_failures": sum(1 for row in ok if not row["checks_ok"]),
                     "groups_differ": sum(row["groups_differ"] for row in ok), "geomean_a_over_b": {}}
    for name, pair in RATIOS.items():
        ratios = [a / b for a, b in map(pair, ok) if a and b and a > 0 and b > 0]
        if ratios:
            summary["geomean_a_over_b"][name] = {"value": geomean(ratios), "models": len(ratios)}
    return summary
