"""The outcome of one job: its value, or why it has none (one line)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Done:
    """A job that returned: its key and the value ``fn`` returned."""

    key: str
    value: object


@dataclass(frozen=True)
class Failed:
    """A job with no value: it raised, or its worker (or node) died too often."""

    key: str
    #: one line: "ExcType: message", "worker died (signal 9)" or "node lost"
    error: str


class ExecutorUnavailable(RuntimeError):
    """The executor asked for cannot run here (Ray not installed, no cluster at an address)."""


#: the longest error line kept: a table cell, not a log
MAX_ERROR_CHARS = 300


def one_line(exc: BaseException) -> str:
    """``ExcType: message`` on one line, the form a report's table cell can hold: the
    message's first line only (Ray appends a whole traceback to some), cut to length."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def worker_died(exitcode: int | None) -> str:
    """Why a worker process ended without answering, from its exit code (negative: a signal)."""
    if exitcode is not None and exitcode < 0:
        return f"worker died (signal {-exitcode})"
    return f"worker died (exit code {exitcode})"
