"""check_rules(): every rule of a rule set, checked, with a verdict and where it is.

Per rule the verdict is one of

* ``proved`` — sympy shows the two sides are the same scalar function over the reals
  (elementwise rewrites and decompositions), or the property is decided exactly (a fuse
  entry's result is at least as high as its inputs in the lattice); proofs of rewrites
  are backed by instances too, so a proof over the reals that integer arithmetic breaks
  still fails;
* ``checked`` — the instances drawn by hypothesis agreed, and they met the coverage
  target (see :mod:`fusionlang.testing.coverage`);
* ``under-covered`` — the instances agreed but did not meet the target within the budget
  of rounds (too few matched the pattern and guard, or new shape classes were still turning up);
* ``failed`` — a counterexample, shrunk by hypothesis, with the rule's ``file:line``;
* ``skipped`` — why nothing could be checked (the rule defines its op, so both sides
  are the same code).

Rewrites and decompositions are drawn *for* their guard (shapes built to meet its shape
conjuncts, :mod:`fusionlang.testing.guardshapes`), in rounds, until the coverage target
is met or the budget of rounds is spent; each also gets a float32 verdict
(:mod:`fusionlang.testing.floatexact`). No verdict depends on time: the same rule file,
seed and options give the same verdicts on any machine, under any load (``seconds`` in
a report is information only).

What is checked: rewrites and decompositions (both sides on the reference interpreter),
formula ``def``s (the NumPy reference against sympy's own evaluation of the formula),
``fuse`` entries (monotone in the lattice), strategies (acyclic, valid plans on random
graphs) and the rule set's in-file ``test`` blocks.
"""

from __future__ import annotations

import time
from collections import Counter
from contextlib import contextmanager
from unittest import mock
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable

import numpy as np
import sympy as sp
from hypothesis import HealthCheck, Phase, Verbosity, given, reject, seed as hypothesis_seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from fusionlang.api import fuse
from fusionlang.errors import FuseError
from fusionlang.ir.printer import format_graph
from fusionlang.ir.types import TensorType
from fusionlang.lang import load_rules
from fusionlang.lang.ruleset import RuleSet
from fusionlang.ops.access import v_sym
from fusionlang.ops.scalar import Sigmoid
from fusionlang.testing.coverage import ROUND_BUDGET, Coverage
from fusionlang.testing.deforacle import body_trial, vector_mismatch
from fusionlang.testing.floatexact import FloatVerdict, float_verdict
from fusionlang.testing.graphgen import graphs as graph_strategy
from fusionlang.testing.guardshapes import ShapeDemands, shape_demands
from fusionlang.testing.instances import (Counterexample, Reject, check_decompose_instance, check_rewrite_instance,
                                          decompose_instance, decompose_sides, draw_array, rewrite_instance,
                                          rewrite_sides, wide_side)
from fusionlang.testing.shape_proof import ShapeProof, prove_decomposition_all_shapes, prove_rewrite_all_shapes
from fusionlang.testing.symbolic import prove_decomposition, prove_rewrite, scalar_formula
from fusionlang.testing.testblocks import qualified_test_name, run_test_blocks
from fusionlang.testing.values import REAL, compare

STATUSES = ("proved", "checked", "under-covered", "failed", "skipped")
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
    coverage: Coverage | None = None
    floats: FloatVerdict | None = None
    #: the proof for every rank and size (rewrites and decompositions the instances did not fail)
    all_shapes: ShapeProof | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return self.kind, self.name, self.where

    def verdict(self) -> str:
        unit = "graphs" if self.kind == "strategy" else "instances"
        if self.status == "checked":
            return f"checked ({self.instances} {unit})"
        if self.status == "under-covered":
            return f"under-covered ({self.instances} {unit})"
        if self.status == "proved" and self.kind in ("rewrite", "decompose"):
            return "proved equal over the reals" + (f" (and {self.instances} instances checked)"
                                                    if self.instances else "")
        if self.status == "proved" and self.instances:
            return f"proved (and {self.instances} instances checked)"
        return self.status

    @property
    def title(self) -> str:
        """``KIND NAME``; a deny entry's name already reads as written (``nofuse P -> C``);
        a test's name is namespaced by its file (``test apollo.fuse::name``)."""
        if self.kind == "test":
            return f"test {qualified_test_name(self.where.rsplit(':', 1)[0], self.name)}"
        return self.name if self.name.startswith("nofuse ") else f"{self.kind} {self.name}"

    def __str__(self) -> str:
        head = f"{self.where}: {self.title}: {self.verdict()}"
        notes = []
        if self.coverage is not None:
            notes.append("coverage: " + self.coverage.summary())
        if self.floats is not None:
            notes.append("float32: " + str(self.floats))
        if self.all_shapes is not None:
            notes.append("all shapes: " + str(self.all_shapes))
        if self.status == "failed":
            body = self.counterexample.details() if self.counterexample is not None else self.detail
            notes = body.splitlines() + [n for n in notes if not n.endswith(body)]
        elif self.detail and (self.status in ("skipped", "under-covered") or self.kind == "def"):
            head += f" - {self.detail}"
        return "\n".join([head] + ["    " + line for line in notes])

    def to_dict(self) -> dict:
        return {"kind": self.kind, "name": self.name, "where": self.where, "status": self.status,
                "instances": self.instances, "detail": self.detail, "seconds": round(self.seconds, 3),
                "counterexample": self.counterexample.to_dict() if self.counterexample is not None else None,
                "coverage": self.coverage.to_dict() if self.coverage is not None else None,
                "float32": self.floats.to_dict() if self.floats is not None else None,
                "all_shapes": self.all_shapes.to_dict() if self.all_shapes is not None else None}


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


@contextmanager
def _codebase_constants_off():
    """Hypothesis mixes numbers it finds in the source of loaded local modules into its
    draws, so the same seed drew different instances depending on which fusionlang
    modules happened to be imported (a rule checked alone passed, and failed after a
    test had imported the backend). Drawing without them keeps ``--seed`` reproducible.
    This reaches into hypothesis internals; where they differ, nothing is changed."""
    try:
        # here, not at the top: a hypothesis without this internal module is left as it is
        from hypothesis.internal.conjecture import providers

        empty = type(providers._local_constants)(integers=type(providers._local_constants.integers)(),
                                                 floats=type(providers._local_constants.floats)(
                                                     key=providers.float_to_int),
                                                 bytes=type(providers._local_constants.bytes)(),
                                                 strings=type(providers._local_constants.strings)())
        patches = [mock.patch.object(providers, "_get_local_constants", lambda: empty),
                   mock.patch.object(providers, "CONSTANTS_CACHE", {})]
    except (ImportError, AttributeError, TypeError):
        yield
        return
    with patches[0], patches[1]:
        yield


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
        with _codebase_constants_off():
            prop()
    except _Falsified as exc:
        state.counterexample = exc.counterexample
    except Unsatisfiable:
        state.unsatisfiable = True
    if state.valid == 0:
        state.unsatisfiable = True
    return state


def _no_instance(rejected: Counter) -> str:
    reasons = "; ".join(f"{reason} (x{count})" for reason, count in rejected.most_common(3))
    return "no drawn instance satisfied the pattern and guard" + (f": {reasons}" if reasons else "")


def _uncovered(position, rejected: Counter, accepted: str) -> str:
    """Why a rule got no instance, where its pattern is, and how an author accepts that
    (or, once accepted, by what)."""
    text = f"{position}: {_no_instance(rejected)}"
    if accepted:
        return f"{text} (accepted: {accepted})"
    return text + "; nothing of the rule was checked (say 'accepts uncovered' in the rule, or --allow-uncovered)"


@dataclass
class _Drawing:
    """Rounds of drawing toward a coverage target, and what they found."""

    coverage: Coverage
    rejected: Counter = field(default_factory=Counter)
    counterexample: Counterexample | None = None
    #: instances that satisfied the guard (the float32 verdict stresses some of them)
    kept: list = field(default_factory=list)
    #: rounds drawn
    rounds: int = 0


def _round_seed(seed: int, round_no: int) -> int:
    return seed if round_no == 0 else (seed * 1_000_003 + round_no) % 2**32


def round_size(min_instances: int, round_no: int) -> int:
    """Instances a round draws: ``min_instances`` in the first, a third as many (at least
    10) in each later one."""
    return min_instances if round_no == 0 else max(10, min_instances // 3)


def draw_until_covered(make, check, demands: ShapeDemands, *, min_instances: int, seed: int,
                       budget: int = ROUND_BUDGET) -> _Drawing:
    """Draw instances (``make(draw)``) and check each (``check(instance)`` returns a
    Counterexample or None) in rounds (:func:`round_size`) until the coverage target is
    met, a counterexample turns up, or ``budget`` rounds are spent."""
    found = _Drawing(Coverage(seed, min_instances=min_instances))
    for round_no in range(budget):
        def trial(draw):
            instance = make(draw)
            outcome = check(instance)
            if outcome is None:
                found.coverage.add(*instance.shape_class(demands))
                if len(found.kept) < 64:
                    found.kept.append(instance)
            return outcome

        state = run_property(trial, max_examples=round_size(min_instances, round_no),
                             seed=_round_seed(seed, round_no))
        found.rounds += 1
        found.coverage.drawn += state.valid + sum(state.rejected.values())
        found.rejected.update(state.rejected)
        if state.counterexample is not None:
            found.counterexample = state.counterexample
            return found
        if state.valid == 0:
            return found  # nothing satisfies the guard from here: more rounds will not change that
        if found.coverage.reached:
            return found
    return found


# ----- rewrites and decompositions -----------------------------------------------------------------


def _counterexample(name, where, instance, outcome, sides=("pattern", "replacement")) -> Counterexample:
    return Counterexample(name, where, str(outcome.mismatch), instance.leaf_arrays(), instance.node_list(),
                          outcome.expected, outcome.actual, sides)


def check_rewrite(rule, ruleset: RuleSet, *, max_examples: int = 60, seed: int = 0, budget: int = ROUND_BUDGET,
                  float_exact: bool = False, allow_uncovered: bool = False) -> RuleCheck:
    """A rewrite on instances drawn for its guard until the coverage target is met (at
    least ``max_examples`` satisfying it), its sympy proof if scalar, its float32 verdict.
    A rewrite of which no instance could be drawn fails, unless it says ``accepts
    uncovered`` or ``allow_uncovered``."""
    started = time.perf_counter()
    label = f"rewrite {rule.name}"
    demands = shape_demands(rule.guard)

    def check(instance):
        outcome = check_rewrite_instance(instance, rule, ruleset)
        return None if outcome.mismatch is None else _counterexample(label, rule.where, instance, outcome)

    drawing = draw_until_covered(lambda draw: rewrite_instance(draw, rule, ruleset), check, demands,
                                 min_instances=max_examples, seed=seed, budget=budget)
    proof = prove_rewrite(rule, ruleset.registry)
    floats = float_verdict(drawing.kept, lambda i: rewrite_sides(i, rule, ruleset), seed,
                           lambda i: wide_side(i, ruleset.registry))
    result = _verdict("rewrite", rule.name, rule.where, drawing, proof, floats, float_exact, started,
                      _Acceptance(rule.accepts, allow_uncovered, rule.pattern.span))
    return _with_all_shapes(result, lambda: prove_rewrite_all_shapes(rule, ruleset.registry))


def check_decomposition(case, ruleset: RuleSet, *, max_examples: int = 60, seed: int = 0,
                        budget: int = ROUND_BUDGET, float_exact: bool = False,
                        allow_uncovered: bool = False) -> RuleCheck:
    started = time.perf_counter()
    name = case.op if not case.requires else case.op + "{" + ", ".join(f"{k}={v!r}" for k, v in case.requires) + "}"
    if case.from_def:
        return RuleCheck("decompose", name, case.where, "skipped", detail="the body defines the op: its reference "
                         "runs this very body, so both sides are the same code (an oracle on the def checks it)",
                         seconds=time.perf_counter() - started)
    label = f"decompose {name}"

    def check(instance):
        outcome = check_decompose_instance(instance, case, ruleset)
        return None if outcome.mismatch is None else _counterexample(label, case.where, instance, outcome,
                                                                     (case.op, "decomposition"))

    drawing = draw_until_covered(lambda draw: decompose_instance(draw, case, ruleset), check, ShapeDemands(),
                                 min_instances=max_examples, seed=seed, budget=budget)
    proof = prove_decomposition(case, ruleset.registry)
    # no float64 reference here: a decomposition is how its op is computed, and the op's own
    # reference may compute in float64 inside (lp_norm's x * x does not overflow there), so
    # digits lost to an intermediate are the op's float32 nature, not a rewrite's mistake
    floats = float_verdict(drawing.kept, lambda i: decompose_sides(i, case, ruleset), seed)
    result = _verdict("decompose", name, case.where, drawing, proof, floats, float_exact, started,
                      _Acceptance(case.accepts, allow_uncovered, case.span))
    return _with_all_shapes(result, lambda: prove_decomposition_all_shapes(case, ruleset.registry))


def _with_all_shapes(check: RuleCheck, prove: Callable[[], ShapeProof]) -> RuleCheck:
    """``check`` with its proof for every rank and size: a rule its instances failed is
    wrong whatever a proof over the reals says, so it gets none."""
    if check.status == "failed":
        return check
    return replace(check, all_shapes=prove())


@dataclass(frozen=True)
class _Acceptance:
    """What a rule's author accepts (its ``accepts`` clause, ``--allow-uncovered``), and
    where the rule's pattern is (an uncovered rule's failure points there)."""

    accepts: frozenset[str] = frozenset()
    allow_uncovered: bool = False
    position: object = ""

    @property
    def uncovered_by(self) -> str:
        """What accepts a rule without instances ("" when nothing does)."""
        if "uncovered" in self.accepts:
            return "the rule says 'accepts uncovered'"
        return "--allow-uncovered" if self.allow_uncovered else ""


def _verdict(kind, name, where, drawing: _Drawing, proof, floats: FloatVerdict, float_exact: bool,
             started, acceptance: _Acceptance = _Acceptance()) -> RuleCheck:
    seconds = time.perf_counter() - started
    coverage = drawing.coverage
    accepts = acceptance.accepts
    if floats.breaks and "overflow" in accepts:
        floats = replace(floats, accepted=True)
    if floats.lost and "cancellation" in accepts:
        floats = replace(floats, accepted_lost=True)
    common = dict(seconds=seconds, coverage=coverage, floats=floats)
    if drawing.counterexample is not None:
        return RuleCheck(kind, name, where, "failed", coverage.satisfied, drawing.counterexample.message,
                         drawing.counterexample, **common)
    if (floats.breaks and not floats.accepted) or (floats.lost and not floats.accepted_lost) \
            or (float_exact and floats.measured and not floats.exact):
        return RuleCheck(kind, name, where, "failed", coverage.satisfied, str(floats), **common)
    if coverage.satisfied == 0:
        # a proof over the reals of a rule no instance can be drawn for is not backed by any:
        # the drawing, or the guard, is what the author must look at
        detail = _uncovered(acceptance.position, drawing.rejected, acceptance.uncovered_by)
        return RuleCheck(kind, name, where, "under-covered" if acceptance.uncovered_by else "failed", 0, detail,
                         **common)
    if proof.proved:
        return RuleCheck(kind, name, where, "proved", coverage.satisfied, proof.note, **common)
    if not coverage.reached:
        return RuleCheck(kind, name, where, "under-covered", coverage.satisfied,
                         f"the coverage target was not met in {drawing.rounds} rounds (--budget)", **common)
    return RuleCheck(kind, name, where, "checked", coverage.satisfied, proof.note, **common)


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
        return RuleCheck("def", rule.name, where, "under-covered", 0, _no_instance(state.rejected), seconds=seconds)
    return RuleCheck("def", rule.name, where, "checked", state.valid, "reference agrees with the formula",
                     seconds=seconds)


def check_def_oracles(rule, ruleset: RuleSet, *, max_examples: int = 30, seed: int = 0) -> RuleCheck:
    """A def against its oracles: each test vector once, each oracle body on
    ``max_examples`` drawn inputs. A failure points at the def's ``file:line:col``."""

    started = time.perf_counter()
    decl = rule.decl
    where = f"{decl.span.file}:{decl.span.line}:{decl.span.col}"
    opdef = ruleset.registry.get(rule.name)
    checked = 0
    vectors = [o for o in decl.oracles if o.body is None]
    for oracle in vectors:
        found = vector_mismatch(rule.name, decl, oracle, opdef)
        if found is not None:
            return RuleCheck("def", rule.name, where, "failed", checked, found.message, found,
                             time.perf_counter() - started)
        checked += 1
    rejected: Counter = Counter()
    bodies = [o for o in decl.oracles if o.body is not None]
    for oracle in bodies:
        state = run_property(body_trial(rule.name, decl, oracle, opdef, ruleset.registry),
                             max_examples=max_examples, seed=seed)
        rejected.update(state.rejected)
        if state.counterexample is not None:
            return RuleCheck("def", rule.name, where, "failed", checked + state.valid, state.counterexample.message,
                             state.counterexample, time.perf_counter() - started)
        checked += state.valid
        if state.valid == 0:
            return RuleCheck("def", rule.name, where, "under-covered", checked, _no_instance(rejected),
                             seconds=time.perf_counter() - started)
    against = ", ".join(part for part in (
        f"{len(bodies)} oracle bod{'y' if len(bodies) == 1 else 'ies'}" if bodies else "",
        f"{len(vectors)} test vector{'s' if len(vectors) != 1 else ''}" if vectors else "") if part)
    return RuleCheck("def", rule.name, where, "checked", checked, f"agrees with {against}",
                     seconds=time.perf_counter() - started)


def _check_a_def(rule, ruleset: RuleSet, *, max_examples: int, seed: int) -> RuleCheck:
    """A formula def against sympy, then (if it has any) against its oracles."""
    if rule.is_formula:
        first = check_def(rule, ruleset, max_examples=max_examples, seed=seed)
        if first.status == "failed" or not rule.decl.oracles:
            return first
    return check_def_oracles(rule, ruleset, max_examples=max_examples, seed=seed)


# ----- the fuse table ---------------------------------------------------------------------------------


def fuse_entry_name(entry, ruleset: RuleSet) -> str:
    """``producers -> consumers : result [flags]`` (``nofuse producers -> consumers`` for a
    deny entry), categories in lattice order."""
    pairs = f"{'|'.join(sorted(entry.producers, key=ruleset.rank))} -> " \
            f"{'|'.join(sorted(entry.consumers, key=ruleset.rank))}"
    if entry.deny:
        return f"nofuse {pairs}"
    name = f"{pairs} : {entry.result}"
    if entry.flags:
        name += " [" + ", ".join(sorted(entry.flags)) + "]"
    return name


def _fuse_where(entry) -> str:
    return f"{entry.span.file}:{entry.span.line}"


def check_fuse_entry(entry, ruleset: RuleSet) -> RuleCheck:
    """The fused group's category is at least as high as both inputs': fusing never
    makes a group look easier to fuse than one of its parts. A ``nofuse`` entry has no
    result: it is checked for deciding a pair at all (:func:`check_nofuse_entry`)."""
    if entry.deny:
        return check_nofuse_entry(entry, ruleset)
    where = _fuse_where(entry)
    name = fuse_entry_name(entry, ruleset)
    result = ruleset.rank(entry.result)
    below = [c for c in sorted(entry.producers | entry.consumers, key=ruleset.rank) if ruleset.rank(c) > result]
    if below:
        lattice = " < ".join(ruleset.categories)
        detail = (f"the result {entry.result!r} is below {', '.join(repr(c) for c in below)} in the lattice "
                  f"{lattice}: a fused group would rank lower than one of its parts")
        return RuleCheck("fuse", name, where, "failed", 0, detail)
    return RuleCheck("fuse", name, where, "proved", 0, "result is at least as high as both inputs")


def _lookup_flags(ruleset: RuleSet) -> list[str | None]:
    """The look-ups a deny entry answers (RuleSet.fuse_decision's ``flag``): the plain table
    and each flag of a producer -> consumer entry (not horizontal or sibling packing)."""
    flags = {flag for entry in ruleset.fuse_entries for flag in entry.flags} - {"horizontal", "sibling"}
    return [None, *sorted(flags)]


def _first_decider(ruleset: RuleSet, entry, producer: str, consumer: str, flag: str | None):
    """The entry that decides the pair before ``entry`` does in precedence order, or None
    when ``entry`` decides it. An earlier guarded entry shadows nothing for sure: its
    guard may not hold on an edge."""
    for earlier in ruleset.fuse_entries:
        if earlier is entry:
            return None
        if earlier.guard is None and earlier.matches(producer, consumer) and earlier.is_kind(flag):
            return earlier
    return None


def check_nofuse_entry(entry, ruleset: RuleSet) -> RuleCheck:
    """``proved`` when the deny entry decides at least one producer/consumer pair of some
    look-up; ``failed`` when earlier entries decide every one of its pairs (it never has
    an effect), naming them."""
    where = _fuse_where(entry)
    name = fuse_entry_name(entry, ruleset)
    shadows = []
    for producer in sorted(entry.producers, key=ruleset.rank):
        for consumer in sorted(entry.consumers, key=ruleset.rank):
            for flag in _lookup_flags(ruleset):
                earlier = _first_decider(ruleset, entry, producer, consumer, flag)
                if earlier is None:
                    return RuleCheck("fuse", name, where, "proved", 0,
                                     f"decides {producer} -> {consumer}: no earlier entry shadows it")
                if earlier not in shadows:
                    shadows.append(earlier)
    by = ", ".join(f"{fuse_entry_name(e, ruleset)} ({_fuse_where(e)})" for e in shadows)
    return RuleCheck("fuse", name, where, "failed", 0,
                     f"shadowed on every pair by earlier entries: {by}; it never decides a pair")


# ----- strategies and test blocks ------------------------------------------------------------------


def check_strategy(strategy: str, ruleset: RuleSet, where: str, *, graphs: int = 30, seed: int = 0) -> RuleCheck:
    """Plans the strategy makes on random graphs are valid: every op in one group,
    groups acyclic and in a topological order (FusionPlan.validate)."""

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
        names.update(name for name, rule in ruleset.defs.items() if rule.is_formula or rule.decl.oracles)
    if "fuse" in kinds:
        names.update(fuse_entry_name(entry, ruleset) for entry in ruleset.fuse_entries)
    if "strategy" in kinds:
        names.update(ruleset.strategies)
    if "test" in kinds:
        names.update(t.name for t in ruleset.tests)
    return names


def check_rules(ruleset, *, max_examples: int = 60, seed: int = 0, kinds: Iterable[str] = KINDS,
                budget: int = ROUND_BUDGET, float_exact: bool = False, allow_uncovered: bool = False,
                select: Callable[[str, str, str], bool] | None = None,
                progress: Callable[[RuleCheck], None] | None = None) -> CheckReport:
    """Check every rule of ``ruleset`` (a RuleSet, or a name or path for load_rules).

    ``max_examples``: instances per rule (for rewrites and decompositions, the least
    number that must satisfy the guard); ``seed``: hypothesis seed (same seed, same
    instances); ``budget``: rounds of drawing a rewrite or decomposition may take toward its
    coverage target (a count, so verdicts do not depend on the machine's speed; a def,
    oracle body or strategy is drawn in one round of its own);
    ``float_exact``: a rewrite that changes float32 results fails; ``allow_uncovered``: a
    rewrite or decomposition of which no instance could be drawn is under-covered, not
    failed (as if it said ``accepts uncovered``); ``kinds``: which of rewrite, decompose, def, fuse, strategy, test;
    ``select(kind, name, where)``: check only the rules it accepts (the CLI uses it to
    check a rule shared by several files once); ``progress(check)`` is called as each
    verdict is reached.
    """
    if not isinstance(ruleset, RuleSet):

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
            add(check_rewrite(rule, ruleset, max_examples=max_examples, seed=seed, budget=budget,
                              float_exact=float_exact, allow_uncovered=allow_uncovered))
    for op, cases in ruleset.decompositions.items():
        for case in cases:
            if wanted("decompose", op, case.where):
                add(check_decomposition(case, ruleset, max_examples=max_examples, seed=seed, budget=budget,
                                        float_exact=float_exact, allow_uncovered=allow_uncovered))
    for name, rule in ruleset.defs.items():
        where = f"{rule.span.file}:{rule.span.line}"
        if (rule.is_formula or rule.decl.oracles) and wanted("def", name, where):
            add(_check_a_def(rule, ruleset, max_examples=max(10, max_examples // 2), seed=seed))
    for entry in ruleset.fuse_entries:
        if wanted("fuse", fuse_entry_name(entry, ruleset), _fuse_where(entry)):
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


__all__ = ["CheckReport", "KINDS", "ROUND_BUDGET", "RuleCheck", "STATUSES", "check_decomposition", "check_def", "check_def_oracles",
           "check_fuse_entry", "check_nofuse_entry",
           "check_rewrite", "check_rules", "check_strategy", "check_test_blocks", "draw_until_covered", "round_size", "rule_names",
           "run_property"]
