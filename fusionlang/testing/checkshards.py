"""`check_rules` split into shards that run anywhere: one shard per rule (and one per
rule file for its in-file test blocks), merged back into the reports a serial run makes.

A shard is data: the rule file's path, the keys ``(kind, name, where)`` of the rules it
checks, and the options (seed included; a campaign over several seeds has a shard per
rule and seed). The worker parses the file itself (rule files are data; parsed rule
sets are never pickled across processes) and calls
:func:`check_rules` with a ``select`` that accepts only its keys, so a rule is checked by
the very code, with the very seed, that a serial run uses: verdicts and counterexamples
do not depend on how the shards were spread. :func:`plan_shards` decides what runs (a
rule shared by several files is checked once, for the first file, as the serial run
does); :class:`Merge` puts the verdicts back in the serial order.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable

from fusionlang.errors import FuseError
from fusionlang.lang import load_rules
from fusionlang.lang.ruleset import RuleSet
from fusionlang.testing.checker import CheckReport, RuleCheck, check_rules
from fusionlang.testing.coverage import ROUND_BUDGET
from fusionlang.testing.testblocks import qualified_test_name

Key = tuple[str, str, str]


@dataclass(frozen=True)
class CheckOptions:
    """What a shard is checked with, besides its rules (the ``check`` flags)."""

    max_examples: int = 60
    seed: int = 0
    budget: int = ROUND_BUDGET
    float_exact: bool = False
    allow_uncovered: bool = False


@dataclass(frozen=True)
class CheckShard:
    """One job: check the rules ``keys`` of the rule file ``source`` (a path, or a
    library name such as ``apollo``); ``tests``: run its in-file test blocks instead
    (``names``: only those, when given, as ``file.fuse::name``)."""

    source: str
    file_index: int
    #: the caller's working directory: rule files inside it are named relative to it
    directory: str = "."
    keys: tuple[Key, ...] = ()
    tests: bool = False
    names: frozenset[str] | None = None
    options: CheckOptions = CheckOptions()

    @property
    def kinds(self) -> set[str]:
        return {"test"} if self.tests else {key[0] for key in self.keys}

    def accepts(self, kind: str, name: str, where: str) -> bool:
        """check_rules's ``select``: this shard's rules only."""
        if self.tests:
            return self.names is None or qualified_name((kind, name, where)) in self.names
        return (kind, name, where) in self.keys

    @property
    def label(self) -> str:
        """A key unique in its plan (the executors key results by it)."""
        what = "tests" if self.tests else " ".join(self.keys[0])
        return f"{self.file_index}:{self.options.seed}:{what}"


def _portable(source: str) -> str:
    """An absolute path for a file here (a worker may start in another directory); a
    library name (``apollo``, ``apollo.fuse``) as given."""
    path = Path(source)
    return str(path.resolve()) if path.is_file() else source


def rule_keys(ruleset: RuleSet, kinds: Iterable[str]) -> list[Key]:
    """The keys of the rules check_rules would check in ``ruleset``, in its order, test
    blocks left out (their keys are known only once they have run)."""
    keys: list[Key] = []

    def note_and_refuse(*key) -> bool:
        keys.append(key)
        return False

    # check_rules asks ``select`` about every candidate, in order, before checking it;
    # refusing them all lists them without checking any, from the one place that orders them
    check_rules(ruleset, kinds=set(kinds) - {"test"}, select=note_and_refuse)
    return keys


def qualified_name(key: Key) -> str:
    """A rule's name namespaced by the file that declares it (``apollo.fuse::name``), as
    test names are printed and ``check --rule`` takes them."""
    kind, name, where = key
    return qualified_test_name(where.rsplit(":", 1)[0], name)


def qualified_names(ruleset: RuleSet, kinds: Iterable[str]) -> set[str]:
    """``file.fuse::name`` of every rule of ``kinds`` that check_rules would check in
    ``ruleset``, test blocks included."""
    kinds = tuple(kinds)
    names = {qualified_name(key) for key in rule_keys(ruleset, kinds)}
    if "test" in kinds:
        names.update(qualified_test_name(test.span.file, test.name) for test in ruleset.tests)
    return names


def plan_shards(sources: list[str], rulesets: list[RuleSet], kinds: Iterable[str],
                names: set[str] | None, options: CheckOptions, seeds: int = 1) -> list[CheckShard]:
    """The shards of a check of ``rulesets`` (loaded from ``sources``), in the serial
    order; each rule once, for the first file that has it, under ``seeds`` seeds from
    ``options.seed`` on (one shard per rule and seed; test blocks draw nothing, so they
    run once). ``names``: only the rules of these ``file.fuse::name``, when given."""
    kinds = tuple(kinds)
    directory = os.getcwd()
    seen: set[Key] = set()
    shards: list[CheckShard] = []
    for index, (source, ruleset) in enumerate(zip(sources, rulesets)):
        portable = _portable(source)
        for key in rule_keys(ruleset, kinds):
            if key in seen or (names is not None and qualified_name(key) not in names):
                continue
            seen.add(key)
            shards.extend(CheckShard(portable, index, directory, (key,), options=replace(options, seed=seed))
                          for seed in range(options.seed, options.seed + seeds))
        if "test" in kinds and ruleset.tests:
            shards.append(CheckShard(portable, index, directory, tests=True,
                                     names=frozenset(names) if names else None, options=options))
    return shards


def check_shard(shard: CheckShard) -> list[RuleCheck]:
    """The verdicts of one shard, computed from the rule file (parsed here). The file is
    loaded from the caller's directory where this machine has it, so its rules are named
    (``file:line``) as the caller names them."""
    directory = shard.directory if os.path.isdir(shard.directory) else os.getcwd()
    found: set[Key] = set()

    def select(*key) -> bool:
        if shard.accepts(*key):
            found.add(key)
            return True
        return False

    with contextlib.chdir(directory):
        ruleset = load_rules(shard.source)
        options = shard.options
        report = check_rules(ruleset, max_examples=options.max_examples, seed=options.seed, budget=options.budget,
                             float_exact=options.float_exact, allow_uncovered=options.allow_uncovered,
                             kinds=shard.kinds, select=select)
    missing = [key for key in shard.keys if key not in found]
    if missing:
        # never pass a rule by not checking it: the file is not here what it is for the caller
        raise FuseError(f"{shard.source}: the worker found no {' '.join(missing[0][:2])} at {missing[0][2]} "
                        "(is the rule file the same on every machine?)")
    return report.checks


def lost_checks(shard: CheckShard, error: str) -> list[RuleCheck]:
    """What stands for a shard that never answered (its worker failed past the executor's
    retries): failed, since nothing was shown to hold."""
    detail = f"the check did not finish: {error}"
    if shard.tests:
        return [RuleCheck("test", "test blocks", shard.source, "failed", detail=detail)]
    return [RuleCheck(kind, name, where, "failed", detail=detail) for kind, name, where in shard.keys]


class Merge:
    """The reports of a serial run, built from shards' verdicts handed in the plan's
    order: one report per rule set, a test block shared by several files kept once, for
    the first (as a serial run keeps it)."""

    def __init__(self, rulesets: list[RuleSet]):
        self.reports = [CheckReport(ruleset.name) for ruleset in rulesets]
        self._seen_tests: set[Key] = set()

    def add(self, shard: CheckShard, checks: list[RuleCheck]) -> list[RuleCheck]:
        """Add a shard's verdicts; returns those kept, for printing."""
        report = self.reports[shard.file_index]
        kept = []
        for check in checks:
            if check.kind == "test":
                if check.key in self._seen_tests:
                    continue
                self._seen_tests.add(check.key)
            report.checks.append(check)
            report.seconds += check.seconds
            kept.append(check)
        return kept


__all__ = ["CheckOptions", "CheckShard", "check_shard", "Merge", "lost_checks", "plan_shards", "rule_keys"]
