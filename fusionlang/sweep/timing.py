"""Run time of A against B: both compiled in one process, run in interleaved rounds (A
then B, then B then A, ...) so that drift in the machine's speed (a neighbour, a clock)
falls on both alike; CPU and wall seconds, the median per policy, and the ratio A/B.

Measurements must not share a machine with anything else: locally they run after every
build, one at a time; on Ray each runs in an actor holding the custom resource
``fusionlang_timer``, of which every node has one.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from fusionlang.sweep.build import INPUT_SEED, BuildJob

#: the Ray resource a measurement holds: one per node, so two never share a node
TIMER_RESOURCE = "fusionlang_timer"


@dataclass(frozen=True)
class MeasureJob:
    a: BuildJob
    b: BuildJob
    rounds: int


def measure(job: MeasureJob) -> dict:
    from fusionlang.cli.feeds import complete_feeds

    graph, compiled_a = _compiled(job.a)
    _, compiled_b = _compiled(job.b)
    feeds = complete_feeds(graph, {}, INPUT_SEED)
    times: dict[str, list[tuple[float, float]]] = {"a": [], "b": []}
    for side, compiled in (("a", compiled_a), ("b", compiled_b)):
        compiled.run(feeds)  # warm: first-touch page faults, caches
    for round_ in range(job.rounds):
        order = (("a", compiled_a), ("b", compiled_b))
        for side, compiled in order if round_ % 2 == 0 else order[::-1]:
            cpu, wall = time.process_time(), time.perf_counter()
            compiled.run(feeds)
            times[side].append((time.process_time() - cpu, time.perf_counter() - wall))
    result: dict = {"rounds": job.rounds}
    for side in ("a", "b"):
        result[f"{side}_cpu_seconds"] = statistics.median(t[0] for t in times[side])
        result[f"{side}_wall_seconds"] = statistics.median(t[1] for t in times[side])
    for kind in ("cpu", "wall"):
        b = result[f"b_{kind}_seconds"]
        result[f"{kind}_ratio"] = result[f"a_{kind}_seconds"] / b if b > 0 else None
    return result


def _compiled(job: BuildJob):
    from fusionlang.api import compile as compile_plan, from_onnx, fuse

    graph = from_onnx(job.model)
    plan = fuse(graph, job.policy.rules, job.policy.strategy, options=dict(job.policy.options) or None)
    return graph, compile_plan(plan, "c")


class Timer:
    """The Ray actor that measures: created holding :data:`TIMER_RESOURCE`."""

    def measure(self, job: MeasureJob) -> dict:
        return measure(job)


def measure_on_ray(jobs: dict[str, MeasureJob], progress=None) -> dict:
    """key -> measurement (or ``{"error": ...}``), on as many Timer actors as the cluster
    has nodes with the timer resource, each fed one job at a time."""
    from fusionlang.executors.on_ray import import_ray
    from fusionlang.executors.outcomes import one_line

    ray = import_ray()
    count = int(ray.cluster_resources().get(TIMER_RESOURCE, 0))
    if count < 1:
        return {key: {"error": f"no node of the cluster offers the {TIMER_RESOURCE!r} resource "
                               f"(start each node with --resources='{{\"{TIMER_RESOURCE}\": 1}}')"} for key in jobs}
    actor = ray.remote(num_cpus=1, resources={TIMER_RESOURCE: 1})(Timer)
    timers = [actor.remote() for _ in range(min(count, len(jobs)))]
    waiting, results = list(jobs), {}
    running: dict = {}  # Ray object ref -> (job key, index of the timer running it)
    try:
        while waiting or running:
            busy = {index for _, index in running.values()}
            for index, timer in enumerate(timers):
                if waiting and index not in busy:
                    key = waiting.pop(0)
                    running[timer.measure.remote(jobs[key])] = (key, index)
            ready, _ = ray.wait(list(running), num_returns=1)
            key, _ = running.pop(ready[0])
            try:
                results[key] = ray.get(ready[0])
            except ray.exceptions.RayError as exc:
                results[key] = {"error": one_line(getattr(exc, "cause", None) or exc)}
            if progress is not None:
                progress(len(results), len(jobs))
    finally:
        for timer in timers:
            ray.kill(timer)
    return results
