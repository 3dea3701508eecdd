"""``--jobs N | --ray [ADDRESS]``: where a command's independent jobs run (the executors
of :mod:`fusionlang.executors`), and the one-line errors when that place cannot be had."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping

from fusionlang.cli import flags
from fusionlang.errors import InputError


def add_executor_flags(p) -> None:
    p.add_argument("--jobs", type=flags.jobs, default=None, metavar="N",
                   help="run the jobs on a pool of N local worker processes (default: one after the other in "
                        "this process); a worker that dies has its job re-run. With a bare --ray: the CPUs "
                        "of the local cluster")
    p.add_argument("--ray", nargs="?", const=True, default=None, metavar="ADDRESS",
                   help="run the jobs as Ray tasks: on a local cluster this command starts, or on the "
                        "cluster at ADDRESS (needs pip install 'fusionlang[ray]')")


def is_serial(args) -> bool:
    """Run in this process, one job after the other (printing each result as it comes)."""
    return args.ray is None and args.jobs in (None, 1)


def executor_place(args) -> tuple[int | None, str | bool | None]:
    """``(jobs, ray)`` for :func:`fusionlang.executors.run_all`, once Ray is known to be
    there when asked for (a missing extra is a flag's error, before any work)."""
    if args.ray is None:
        return args.jobs or 1, None
    check_ray_flags(args)
    return args.jobs, args.ray


def check_ray_flags(args) -> None:
    """InputError for ``--jobs`` with a cluster's address, or ``--ray`` without Ray installed."""
    if args.ray is None:
        return
    if args.ray is not True and args.jobs is not None:
        raise InputError("--jobs sets the CPUs of a local Ray cluster; the cluster at an ADDRESS has its own")
    if importlib.util.find_spec("ray") is None:
        raise InputError("--ray: Ray is not installed (pip install 'fusionlang[ray]', or use --jobs N)")


def run_jobs(fn: Callable, items: Mapping[str, object], args) -> dict:
    """``fn`` on every item where the flags say, each key's Done or Failed."""
    from fusionlang.executors import ExecutorUnavailable, run_all

    jobs, ray = executor_place(args)
    try:
        return run_all(fn, items, jobs=jobs, ray=ray)
    except ExecutorUnavailable as exc:
        raise InputError(f"--{'ray' if ray is not None else 'jobs'}: {exc}") from None


def value_or(outcome, lost: Callable[[str], object]):
    """A Done outcome's value, else ``lost(error)`` for a job that never answered."""
    from fusionlang.executors import Done

    return outcome.value if isinstance(outcome, Done) else lost(outcome.error)
