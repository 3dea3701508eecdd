"""check_rules(): every rule of a rule set, checked, with a verdict and where it is.

Per rule the verdict is one of

* ``proved`` — sympy shows the two sides are the same scalar function (elementwise
  rewrites and decompositions), or the property is decided exactly (a fuse entry's
  result is at least as high as its inputs in the lattice); proofs of rewrites are
  backed by instances too, so a proof over the reals that integer arithmetic breaks
  still fails;
* ``checked`` — N instances drawn by hypothesis agreed;
* ``failed`` — a counterexample, shrunk by hypothesis, with the rule's ``file:line``;
* ``skipped`` — why nothing could be checked (no instance satisfies the pattern and
  guard, or the rule defines its op, so both sides are the same code).

What is checked: rewrites and decompositions (both sides on the reference interpreter),
formula ``def``s (the NumPy reference against sympy's own evaluation of the formula),
``fuse`` entries (monotone in the lattice), strategies (acyclic, valid plans on random
graphs) and the rule set's in-file ``test`` blocks.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np
import sympy as sp
from hypothesis import HealthCheck, Phase, Verbosity, given, reject, seed as hypothesis_seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from fusionlang.errors import FuseError
from fusionlang.lang.ruleset import RuleSet
from fusionlang.testing.instances import (Counterexample, Reject, check_decompose_instance, check_rewrite_instance,
                                          decompose_instance, draw_array, rewrite_instance)
from fusionlang.testing.symbolic import prove_decomposition, prove_rewrite
from fusionlang.testing.testblocks import run_test_blocks
from fusionlang.testing.values import REAL, compare

STATUSES = ("proved", "checked", "failed", "skipped")
KINDS = ("rewrite", "decompose", "def", "fuse", "strategy", "test")


@dataclass
class RuleCheck:
    """The verdict on one rule."""

    kind: str
    name: str
    #: ``file:line`` of the rule
    where: str
    status: str
    #: instances (or graphs) checked
    instances: int = 0
    #: the proof, the reason for skipping, or what failed
    detail: str = ""
    counterexample: Counterexample | None = None
    seconds: float = 0.0

    @property
    def key(self) -> tuple[str, str, str]:
        return self.kind, self.name, self.where

    def verdict(self) -> str:
        if self.status == "checked":
            return f"checked ({self.instances} {'graphs' if self.kind == 'strategy' else 'instances'})"
        if self.status == "proved" and self.instances:
            return f"proved (and {self.instances} instances checked)"
        return self.status

    def __str__(self) -> str:
        head = f"{self.where}: {self.kind} {self.name}: {self.verdict()}"
        if self.status == "failed":
            body = self.counterexample.details() if self.counterexample is not None else self.detail
            return head + "\n" + "\n".join("    " + line for line in body.splitlines())
        return head + (f" - {self.detail}" if self.detail and self.status == "skipped" else "")

    def to_dict(self) -> dict:
        return {"kind": self.kind, "name": self.name, "where": self.where, "status": self.status,
                "instances": self.instances, "detail": self.detail, "seconds": round(self.seconds, 3),
                "counterexample": self.counterexample.to_dict() if self.counterexample is not None else None}


@dataclass
class CheckReport:
    """Verdicts on every rule of a rule set (``ok`` when none failed)."""

    ruleset: str
    checks: list[RuleCheck] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def failures(self) -> list[RuleCheck]:
        return [c for c in self.checks if c.status == "failed"]

    def counts(self) -> Counter:
        return Counter(c.status for c in self.checks)

    def by_status(self, status: str) -> list[RuleCheck]:
        return [c for c in self.checks if c.status == status]

    def find(self, name: str, kind: str | None = None) -> RuleCheck:
        for c in self.checks:
            if c.name == name and (kind is None or c.kind == kind):
                return c
        raise KeyError(f"no check of {kind or 'a rule'} named {name!r}")

    def summary(self) -> str:
        counts = self.counts()
        return (f"{self.ruleset}: {len(self.checks)} rules: " + ", ".join(f"{counts[s]} {s}" for s in STATUSES) +
                f" ({self.seconds:.1f} s)")

    def __str__(self) -> str:
        return "\n".join([str(c) for c in self.checks] + [self.summary()])

    def to_dict(self) -> dict:
        return {"ruleset": self.ruleset, "ok": self.ok, "counts": {s: self.counts()[s] for s in STATUSES},
                "seconds": round(self.seconds, 3), "checks": [c.to_dict() for c in self.checks]}


# ----- running a property with hypothesis -------------------------------------------------------


class _Falsified(Exception):
    def __init__(self, counterexample: Counterexample):
        super().__init__(counterexample.message)
        self.counterexample = counterexample


@dataclass
class _Run:
    valid: int = 0
    rejected: Counter = field(default_factory=Counter)
    counterexample: Counterexample | None = None
    unsatisfiable: bool = False


def _settings(max_examples: int) -> settings:
    return settings(max_examples=max_examples, deadline=None, database=None, derandomize=False,
                    suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet, print_blob=False,
                    report_multiple_bugs=False, phases=(Phase.explicit, Phase.generate, Phase.shrink))


def run_property(trial: Callable, *, max_examples: int, seed: int) -> _Run:
    """Run ``trial(draw)`` on hypothesis draws until ``max_examples`` valid ones passed
    or one failed (shrunk). ``trial`` raises Reject for a draw that is not an instance
    and returns a Counterexample (or None) otherwise."""
    state = _Run()

    @hypothesis_seed(seed)
    @_settings(max_examples)
    @given(st.data())
    def prop(data):
        try:
            found = trial(data.draw)
        except Reject as exc:
            state.rejected[exc.reason] += 1
            reject()
        state.valid += 1
        if found is not None:
            raise _Falsified(found)

    try:
        prop()
    except _Falsified as exc:
        state.counterexample = exc.counterexample
    except Unsatisfiable:
        state.unsatisfiable = True
    if state.valid == 0:
        state.unsatisfiable = True
    return state


def _no_instance(state: _Run) -> str:
    reasons = "; ".join(f"{reason} (x{count})" for reason, count in state.rejected.most_common(3))
    return "no instance satisfies the pattern and guard" + (f": {reasons}" if reasons else "")


# ----- rewrites and decompositions -----------------------------------------------------------------


def _counterexample(name, where, instance, outcome, sides=("pattern", "replacement")) -> Counterexample:
    return Counterexample(name, where, str(outcome.mismatch), instance.leaf_arrays(), instance.node_list(),
                          outcome.expected, outcome.actual, sides)


def check_rewrite(rule, ruleset: RuleSet, *, max_examples: int = 60, seed: int = 0) -> RuleCheck:
    started = time.perf_counter()
    label = f"rewrite {rule.name}"

    def trial(draw):
        instance = rewrite_instance(draw, rule, ruleset)
        outcome = check_rewrite_instance(instance, rule, ruleset)
        return None if outcome.mismatch is None else _counterexample(label, rule.where, instance, outcome)

    state = run_property(trial, max_examples=max_examples, seed=seed)
    proof = prove_rewrite(rule, ruleset.registry)
    return _verdict("rewrite", rule.name, rule.where, state, proof, started)


def check_decomposition(case, ruleset: RuleSet, *, max_examples: int = 60, seed: int = 0) -> RuleCheck:
    started = time.perf_counter()
    name = case.op if not case.requires else case.op + "{" + ", ".join(f"{k}={v!r}" for k, v in case.requires) + "}"
    if case.from_def:
        return RuleCheck("decompose", name, case.where, "skipped", detail="the body defines the op: its reference "
                         "runs this very body, so both sides are the same code", seconds=time.perf_counter() - started)
    label = f"decompose {name}"

    def trial(draw):
        instance = decompose_instance(draw, case, ruleset)
        outcome = check_decompose_instance(instance, case, ruleset)
        return None if outcome.mismatch is None else _counterexample(label, case.where, instance, outcome,
                                                                     (case.op, "decomposition"))

    state = run_property(trial, max_examples=max_examples, seed=seed)
    proof = prove_decomposition(case, ruleset.registry)
    return _verdict("decompose", name, case.where, state, proof, started)


def _verdict(kind, name, where, state: _Run, proof, started) -> RuleCheck:
    seconds = time.perf_counter() - started
    if state.counterexample is not None:
        return RuleCheck(kind, name, where, "failed", state.valid, state.counterexample.message,
                         state.counterexample, seconds)
    if proof.proved:
        return RuleCheck(kind, name, where, "proved", 0 if state.unsatisfiable else state.valid, proof.note,
                         seconds=seconds)
    if state.unsatisfiable:
        return RuleCheck(kind, name, where, "skipped", 0, _no_instance(state), seconds=seconds)
    return RuleCheck(kind, name, where, "checked", state.valid, proof.note, seconds=seconds)


# ----- formula defs ---------------------------------------------------------------------------------


def _defined_at(formula: sp.Expr, point: dict) -> bool:
    """Is every subexpression of ``formula`` real and finite at ``point``? A product can hide a
    singular factor from sympy (0 * rsqrt(-1) is 0 there, NaN in floating point), so the
    whole formula being finite is not enough."""
    for sub in sp.preorder_traversal(formula):
        if sub.free_symbols or sub.is_number:
            value = sub.xreplace(point).evalf(30)
            if not value.is_real or not value.is_finite:
                return False
    return True


def check_def(rule, ruleset: RuleSet, *, max_examples: int = 30, seed: int = 0) -> RuleCheck:
    """A formula def: its NumPy reference (a walk of the sympy tree) against sympy's own
    numeric evaluation of the same formula, element by element."""
    from fusionlang.ir.types import TensorType
    from fusionlang.testing.symbolic import scalar_formula

    started = time.perf_counter()
    if not rule.is_formula:
        return RuleCheck("def", rule.name, f"{rule.span.file}:{rule.span.line}", "skipped",
                         detail="a compound def is a decomposition (checked as such)")
    where = f"{rule.span.file}:{rule.span.line}"
    registry = ruleset.registry
    opdef = registry.get(rule.name)
    n = len(opdef.inputs)
    attrs = opdef.normalize_attrs({}, rule.name)
    formula = scalar_formula(registry, rule.name, n, attrs)
    if formula is None:
        return RuleCheck("def", rule.name, where, "skipped", detail="no scalar formula to evaluate")
    from fusionlang.ops.access import v_sym
    from fusionlang.ops.scalar import Sigmoid

    # sympy evaluates exp, not our Sigmoid (kept whole for code printing)
    formula = formula.replace(Sigmoid, lambda a: 1 / (1 + sp.exp(-a)))

    def trial(draw):
        size = draw(st.integers(1, 4))
        arrays = [draw_array(draw, TensorType((size,), "float64"), REAL) for _ in range(n)]
        with np.errstate(all="ignore"):
            got = np.asarray(opdef.reference(arrays, attrs)[0], dtype=np.float64)
        want = []
        for k in range(size):
            point = {v_sym(j): sp.Float(float(arrays[j][k]), 30) for j in range(n)}
            if not _defined_at(formula, point):
                raise Reject("the formula is not real and finite there")
            want.append(float(formula.xreplace(point).evalf(30)))
        want = np.asarray(want)
        mismatch = compare(want, got, rtol=1e-9, atol=1e-9 * max(1.0, float(np.abs(want).max())))
        if mismatch is None:
            return None
        return Counterexample(f"def {rule.name}", where, f"NumPy reference differs from the formula: {mismatch}",
                              [], [], want, got)

    state = run_property(trial, max_examples=max_examples, seed=seed)
    seconds = time.perf_counter() - started
    if state.counterexample is not None:
        return RuleCheck("def", rule.name, where, "failed", state.valid, state.counterexample.message,
                         state.counterexample, seconds)
    if state.unsatisfiable:
        return RuleCheck("def", rule.name, where, "skipped", 0, _no_instance(state), seconds=seconds)
    return RuleCheck("def", rule.name, where, "checked", state.valid, "reference agrees with the formula",
                     seconds=seconds)


# ----- the fuse table ---------------------------------------------------------------------------------


def fuse_entry_name(entry, ruleset: RuleSet) -> str:
    """``producers -> consumers : result [flags]``, categories in lattice order."""
    name = f"{'|'.join(sorted(entry.producers, key=ruleset.rank))} -> " \
           f"{'|'.join(sorted(entry.consumers, key=ruleset.rank))} : {entry.result}"
    if entry.flags:
        name += " [" + ", ".join(sorted(entry.flags)) + "]"
    return name


def check_fuse_entry(entry, ruleset: RuleSet) -> RuleCheck:
    """The fused group's category is at least as high as both inputs': fusing never
    makes a group look easier to fuse than one of its parts."""
    where = f"{entry.span.file}:{entry.span.line}"
    name = fuse_entry_name(entry, ruleset)
    result = ruleset.rank(entry.result)
    below = [c for c in sorted(entry.producers | entry.consumers, key=ruleset.rank) if ruleset.rank(c) > result]
    if below:
        lattice = " < ".join(ruleset.categories)
        detail = (f"the result {entry.result!r} is below {', '.join(repr(c) for c in below)} in the lattice "
                  f"{lattice}: a fused group would rank lower than one of its parts")
        return RuleCheck("fuse", name, where, "failed", 0, detail)
    return RuleCheck("fuse", name, where, "proved", 0, "result is at least as high as both inputs")


# ----- strategies and test blocks ------------------------------------------------------------------


def check_strategy(strategy: str, ruleset: RuleSet, where: str, *, graphs: int = 30, seed: int = 0) -> RuleCheck:
    """Plans the strategy makes on random graphs are valid: every op in one group,
    groups acyclic and in a topological order (FusionPlan.validate)."""
    from fusionlang.api import fuse
    from fusionlang.ir.printer import format_graph
    from fusionlang.testing.graphgen import graphs as graph_strategy

    started = time.perf_counter()

    def trial(draw):
        graph = draw(graph_strategy(max_nodes=8))
        try:
            plan = fuse(graph, ruleset, strategy)
            plan.validate()
        except FuseError as exc:
            message = f"strategy {strategy} makes an invalid plan: {str(exc).splitlines()[0]}"
            return Counterexample(f"strategy {strategy}", where, message + "\n" + format_graph(graph))
        return None

    state = run_property(trial, max_examples=graphs, seed=seed)
    seconds = time.perf_counter() - started
    if state.counterexample is not None:
        return RuleCheck("strategy", strategy, where, "failed", state.valid, state.counterexample.message,
                         state.counterexample, seconds)
    return RuleCheck("strategy", strategy, where, "checked", state.valid, "plans are valid and acyclic",
                     seconds=seconds)


def check_test_blocks(ruleset: RuleSet) -> list[RuleCheck]:
    out = []
    for result in run_test_blocks(ruleset):
        where = f"{result.span.file}:{result.span.line}"
        if result.passed:
            out.append(RuleCheck("test", result.name, where, "checked", 1, "in-file test passed"))
        else:
            out.append(RuleCheck("test", result.name, where, "failed", 1, result.message))
    return out


# ----- everything ------------------------------------------------------------------------------------


def rule_names(ruleset: RuleSet, kinds: Iterable[str] = KINDS) -> set[str]:
    """The names check_rules can check in ``ruleset`` (what ``select`` is asked about)
    for rules of ``kinds``."""
    kinds = set(kinds)
    names: set[str] = set()
    if "rewrite" in kinds:
        names.update(rule.name for rule in ruleset.rewrites)
    if "decompose" in kinds:
        names.update(ruleset.decompositions)
    if "def" in kinds:
        names.update(name for name, rule in ruleset.defs.items() if rule.is_formula)
    if "fuse" in kinds:
        names.update(fuse_entry_name(entry, ruleset) for entry in ruleset.fuse_entries)
    if "strategy" in kinds:
        names.update(ruleset.strategies)
    if "test" in kinds:
        names.update(t.name for t in ruleset.tests)
    return names


def check_rules(ruleset, *, max_examples: int = 60, seed: int = 0, kinds: Iterable[str] = KINDS,
                select: Callable[[str, str, str], bool] | None = None,
                progress: Callable[[RuleCheck], None] | None = None) -> CheckReport:
    """Check every rule of ``ruleset`` (a RuleSet, or a name or path for load_rules).

    ``max_examples``: instances per rule; ``seed``: hypothesis seed (same seed, same
    instances); ``kinds``: which of rewrite, decompose, def, fuse, strategy, test;
    ``select(kind, name, where)``: check only the rules it accepts (the CLI uses it to
    check a rule shared by several files once); ``progress(check)`` is called as each
    verdict is reached.
    """
    if not isinstance(ruleset, RuleSet):
        from fusionlang.lang import load_rules

        ruleset = load_rules(ruleset)
    kinds = set(kinds)
    unknown = kinds - set(KINDS)
    if unknown:
        raise FuseError(f"unknown rule kind {sorted(unknown)[0]!r} (known: {', '.join(KINDS)})")
    started = time.perf_counter()
    report = CheckReport(ruleset.name)

    def wanted(kind, name, where) -> bool:
        return kind in kinds and (select is None or select(kind, name, where))

    def add(check: RuleCheck) -> None:
        report.checks.append(check)
        if progress is not None:
            progress(check)

    for rule in ruleset.rewrites:
        if wanted("rewrite", rule.name, rule.where):
            add(check_rewrite(rule, ruleset, max_examples=max_examples, seed=seed))
    for op, cases in ruleset.decompositions.items():
        for case in cases:
            if wanted("decompose", op, case.where):
                add(check_decomposition(case, ruleset, max_examples=max_examples, seed=seed))
    for name, rule in ruleset.defs.items():
        where = f"{rule.span.file}:{rule.span.line}"
        if rule.is_formula and wanted("def", name, where):
            add(check_def(rule, ruleset, max_examples=max(10, max_examples // 2), seed=seed))
    for entry in ruleset.fuse_entries:
        if wanted("fuse", fuse_entry_name(entry, ruleset), f"{entry.span.file}:{entry.span.line}"):
            add(check_fuse_entry(entry, ruleset))
    for name, strategy in ruleset.strategies.items():
        where = f"{strategy.span.file}:{strategy.span.line}"
        if wanted("strategy", name, where):
            add(check_strategy(name, ruleset, where, graphs=max(5, max_examples // 3), seed=seed))
    if ruleset.tests and "test" in kinds:
        for check in check_test_blocks(ruleset):
            if select is None or select(check.kind, check.name, check.where):
                add(check)
    report.seconds = time.perf_counter() - started
    return report


__all__ = ["CheckReport", "KINDS", "RuleCheck", "STATUSES", "check_decomposition", "check_def", "check_fuse_entry",
           "check_rewrite", "check_rules", "check_strategy", "check_test_blocks", "rule_names", "run_property"]
