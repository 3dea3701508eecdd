"""Jobs for the executor tests: module-level, so worker processes and Ray workers can
import them. Each takes one picklable argument, as run_all's jobs do."""

import os
from pathlib import Path


def square(x: int) -> int:
    return x * x


def divide_one_by(x: int) -> float:
    return 1 / x


def raise_two_lines(_) -> None:
    raise ValueError("first line\nsecond line")


def count_then_divide(args: tuple[str, int]) -> float:
    """1/x, appending a line to ``marker`` per call, so a test can count the runs."""
    marker, x = args
    with open(marker, "a") as f:
        f.write("run\n")
    return 1 / x


def kill_worker_once(args: tuple[str, int]) -> int:
    """Kills its own worker the first time (``marker`` does not exist yet), then returns x."""
    marker, x = args
    if not Path(marker).exists():
        Path(marker).touch()
        os.kill(os.getpid(), 9)
    return x


def kill_worker_always(x: int) -> int:
    if x < 0:
        os.kill(os.getpid(), 9)
    return x
