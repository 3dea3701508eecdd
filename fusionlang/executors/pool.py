"""A local pool of worker processes that survives the death of a worker.

Each worker is a process of its own with a pipe to this one, so when one dies (SIGKILL,
a segfault in a compiler) we know which job it was running: that job alone is charged
with the death and queued again, a fresh worker takes the dead one's place, and the
others' jobs go on. A job that has killed ``retries + 1`` workers is failed.

Workers start with "forkserver" (else "spawn"), never a plain fork: the parent may run
threads (OpenMP, Ray, a BLAS) whose locks a forked child would inherit held.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter, deque
from collections.abc import Callable, Mapping
from multiprocessing.connection import wait

from fusionlang.executors.outcomes import Done, Failed, one_line, worker_died


def _context():
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def _serve(fn, conn) -> None:
    """The worker's loop: (key, item) in, (key, ok, value or error line) out, None to stop."""
    while True:
        job = conn.recv()
        if job is None:
            return
        key, item = job
        try:
            answer = (key, True, fn(item))
        except Exception as exc:  # deterministic: reported, not retried
            answer = (key, False, one_line(exc))
        try:
            conn.send(answer)
        except Exception as exc:  # a value that cannot be pickled back
            conn.send((key, False, one_line(exc)))


class _Worker:
    def __init__(self, context, fn):
        self.conn, child_end = context.Pipe()
        self.process = context.Process(target=_serve, args=(fn, child_end), daemon=True)
        self.process.start()
        child_end.close()
        self.key: str | None = None  # the job it is running

    def give(self, key: str, item) -> None:
        self.key = key
        try:
            self.conn.send((key, item))
        except (BrokenPipeError, ConnectionResetError):
            pass  # it died while idle: its sentinel is ready, and the job is queued again

    def answer(self):
        """(key, ok, payload) when the worker answered, None when it died first."""
        try:
            if self.conn.poll():
                return self.conn.recv()
        except (EOFError, OSError):
            pass
        return None

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


class _Batch:
    """The bookkeeping of one run: jobs waiting, deaths charged to each, results so far."""

    def __init__(self, items: Mapping[str, object], retries: int, progress):
        self.items = items
        self.waiting = deque(items)
        self.deaths: Counter[str] = Counter()
        self.results: dict[str, Done | Failed] = {}
        self.retries = retries
        self.progress = progress

    def finish(self, outcome: Done | Failed) -> None:
        self.results[outcome.key] = outcome
        if self.progress is not None:
            self.progress(len(self.results), len(self.items))

    def charge_death(self, key: str, exitcode: int | None) -> None:
        self.deaths[key] += 1
        if self.deaths[key] > self.retries:
            self.finish(Failed(key, worker_died(exitcode)))
        else:
            self.waiting.appendleft(key)  # re-run it first: the batch's order stays close to the caller's


def run_on_pool(fn, items: Mapping[str, object], jobs: int, retries: int,
                progress: Callable[[int, int], None] | None) -> dict:
    context = _context()
    batch = _Batch(items, retries, progress)
    workers = [_Worker(context, fn) for _ in range(min(jobs, len(items)))]
    try:
        while len(batch.results) < len(items):
            for worker in workers:
                if worker.key is None and batch.waiting:
                    key = batch.waiting.popleft()
                    worker.give(key, items[key])
            busy = [w for w in workers if w.key is not None]
            wait([w.conn for w in busy] + [w.process.sentinel for w in busy])
            workers = [_collect(worker, batch, context, fn) for worker in workers]
    finally:
        for worker in workers:
            worker.stop()
    return {key: batch.results[key] for key in items}


def _collect(worker: _Worker, batch: _Batch, context, fn) -> _Worker:
    """The worker to keep in ``worker``'s place: itself while idle or running and once it
    answered, a fresh one when it died."""
    running = worker.key
    if running is None:
        return worker
    answer = worker.answer()
    if answer is not None:
        key, ok, payload = answer
        worker.key = None
        batch.finish(Done(key, payload) if ok else Failed(key, payload))
        return worker
    if worker.process.is_alive():
        return worker
    worker.process.join()
    batch.charge_death(running, worker.process.exitcode)
    worker.conn.close()
    return _Worker(context, fn)
