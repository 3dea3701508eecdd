"""A sweep's row: one model's two builds side by side (A the policy, B the baseline)."""

from __future__ import annotations

from pathlib import Path

#: the per-policy numbers a row shows (groups stay out: they only serve the diff)
SHOWN = ("kernels", "launches", "bytes", "bytes_before", "rewrites", "fuse_seconds", "compile_seconds",
         "check_reference", "check_onnxruntime")


def make_row(model: str, a: dict, b: dict) -> dict:
    """The row of ``model`` from its builds ``a`` and ``b``: each a build's result, or
    ``{"error": ...}``. A row fails when either build failed, with that error."""
    row: dict = {"model": model, "name": Path(model).stem}
    errors = {side: build["error"] for side, build in (("A", a), ("B", b)) if "error" in build}
    if errors:
        if len(errors) == 2 and errors["A"] == errors["B"]:  # the model's fault, not a policy's: say it once
            return row | {"status": "failed", "error": errors["A"]}
        return row | {"status": "failed", "error": "; ".join(f"{side}: {e}" for side, e in errors.items())}
    groups_a = {tuple(g) for g in a["groups"]}
    groups_b = {tuple(g) for g in b["groups"]}
    return row | {"status": "ok", "a": {k: a.get(k) for k in SHOWN}, "b": {k: b.get(k) for k in SHOWN},
                  "groups_differ": len(groups_a ^ groups_b),
                  "checks_ok": all(side[k] in ("ok",) or side[k].startswith("skipped")
                                   for side in (a, b) for k in ("check_reference", "check_onnxruntime"))}


#: row keys that hold times, which differ from run to run (and between executors)
TIMING_KEYS = ("fuse_seconds", "compile_seconds")


def without_timings(row: dict) -> dict:
    """``row`` less everything measured in seconds: what two executors must agree on."""
    out = {k: v for k, v in row.items() if k != "measure"}
    for side in ("a", "b"):
        if side in out:
            out[side] = {k: v for k, v in out[side].items() if k not in TIMING_KEYS}
    return out
