"""Jobs as Ray tasks, one per item, on a local cluster this run starts or on one it joins.

Ray is an optional extra and is imported here only, when ``--ray`` asks for it. Ray runs
a task again when its worker dies (``max_retries``), never when the task raises: the
same contract as the local pool. Results come back as :class:`Done` / :class:`Failed`,
the errors on one line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping

from fusionlang.executors.outcomes import Done, ExecutorUnavailable, Failed, one_line

RAY_MISSING = "--ray needs `pip install 'fusionlang[ray]'`"


def import_ray():
    """The ray module, or ExecutorUnavailable saying how to install it."""
    try:
        import ray
    except ModuleNotFoundError as exc:
        if exc.name != "ray":
            raise
        raise ExecutorUnavailable(RAY_MISSING) from None
    return ray


def _call(fn, item):
    return fn(item)


def run_on_ray(fn, items: Mapping[str, object], *, cpus: int | None, address: str | bool, retries: int,
               progress: Callable[[int, int], None] | None) -> dict:
    ray = import_ray()
    started = connect(ray, cpus, address)
    try:
        task = ray.remote(max_retries=retries)(_call)
        pending = {task.remote(fn, item): key for key, item in items.items()}
        results: dict[str, Done | Failed] = {}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            key = pending.pop(ready[0])
            results[key] = _outcome(ray, key, ready[0])
            if progress is not None:
                progress(len(results), len(items))
        return {key: results[key] for key in items}
    finally:
        if started:
            ray.shutdown()


def connect(ray, cpus: int | None, address: str | bool, resources: dict[str, float] | None = None) -> bool:
    """Start a local cluster (``address`` True) offering ``resources`` besides its CPUs,
    or join the one at ``address``; True when this call started the connection (and so
    must end it). A connection already open (a test's shared cluster, a caller's) is used
    as it is."""
    if ray.is_initialized():
        return False
    if address is True:
        start_local_cluster(cpus, resources)
        return True
    try:
        ray.init(address=str(address), log_to_driver=False)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise ExecutorUnavailable(f"--ray: cannot reach a Ray cluster at {address}: {one_line(exc)}") from None
    return True


def start_local_cluster(cpus: int | None, resources: dict[str, float] | None = None) -> None:
    """A Ray cluster on this machine of ``cpus`` CPUs (default: the cores) and custom
    ``resources`` (name -> amount). Its workers
    get this process's sys.path, so they import what the caller can (a checkout, a
    test's folder), not only what is installed."""
    ray = import_ray()
    # the cluster's processes inherit this environment (a runtime_env would do the same
    # at the cost of a slower first task)
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(entry for entry in sys.path if entry)
    try:
        ray.init(num_cpus=cpus or os.cpu_count() or 1, include_dashboard=False, log_to_driver=False,
                 resources=resources)
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def _outcome(ray, key: str, ref) -> Done | Failed:
    errors = ray.exceptions
    try:
        return Done(key, ray.get(ref))
    except errors.RayTaskError as exc:  # fn raised: its own exception, not Ray's wrapper
        cause = getattr(exc, "cause", None)
        return Failed(key, one_line(cause) if cause is not None else one_line(exc))
    except errors.WorkerCrashedError:
        return Failed(key, "worker died (its Ray worker process exited)")
    except (errors.NodeDiedError, errors.ObjectLostError):
        return Failed(key, "node lost")
    except errors.RayError as exc:
        return Failed(key, one_line(exc))
