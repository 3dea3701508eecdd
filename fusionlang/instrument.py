"""Pass-level visibility: each stage logs through :mod:`logging`, and each pass can be timed.

Like ``TORCH_LOGS`` and TVM's pass-timing instrument:

- Every stage logs to the logger ``fusionlang.<stage>`` (stages: :mod:`fusionlang.stages`):
  one INFO line per stage with what it decided (``fusionlang.partition: apollo: 42 ops ->
  9 kernels``), DEBUG lines for each pass and decision inside it. Nothing is printed unless
  logging is turned on: ``FUSIONLANG_LOG=info`` (or ``debug``) in the environment, ``--log
  LEVEL`` on the command line, :func:`configure` from Python, or the application's own
  ``logging`` setup (the library adds only a NullHandler).
- :func:`timed` measures one pass (wall and process CPU time) and adds it to the
  :class:`Timings` that :func:`collect_timings` opened, if any: the table ``--timings``
  prints. The open collection is a context variable, not a global: two threads (or two
  nested collections) each see their own.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Iterator

from fusionlang.stages import STAGES, format_seconds

ROOT = "fusionlang"
#: the environment variable that turns logging on for any use of the library
ENV = "FUSIONLANG_LOG"
#: level name -> logging level; "off" silences fusionlang's loggers
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
          "error": logging.ERROR, "off": logging.CRITICAL + 1}

logging.getLogger(ROOT).addHandler(logging.NullHandler())


class _Environment:
    """Whether ``FUSIONLANG_LOG`` was read: once per process, by the command line before
    its command runs, else by the first stage that logs (a library use)."""

    read = False


def logger(stage: str) -> logging.Logger:
    """The logger of one stage: ``fusionlang.<stage>``."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r} (stages: {', '.join(STAGES)})")
    if not _Environment.read:
        try:
            configure_from_environment()
        except ValueError as exc:  # a library call never fails on a bad setting: say so once, go on
            print(f"fusionlang: {exc} (ignored)", file=sys.stderr)
    return logging.getLogger(f"{ROOT}.{stage}")


def level_named(name: str, source: str = "--log") -> int:
    """The logging level of ``name`` (case-insensitive); ValueError naming ``source`` if unknown."""
    level = LEVELS.get(name.strip().lower())
    if level is None:
        raise ValueError(f"{source}={name!r}: expected one of {', '.join(LEVELS)}")
    return level


class _Handler(logging.StreamHandler):
    """The handler :func:`configure` installs (a type of its own, so reconfiguring replaces it)."""


def configure(level: str, stream=None) -> None:
    """Print fusionlang's log records at ``level`` and above to ``stream`` (stderr), one
    line each: ``fusionlang.partition: apollo: 42 ops -> 9 kernels``. Calling it again
    replaces the earlier setting; it also overrides ``FUSIONLANG_LOG``."""
    _Environment.read = True
    root = logging.getLogger(ROOT)
    for handler in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(handler)
    handler = _Handler(stream if stream is not None else sys.stderr)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level_named(level))
    # records of fusionlang stay with its handler: an application's root logger does not print them twice
    root.propagate = False


def configure_from_environment(environ=os.environ) -> None:
    """Apply ``FUSIONLANG_LOG`` if it is set (ValueError if it names no level)."""
    _Environment.read = True
    value = environ.get(ENV)
    if value:
        level_named(value, ENV)
        configure(value)


@dataclass
class PassTime:
    """One pass, summed over its calls: its ``stage``, its ``path`` (the names of the timed
    passes it ran inside, then its own: a schedule search inside the backend's feedback
    inside partitioning is its own row), calls, wall and process CPU seconds."""

    stage: str
    path: tuple[str, ...]
    calls: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0

    @property
    def name(self) -> str:
        return self.path[-1]

    def to_dict(self) -> dict:
        return {"stage": self.stage, "pass": " > ".join(self.path), "calls": self.calls,
                "seconds": self.seconds, "cpu_seconds": self.cpu_seconds}


@dataclass
class Timings:
    """The passes timed while a :func:`collect_timings` block was open, one :class:`PassTime`
    per path, in the order each was first entered (the pipeline's order)."""

    passes: dict[tuple[str, ...], PassTime] = field(default_factory=dict)
    #: the names of the passes running now, outermost first
    _running: list[str] = field(default_factory=list)

    def enter(self, stage: str, name: str) -> PassTime:
        self._running.append(name)
        path = tuple(self._running)
        return self.passes.setdefault(path, PassTime(stage, path))

    def leave(self, entry: PassTime, seconds: float, cpu_seconds: float) -> None:
        self._running.pop()
        entry.calls += 1
        entry.seconds += seconds
        entry.cpu_seconds += cpu_seconds

    def rows(self) -> list[dict]:
        return [p.to_dict() for p in self.passes.values()]

    def table(self) -> str:
        """A plain-text table (what ``--timings`` prints); a pass run inside another is
        indented under it, and its time is part of the outer pass's."""
        header = ("stage", "pass", "calls", "wall", "cpu")
        body = [(p.stage, "  " * (len(p.path) - 1) + p.name, str(p.calls), format_seconds(p.seconds),
                 format_seconds(p.cpu_seconds)) for p in self.passes.values()]
        widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

        def line(cells):
            return "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

        return "\n".join([line(header), *map(line, body)])


_ACTIVE: contextvars.ContextVar[Timings | None] = contextvars.ContextVar("fusionlang_timings", default=None)


@contextlib.contextmanager
def collect_timings() -> Iterator[Timings]:
    """Collect every :func:`timed` pass run inside the block (in this thread or task)."""
    timings = Timings()
    token = _ACTIVE.set(timings)
    try:
        yield timings
    finally:
        _ACTIVE.reset(token)


@contextlib.contextmanager
def timed(stage: str, name: str, detail: str = "") -> Iterator[None]:
    """Time one pass of ``stage``: logged at DEBUG (with ``detail``, what this call
    worked on) and added to the open collection. A pass that raises is counted too (its
    time was spent)."""
    log = logger(stage)
    timings = _ACTIVE.get()
    entry = timings.enter(stage, name) if timings is not None else None
    # CPU time only for an open collection: process_time is a system call (0.2 ms each in
    # a sandboxed kernel), and a compiled model's run passes through here twice per call
    started, cpu_started = time.perf_counter(), time.process_time() if entry is not None else 0.0
    try:
        yield
    finally:
        seconds = time.perf_counter() - started
        if entry is not None and timings is not None:  # (an entry was opened on timings)
            timings.leave(entry, seconds, time.process_time() - cpu_started)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s%s: %s", name, f" ({detail})" if detail else "", format_seconds(seconds))

