"""Every job in this process, one after the other: no worker to lose, nothing to pickle."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from fusionlang.executors.outcomes import Done, Failed, one_line


def run_serially(fn, items: Mapping[str, object], progress: Callable[[int, int], None] | None) -> dict:
    results: dict[str, Done | Failed] = {}
    for key, item in items.items():
        try:
            results[key] = Done(key, fn(item))
        except Exception as exc:  # the job's own failure is its result, the batch goes on
            results[key] = Failed(key, one_line(exc))
        if progress is not None:
            progress(len(results), len(items))
    return results
