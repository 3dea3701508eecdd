"""A sweep from start to end: the zoo's builds (cached ones skipped) on an executor, the
rows, the measurements, the summary."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from fusionlang.executors import Done, run_all
from fusionlang.sweep.build import BuildJob, Policy, build
from fusionlang.sweep.cache import ResultCache, build_key, file_digest, rules_digest
from fusionlang.sweep.rows import make_row
from fusionlang.sweep.summary import summarize
from fusionlang.sweep.timing import TIMER_RESOURCE, MeasureJob, measure, measure_on_ray
from fusionlang.version import VERSION

#: which side of a row a policy is
SIDES = ("A", "B")


@dataclass(frozen=True)
class SweepSettings:
    """What a sweep builds (the models, policy ``a`` against baseline ``b``), where
    (``jobs``, ``ray``), and whether it times the compiled models and uses the cache."""

    models: tuple[str, ...]
    a: Policy
    b: Policy
    jobs: int | None = None
    #: None: the local pool; True: a local Ray cluster; a string: the address of one
    ray: str | bool | None = None
    measure: bool = False
    rounds: int = 5
    cache: bool = True


def run_sweep(settings: SweepSettings, progress: Callable[[str, int, int], None] | None = None) -> dict:
    """The sweep's document: settings, rows (one per model, in the zoo's order), summary,
    and ``builds`` (how many ran, how many came from the cache). ``progress(stage, done,
    total)`` is called as builds and measurements finish."""
    cache = ResultCache(settings.cache)
    jobs = {f"{side}:{model}": BuildJob(model, policy) for model in settings.models
            for side, policy in zip(SIDES, (settings.a, settings.b))}
    keys = _keys(jobs, settings)
    results: dict[str, dict] = {}
    for name in jobs:
        cached = cache.get(keys[name])
        if cached is not None:
            results[name] = cached
    todo = {name: job for name, job in jobs.items() if name not in results}
    started_ray = _connect(settings)
    if progress is not None and todo:
        progress("build", 0, len(todo))  # the bar shows from the start, not from the first finished build
    try:
        for name, outcome in run_all(build, todo, jobs=settings.jobs, ray=settings.ray,
                                     progress=_stage(progress, "build")).items():
            if isinstance(outcome, Done):
                results[name] = cast(dict, outcome.value)
                cache.put(keys[name], results[name])
            else:  # a crash or a lost worker: not cached, the next run tries again
                results[name] = {"error": outcome.error}
        rows = [make_row(model, results[f"A:{model}"], results[f"B:{model}"]) for model in settings.models]
        if settings.measure:
            _measure(rows, settings, progress)
    finally:
        if started_ray:
            import ray

            ray.shutdown()
    return {"version": VERSION, "settings": _settings_dict(settings), "rows": rows, "summary": summarize(rows),
            "builds": {"run": len(todo), "cached": len(jobs) - len(todo)},
            "cache": cache.problem or str(cache.directory)}


def _keys(jobs: dict[str, BuildJob], settings: SweepSettings) -> dict[str, str]:
    """Each build's cache key (rules read once per policy, models once each)."""
    rules = {policy: rules_digest(policy.rules) for policy in (settings.a, settings.b)}
    models = {model: file_digest(model) for model in settings.models}
    return {name: build_key(models[job.model], rules[job.policy], job.policy.strategy, job.policy.options)
            for name, job in jobs.items()}


def _connect(settings: SweepSettings) -> bool:
    """With --ray: one connection for the builds and the measurements (a local cluster
    offers the timer resource). True when this call opened it."""
    if not settings.ray:
        return False
    from fusionlang.executors.on_ray import connect, import_ray

    return connect(import_ray(), settings.jobs, settings.ray, resources={TIMER_RESOURCE: 1})


def _measure(rows: list[dict], settings: SweepSettings, progress) -> None:
    """Timings of the ok rows: on Ray in timer actors, locally here, one after the other
    (after every build: never beside one)."""
    jobs = {row["model"]: MeasureJob(BuildJob(row["model"], settings.a), BuildJob(row["model"], settings.b),
                                     settings.rounds) for row in rows if row["status"] == "ok"}
    if settings.ray:
        measured = measure_on_ray(jobs, _stage(progress, "measure"))
    else:
        measured = {key: outcome.value if isinstance(outcome, Done) else {"error": outcome.error}
                    for key, outcome in run_all(measure, jobs, jobs=1, progress=_stage(progress, "measure")).items()}
    for row in rows:
        if row["model"] in measured:
            row["measure"] = measured[row["model"]]


def _stage(progress, stage: str):
    return None if progress is None else (lambda done, total: progress(stage, done, total))


def _settings_dict(settings: SweepSettings) -> dict:
    def policy(p: Policy) -> dict:
        return {"rules": p.rules, "strategy": p.strategy, "options": {k: v for k, v in p.options}}

    return {"a": policy(settings.a), "b": policy(settings.b), "models": list(settings.models),
            "executor": "ray" if settings.ray else "local", "jobs": settings.jobs, "measure": settings.measure,
            "rounds": settings.rounds if settings.measure else None}
