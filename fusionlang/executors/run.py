"""run_all: the one entry point, which picks the executor."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from fusionlang.executors.outcomes import Done, Failed
from fusionlang.executors.pool import run_on_pool
from fusionlang.executors.serial import run_serially


def run_all(fn, items: Mapping[str, object], *, jobs: int | None = None, ray: str | bool | None = None,
            retries: int = 1, progress: Callable[[int, int], None] | None = None) -> dict[str, Done | Failed]:
    """``fn(item)`` for every item of ``items`` (key -> argument): each key's Done or Failed.

    ``fn`` must be a module-level function and the items picklable (they travel to
    worker processes). ``jobs``: worker processes (default: the cores); 1 runs every job
    here, serially. ``ray``: True starts a local Ray cluster of ``jobs`` CPUs, a string
    joins the cluster at that address. ``retries``: how many times a job whose worker
    died is run again before it fails (an exception is never retried). ``progress(done,
    total)`` is called as jobs finish.
    """
    if jobs is not None and jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    if retries < 0:
        raise ValueError(f"retries must be at least 0, got {retries}")
    if ray:
        from fusionlang.executors.on_ray import run_on_ray

        return run_on_ray(fn, items, cpus=jobs, address=ray, retries=retries, progress=progress)
    if not items:
        return {}
    jobs = jobs or os.cpu_count() or 1
    if jobs == 1:
        return run_serially(fn, items, progress)
    return run_on_pool(fn, items, jobs, retries, progress)
