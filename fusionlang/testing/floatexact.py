"""Float-exactness: does a rewrite change float32 results, not only real ones?

A proof with sympy is over the reals: ``(x + y) - y => x`` is an identity there, yet in
float32 ``(1 + 1e8) - 1e8`` is 0, and ``exp(x) / exp(y)`` overflows to inf/inf where
``exp(x - y)`` is 1. So instances that satisfied the guard are drawn again in float32
with magnitudes that stress arithmetic (tiny, large, near the exp overflow, close to
the float32 limit, and one operand cancelling another), and both sides are compared
exactly: the same bits, NaN where NaN, the same infinities.

The verdict is "float-exact" when no stressed instance differed, else "not
float-exact" with the largest difference and the instance it came from. A difference of
rounding is a note; a rewrite that makes a finite result infinite or NaN where the pattern
side is finite (hoisting a scale out of a sum, so the sum overflows) is a *break*, and
fails the rule whatever the flags (:attr:`FloatVerdict.breaks`). So does a rewrite that
*loses every significant digit*: against the pattern side computed in float64 from the
same float32 inputs, the replacement's float32 result is off by a relative error of 1 or
more where the pattern's is accurate (``x * y => (x + 1) * y - y`` at x = 1e-30: a
cancellation the rewrite introduced; :attr:`FloatVerdict.lost`). Reassociating a sum or
a product only rounds differently, and stays a note.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from fusionlang.errors import FuseError
from fusionlang.testing.instances import Instance, Reject
from fusionlang.testing.values import REAL, input_domains

#: magnitudes a leaf's elements are drawn around: tiny, ordinary, just past exp's
#: float32 overflow (88.7), large, and near float32's largest value
MAGNITUDES = (1e-30, 1e-3, 1.0, 3.0, 100.0, 1e4, 1e8, 1e20, 1e38)
#: stressed variants drawn per instance, and instances used per rule
VARIANTS = 3
#: variants with operands at opposite ends, one near float32's largest value, one small,
#: in turn: an overflow a rewrite moves (a scale hoisted out of a sum) shows only there
EXTREMES = ((1e38, 1e-3), (1e-3, 1e38))
INSTANCES = 8
#: a result is accurate within this relative error of the float64 reference, and has no
#: correct significant digit at 1 or more
ACCURATE = 1e-3
LOST = 1.0


@dataclass
class FloatVerdict:
    """The float32 verdict on a rule."""

    #: stressed instances compared (0: no float32 instance to stress)
    instances: int
    error: float = 0.0
    #: the stressed instance with the largest difference, in one line
    at: str = ""
    #: stressed instances where the replacement side is inf or NaN at an element the
    #: pattern side computes finite, and the first of them, in one line
    breaks: int = 0
    broken_at: str = ""
    #: the rule says ``accepts overflow``: its breaks are a note, not a failure
    accepted: bool = False
    #: stressed instances where the replacement loses every significant digit of an
    #: element the pattern side computes accurately (:func:`loses_all_digits`), the first
    lost: int = 0
    lost_at: str = ""
    #: the rule says ``accepts cancellation``: its lost digits are a note, not a failure
    accepted_lost: bool = False

    @property
    def measured(self) -> bool:
        return self.instances > 0

    @property
    def exact(self) -> bool:
        return self.measured and self.error == 0.0

    def __str__(self) -> str:
        if not self.measured:
            return "float-exactness not measured (no float32 instance satisfied the guard)"
        if self.exact:
            return f"float-exact ({self.instances} stressed float32 instances)"
        found = []
        if self.breaks:
            accepted = " (accepted: the rule says 'accepts overflow')" if self.accepted else ""
            found.append(f"the rewrite makes a finite float32 result infinite or NaN ({self.breaks} of "
                         f"{self.instances} stressed instances){accepted}, at {self.broken_at}")
        if self.lost:
            accepted = " (accepted: the rule says 'accepts cancellation')" if self.accepted_lost else ""
            found.append(f"the rewrite loses every significant digit of a float32 result the pattern computes "
                         f"accurately (relative error >= {LOST:g} against float64; {self.lost} of {self.instances} "
                         f"stressed instances){accepted}, at {self.lost_at}")
        return "; ".join(found) or f"not float-exact: max error {self.error:.3g} at {self.at}"

    def to_dict(self) -> dict:
        return {"instances": self.instances, "exact": self.exact, "error": self.error, "at": self.at,
                "breaks": self.breaks, "broken_at": self.broken_at, "accepted": self.accepted,
                "lost": self.lost, "lost_at": self.lost_at, "accepted_lost": self.accepted_lost}


def exact_difference(expected: np.ndarray, actual: np.ndarray) -> float:
    """0 when the arrays are the same floats (NaN where NaN, equal infinities); else the
    largest absolute difference, infinite where only one side is NaN or infinite."""
    e, a = np.asarray(expected, np.float64), np.asarray(actual, np.float64)
    if e.shape != a.shape:
        return float("inf")
    both_nan = np.isnan(e) & np.isnan(a)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(both_nan | (e == a), 0.0, np.abs(e - a))
    diff = np.where(np.isnan(diff), np.inf, diff)
    return float(diff.max()) if diff.size else 0.0


def breaks_finite(expected: np.ndarray, actual: np.ndarray) -> bool:
    """Is ``actual`` inf or NaN at an element where ``expected`` is finite?"""
    e, a = np.asarray(expected), np.asarray(actual)
    if e.shape != a.shape or e.dtype.kind != "f" or a.dtype.kind != "f":
        return False
    return bool(np.any(np.isfinite(e) & ~np.isfinite(a)))


def loses_all_digits(expected: np.ndarray, actual: np.ndarray, reference: np.ndarray | None) -> bool:
    """Is ``actual`` (the replacement, float32) off by a relative error of at least LOST from
    ``reference`` (float64) at an element where ``expected`` (the pattern, float32) is within
    ACCURATE of it? Only elements whose reference is finite and a normal float32 count."""
    if reference is None:
        return False
    e, a, r = (np.asarray(v) for v in (expected, actual, reference))
    if not (e.shape == a.shape == r.shape) or e.dtype.kind != "f" or a.dtype.kind != "f":
        return False
    e, a, r = (v.astype(np.float64) for v in (e, a, r))
    with np.errstate(all="ignore"):
        size = np.abs(r)
        judged = np.isfinite(r) & (size >= np.finfo(np.float32).tiny) & np.isfinite(e) & np.isfinite(a)
        accurate = np.abs(e - r) <= ACCURATE * size
        lost = np.abs(a - r) >= LOST * size
    return bool(np.any(judged & accurate & lost))


def _is_float32(instance: Instance) -> bool:
    kinds = {np.dtype(leaf.ttype.dtype) for leaf in instance.leaves if leaf.fill is None}
    floats = {k for k in kinds if k.kind == "f"}
    return floats == {np.dtype(np.float32)}


def _stressed_array(rng: np.random.Generator, array: np.ndarray, domain, earlier: list[np.ndarray],
                    magnitude: float | None = None) -> np.ndarray:
    if array.dtype != np.float32 or domain.kind == "index":
        return array
    same_shape = [a for a in earlier if a.shape == array.shape]
    if magnitude is None and same_shape and domain.kind == "real" and rng.random() < 0.3:
        # cancellation: nearly the negation of an earlier operand
        other = same_shape[int(rng.integers(len(same_shape)))].astype(np.float64)
        return (-other * (1 + rng.uniform(-1e-6, 1e-6, array.shape))).astype(np.float32)
    magnitude = float(rng.choice(MAGNITUDES)) if magnitude is None else magnitude
    values = magnitude * rng.uniform(1.0, 2.0, array.shape)
    if domain.kind != "positive":
        values = values * rng.choice(np.array([-1.0, 1.0]), array.shape)
    with np.errstate(over="ignore"):
        return np.minimum(values, np.finfo(np.float32).max).astype(np.float32)


def stress(instance: Instance, rng: np.random.Generator, extremes: tuple[float, float] | None = None) -> Instance:
    """A copy of ``instance`` with its float32 leaves redrawn at stressing magnitudes
    (literals, index operands and non-float leaves are kept); with ``extremes`` (a, b),
    the leaves take magnitudes a, b, a, ... in turn."""
    graph = instance.graph.copy()
    domains = input_domains(graph)
    feeds = dict(instance.feeds)
    earlier: list[np.ndarray] = []
    for k, leaf in enumerate(instance.leaves):
        if leaf.fill is not None:
            continue
        source = graph.constants if leaf.kind == "const" else feeds
        magnitude = extremes[k % 2] if extremes is not None else None
        array = _stressed_array(rng, np.asarray(source[leaf.value]), domains.get(leaf.value, REAL), earlier, magnitude)
        earlier.append(array)
        source[leaf.value] = np.require(array, requirements="C") if leaf.kind == "const" else array
    return Instance(graph, instance.root, instance.leaves, feeds, instance.variables)


#: a stressed leaf with more elements than this is shown by its range, not its elements
SHOWN_ELEMENTS = 4


def _abbreviated(array: np.ndarray) -> str:
    """A few elements in full (``[1, 1e+08]``); more as how many and their range (``12
    values in [-1.2e+38, 3]``): a float32 line of a report stays one short line."""
    if array.size <= SHOWN_ELEMENTS:
        flat = np.array2string(array if array.ndim == 0 else array.reshape(-1), precision=4, separator=", ",
                               max_line_width=10**6)
        return " ".join(flat.split())
    finite = array[np.isfinite(array)] if array.dtype.kind == "f" else array.reshape(-1)
    odd = array.size - finite.size
    span = f" in [{finite.min():.5g}, {finite.max():.5g}]" if finite.size else ""
    return f"{array.size} values{span}" + (f", {odd} not finite" if odd else "")


def describe(instance: Instance) -> str:
    """The instance's leaves on one line: ``x = f32[2] [1, 1e+08], y = f32[4,3] 12 values
    in [-1.2e+38, 3]``."""
    return ", ".join(f"{leaf.var or 'literal'} = {leaf.ttype} {_abbreviated(np.asarray(array))}"
                     for leaf, array in instance.leaf_arrays())


def float_verdict(instances: list[Instance], outcome: Callable[[Instance], tuple], seed: int,
                  reference: Callable[[Instance], np.ndarray | None] | None = None) -> FloatVerdict:
    """Stress up to INSTANCES float32 instances VARIANTS times each; ``outcome(instance)``
    gives (left side, right side) on an instance, or raises Reject where the rule does
    not apply to the stressed values; ``reference(instance)`` the left side in float64
    (or None), against which lost digits are judged."""
    rng = np.random.default_rng(seed)
    verdict = FloatVerdict(0)
    for instance in [i for i in instances if _is_float32(i)][:INSTANCES]:
        for variant in [*[None] * VARIANTS, *EXTREMES]:
            stressed = stress(instance, rng, variant)
            try:
                with np.errstate(all="ignore"):
                    expected, actual = outcome(stressed)
            except (Reject, FuseError):
                continue
            verdict.instances += 1
            if breaks_finite(expected, actual):
                verdict.breaks += 1
                verdict.broken_at = verdict.broken_at or describe(stressed)
            elif reference is not None and loses_all_digits(expected, actual, reference(stressed)):
                verdict.lost += 1
                verdict.lost_at = verdict.lost_at or describe(stressed)
            error = exact_difference(expected, actual)
            if error > verdict.error:
                verdict.error, verdict.at = error, describe(stressed)
    return verdict


__all__ = ["ACCURATE", "FloatVerdict", "LOST", "MAGNITUDES", "breaks_finite", "describe", "exact_difference",
           "float_verdict", "loses_all_digits", "stress"]
