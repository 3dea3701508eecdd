"""One build of a sweep: a model fused and compiled with one policy, run on seeded inputs
and checked against the reference interpreter and onnxruntime. A module-level function
of picklable arguments: it runs in a pool's worker or a Ray task.

A failure the input causes (a broken model, a rule set that does not load) is part of
the result (``error``): it is deterministic, so it is cached like a success. Any other
exception, or the death of the worker, is the executor's Failed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from fusionlang.errors import FuseError

#: the seed of the inputs every build runs on (`run --random-inputs 0`)
INPUT_SEED = 0


@dataclass(frozen=True)
class Policy:
    """How a model is fused: a rule set (name or .fuse path), a strategy (None: the rule
    set's own) and strategy options (sorted (key, value) pairs, hashable)."""

    rules: str
    strategy: str | None = None
    options: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True)
class BuildJob:
    model: str
    policy: Policy


def build(job: BuildJob) -> dict:
    """The build's numbers (see :func:`_built`), or ``{"error": one line}`` when the
    model or the rules are bad input."""
    try:
        return _built(job)
    except FuseError as exc:
        return {"error": " ".join(str(exc).split())}


def _built(job: BuildJob) -> dict:
    from fusionlang.api import compile as compile_plan, from_onnx, fuse, load_rules
    from fusionlang.cli.paths import readable_file
    from fusionlang.ir.memory import check_tensor_sizes

    graph = from_onnx(readable_file(job.model, "model"))
    ruleset = load_rules(job.policy.rules)
    started = time.perf_counter()
    plan = fuse(graph, ruleset, job.policy.strategy, options=dict(job.policy.options) or None)
    fused = time.perf_counter()
    check_tensor_sizes(plan.graph, random_inputs=True)
    compiled = compile_plan(plan, "c")
    compiled_at = time.perf_counter()
    checks = check_outputs(job.model, graph, compiled)
    return {
        "kernels": len(plan.kernels),
        "launches": plan.launches,
        "bytes": plan.stats.bytes_after,
        "bytes_before": plan.stats.bytes_before,
        "rewrites": dict(sorted((plan.stats.rewrites or {}).items())),
        "groups": sorted(sorted(group.nodes) for group in plan.kernels),
        "fuse_seconds": fused - started,
        "compile_seconds": compiled_at - fused,
        **checks,
    }


def check_outputs(model: str, graph, compiled) -> dict:
    """The compiled model's outputs on seeded inputs against the reference interpreter's
    and onnxruntime's: "ok", "mismatch: ..." or, for onnxruntime, "skipped: ..."."""
    from fusionlang.cli.common import compare
    from fusionlang.cli.feeds import complete_feeds
    from fusionlang.reference import run as reference_run

    feeds = complete_feeds(graph, {}, INPUT_SEED)
    outputs = compiled.run(feeds)
    return {"check_reference": _verdict(compare(outputs, reference_run(graph, feeds), None, None)),
            "check_onnxruntime": _onnxruntime_verdict(model, feeds, outputs, compare)}


def _verdict(problems: list[str]) -> str:
    if not problems:
        return "ok"
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"mismatch: {problems[0]}{more}"


def _onnxruntime_verdict(model: str, feeds: dict, outputs: dict, compare) -> str:
    try:
        import onnxruntime
    except ImportError:
        return "skipped: onnxruntime is not installed"
    try:
        quiet = onnxruntime.SessionOptions()
        quiet.log_severity_level = 3  # its warnings (unused initializers) are not the sweep's output
        session = onnxruntime.InferenceSession(model, quiet, providers=["CPUExecutionProvider"])
        wanted = {i.name: feeds[i.name] for i in session.get_inputs() if i.name in feeds}
        names = [o.name for o in session.get_outputs()]
        expected = dict(zip(names, session.run(names, wanted)))
    except Exception as exc:  # onnxruntime refuses some valid models: a note, not a failed row
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"skipped: onnxruntime cannot run it: {type(exc).__name__}: {first}"[:300]
    return _verdict(compare(outputs, {n: expected[n] for n in outputs if n in expected}, None, None))
