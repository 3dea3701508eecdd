"""Numeric flags, checked where argparse reads them, and argparse's own errors as one line.

Each checker is an argparse ``type=``: a bad value is refused before any work with
``fusionlang: error: argument --rtol: ...`` and exit 2, never passed on to NumPy (a
negative seed raised ValueError deep inside it: exit 3; a NaN tolerance made ``--check``
fail every output).
"""

from __future__ import annotations

import argparse
import math
import re
import sys

from fusionlang.cli.text import safe

#: NumPy's seeds, as SeedSequence entropy, are unsigned 32-bit words
MAX_SEED = 2**32 - 1

#: timing repeats a user may ask for (each runs the whole program)
MAX_REPEAT = 1_000_000


def _shown(text: str) -> str:
    """The value as the message quotes it: repr, cut after 40 characters."""
    return repr(text) if len(text) <= 40 else f"{text[:40]!r}... ({len(text)} characters)"


def _integer(text: str, what: str) -> int:
    # int() of a 5,000-digit string raises past Python's digit limit: refuse long text first
    stripped = text.strip()
    if len(stripped) > 30 or not stripped.lstrip("+-").isdigit():
        raise argparse.ArgumentTypeError(f"{what} must be an integer, got {_shown(text)}")
    return int(stripped)


def seed(text: str) -> int:
    """A random seed: an integer from 0 to 2**32 - 1."""
    value = _integer(text, "the seed")
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"the seed must be from 0 to {MAX_SEED}, got {_shown(text)}")
    return value


#: the most seeds one ``check --seeds`` may run each rule under
MAX_SEEDS = 100_000


def seed_count(text: str) -> int:
    """How many seeds: an integer from 1 to MAX_SEEDS."""
    return _count(text, "the seed count", MAX_SEEDS)


def tolerance(text: str) -> float:
    """A comparison tolerance: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"the tolerance must be a number, got {_shown(text)}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"the tolerance must be a finite number >= 0, got {_shown(text)}")
    return value


def _count(text: str, what: str, most: int, unit: str = "") -> int:
    """An integer from 1 to ``most`` (``unit`` names what it counts in the message)."""
    value = _integer(text, what)
    if not 1 <= value <= most:
        raise argparse.ArgumentTypeError(f"{what} must be from 1 to {most}{unit}, got {_shown(text)}")
    return value


def repeat(text: str) -> int:
    """How many times to run: an integer from 1 to MAX_REPEAT."""
    return _count(text, "the repeat count", MAX_REPEAT)


#: the most rounds of drawing ``check --budget`` may give a rule
MAX_ROUNDS = 10_000


def rounds(text: str) -> int:
    """A budget of rounds: an integer from 1 to MAX_ROUNDS."""
    return _count(text, "the budget", MAX_ROUNDS, " rounds")


#: the most threads a run may ask for
MAX_THREADS = 1024


def threads(text: str) -> int:
    """A thread count: an integer from 1 to MAX_THREADS."""
    return _count(text, "the thread count", MAX_THREADS)


#: the most worker processes a pool may start
MAX_JOBS = 4096


def jobs(text: str) -> int:
    """A worker count: an integer from 1 to MAX_JOBS."""
    return _count(text, "the job count", MAX_JOBS)


#: the most random graphs one campaign may ask for, and per shard
MAX_GRAPHS, MAX_SHARD_GRAPHS = 10**9, 100_000


def graph_count(text: str) -> int:
    """How many random graphs: an integer from 1 to MAX_GRAPHS."""
    return _count(text, "the graph count", MAX_GRAPHS)


def shard_graphs(text: str) -> int:
    """Graphs per shard: an integer from 1 to MAX_SHARD_GRAPHS."""
    return _count(text, "the shard size", MAX_SHARD_GRAPHS)


_OPTION_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPTION_INT = re.compile(r"[+-]?[0-9]{1,30}")
_OPTION_FLOAT = re.compile(r"[+-]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?[0-9]+[eE][+-]?[0-9]+")


def strategy_option(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` for a strategy option, typed as in a rule file's strategy block: an
    integer, a number, true/false, else a string. Whether the strategy takes KEY (and that
    type) is checked once the strategy is known."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not _OPTION_KEY.fullmatch(key):
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (e.g. max_ops=32), got {_shown(text)}")
    value = value.strip()
    if _OPTION_INT.fullmatch(value):
        return key, int(value)
    if _OPTION_FLOAT.fullmatch(value):
        number = float(value)
        if not math.isfinite(number):
            raise argparse.ArgumentTypeError(f"option {key}: {_shown(value)} is not a finite number")
        return key, number
    if value in ("true", "false"):
        return key, value == "true"
    return key, value


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line in the CLI's error style, naming the
    command's --help instead of printing the usage block."""

    def error(self, message: str):
        # an unrecognized argument is echoed as given: escape what a terminal would obey
        print(f"fusionlang: error: {safe(message, newlines=False)} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)
