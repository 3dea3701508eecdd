"""Input values with controlled magnitudes, and comparing results with a tolerance.

A property test is only as good as its tolerance, and a tolerance only means something
when values stay in a known range. So inputs are drawn from small ranges (floats in
[-2, 2], integers in [-4, 4]) and each input gets the *domain* its consumers need: the
operand of ``log``/``sqrt``/``rsqrt`` is positive, a divisor is kept away from zero, a
``gather`` index is a valid index. The domain comes from the graph itself (which op
reads the value, at which position), so ``feeds_for`` works on any graph, not only on
the ones our strategies build.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
from hypothesis import strategies as st

from fusionlang.ir.graph import Graph
from fusionlang.ir.types import TensorType, is_float_dtype

# ----- domains ---------------------------------------------------------------------------

#: kinds of domain, weakest first; merging two domains keeps the stronger
KINDS = ("real", "nonzero", "positive", "index")


@dataclass(frozen=True)
class Domain:
    """What values an input may take: ``real`` (anything in range), ``nonzero``,
    ``positive``, or ``index`` (valid indices into an axis of length ``bound``)."""

    kind: str = "real"
    bound: int = 0

    def merge(self, other: "Domain") -> "Domain":
        if other.kind == "index" and self.kind == "index":
            return Domain("index", min(self.bound, other.bound))
        return self if KINDS.index(self.kind) >= KINDS.index(other.kind) else other


REAL = Domain()
POSITIVE = Domain("positive")
NONZERO = Domain("nonzero")

#: op -> operand positions whose values must be positive (the op is undefined or
#: ill-conditioned at or below zero)
_POSITIVE_OPERANDS = {
    "log": (0,), "sqrt": (0,), "rsqrt": (0,), "reciprocal": (0,), "pow": (0,),
    "batch_norm": (4,),
}
#: op -> operand positions that must not be zero
_NONZERO_OPERANDS = {"div": (1,)}


def operand_domain(op: str, position: int, attrs: Mapping, in_types) -> Domain:
    """The domain the ``position``-th operand of an ``op`` node needs."""
    if position in _POSITIVE_OPERANDS.get(op, ()):
        return POSITIVE
    if position in _NONZERO_OPERANDS.get(op, ()):
        return NONZERO
    if op == "gather" and position == 1 and in_types and in_types[0] is not None:
        data = in_types[0]
        axis = int(attrs.get("axis", 0)) % max(1, data.rank)
        return Domain("index", data.shape[axis] if data.rank else 1)
    return REAL


def input_domains(graph: Graph) -> dict[str, Domain]:
    """Domain of every graph input and constant, from the nodes that read it."""
    domains: dict[str, Domain] = {}
    for node in graph.nodes:
        in_types = [graph.types.get(v) if v else None for v in node.inputs]
        for position, value in enumerate(node.inputs):
            if value and (value in graph.inputs or value in graph.constants):
                domain = operand_domain(node.op, position, node.attrs, in_types)
                domains[value] = domains.get(value, REAL).merge(domain)
    return domains


# ----- arrays ----------------------------------------------------------------------------


def array_for(rng: np.random.Generator, ttype: TensorType, domain: Domain = REAL, *, scale: float = 1.0,
              fill: float | None = None) -> np.ndarray:
    """A random array of ``ttype`` in ``domain``; ``fill`` gives every element one value.

    Floats: uniform in [-2, 2] times ``scale`` (positive: [0.5, 2]; nonzero: either sign,
    magnitude [0.5, 2]). Integers: [-4, 4] (positive [1, 4]). Bools: fair coin.
    """
    shape, dtype = ttype.shape, np.dtype(ttype.dtype)
    if fill is not None:
        return np.full(shape, fill, dtype=dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if domain.kind == "index":
        n = max(1, domain.bound)
        return rng.integers(-n, n, shape).astype(dtype)
    if dtype.kind in "iu":
        low = 1 if domain.kind in ("positive", "nonzero") else (0 if dtype.kind == "u" else -4)
        values = rng.integers(low, 5, shape)
        if domain.kind == "nonzero" and dtype.kind == "i":
            values = values * rng.choice(np.array([-1, 1]), shape)
        return values.astype(dtype)
    if domain.kind == "positive":
        values = rng.uniform(0.5, 2.0, shape)
    elif domain.kind == "nonzero":
        values = rng.uniform(0.5, 2.0, shape) * rng.choice(np.array([-1.0, 1.0]), shape)
    else:
        values = rng.uniform(-2.0, 2.0, shape) * scale
    return np.asarray(values).astype(dtype)


def feeds_for(graph: Graph, seed: int = 0, *, scale: float = 1.0,
              domains: Mapping[str, Domain] | None = None) -> dict[str, np.ndarray]:
    """Feeds for every input of ``graph``: reproducible for a seed, in each input's
    domain (see :func:`input_domains`; ``domains`` overrides it per input), floats
    scaled by ``scale``."""
    rng = np.random.default_rng(seed)
    found = input_domains(graph)
    if domains:
        found.update(domains)
    return {name: array_for(rng, graph.types[name], found.get(name, REAL), scale=scale) for name in graph.inputs}


def feeds(graph: Graph, *, scales=(1.0, 0.25)) -> st.SearchStrategy[dict[str, np.ndarray]]:
    """A hypothesis strategy of feeds for ``graph`` (a seed and a scale are drawn, so a
    failure shrinks to seed 0 and the smallest scale that still fails)."""
    return st.builds(lambda seed, scale: feeds_for(graph, seed, scale=scale), st.integers(0, 2**32 - 1),
                     st.sampled_from(list(scales)))


# ----- comparing -------------------------------------------------------------------------

#: relative tolerance by dtype; the absolute one is this times the values' magnitude
RTOL = {"float16": 2e-2, "float32": 2e-4, "float64": 1e-9, "bfloat16": 1e-1}  # bfloat16: 8 significant bits


@dataclass
class Mismatch:
    """Where two arrays differ beyond the tolerance (or in shape or dtype)."""

    message: str
    index: tuple[int, ...] | None = None
    expected: object = None
    actual: object = None
    error: float = 0.0

    def __str__(self) -> str:
        return self.message


def tolerance(dtype, scale: float = 1.0) -> tuple[float, float]:
    """(rtol, atol) for comparing results of ``dtype`` whose inputs and intermediates
    have magnitudes up to ``scale``: rounding errors grow with the operands, not with
    the result (``a - b`` of two large, close numbers)."""
    rtol = RTOL.get(np.dtype(dtype).name, 0.0)
    return rtol, rtol * max(1.0, float(scale))


def compare(expected: np.ndarray, actual: np.ndarray, *, rtol: float | None = None, atol: float | None = None,
            scale: float = 1.0) -> Mismatch | None:
    """None when ``actual`` matches ``expected`` (same shape and dtype; within tolerance;
    NaN and infinities in the same places), else the worst element."""
    expected, actual = np.asarray(expected), np.asarray(actual)
    if expected.shape != actual.shape:
        return Mismatch(f"shape {list(actual.shape)} instead of {list(expected.shape)}")
    if expected.dtype != actual.dtype:
        return Mismatch(f"dtype {actual.dtype} instead of {expected.dtype}")
    if expected.size == 0:
        return None
    default_rtol, default_atol = tolerance(expected.dtype, scale)
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    if expected.dtype.kind not in "fc" and not is_float_dtype(expected.dtype):
        bad = expected != actual
        if not bad.any():
            return None
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        return Mismatch(f"{int(bad.sum())} of {expected.size} elements differ; at {list(index)}: expected "
                        f"{_scalar(expected[index])}, got {_scalar(actual[index])}", index, expected[index],
                        actual[index], 1.0)
    e64, a64 = expected.astype(np.float64), actual.astype(np.float64)
    same_special = (np.isnan(e64) & np.isnan(a64)) | (np.isinf(e64) & (e64 == a64))
    with np.errstate(invalid="ignore", over="ignore"):
        error = np.where(same_special, 0.0, np.abs(e64 - a64))
        error = np.where(np.isnan(error), np.inf, error)
        allowed = atol + rtol * np.abs(np.where(np.isfinite(e64), e64, 0.0))
    bad = error > allowed
    if not bad.any():
        return None
    excess = np.where(bad, error - allowed, -np.inf)
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(excess)), expected.shape))
    worst = float(error[index])
    return Mismatch(f"{int(bad.sum())} of {expected.size} elements differ; worst at {list(index)}: expected "
                    f"{_scalar(expected[index])}, got {_scalar(actual[index])} (error {worst:.3g}, allowed "
                    f"{float(allowed[index]):.3g})", index, expected[index], actual[index], worst)


def _scalar(value) -> str:
    value = np.asarray(value).item()
    return f"{value:.7g}" if isinstance(value, float) else repr(value)


def magnitude(arrays) -> float:
    """The largest finite absolute value among ``arrays`` (1.0 when there is none)."""
    top = 1.0
    for array in arrays:
        array = np.asarray(array)
        if is_float_dtype(array.dtype):
            array = array.astype(np.float64)  # (bfloat16's kind is "V")
        if array.dtype.kind in "fiu" and array.size:
            finite = np.abs(array[np.isfinite(array)]) if array.dtype.kind == "f" else np.abs(array)
            if finite.size:
                top = max(top, float(finite.max()))
    return top


__all__ = ["Domain", "Mismatch", "POSITIVE", "NONZERO", "REAL", "array_for", "compare", "feeds", "feeds_for",
           "input_domains", "magnitude", "operand_domain", "tolerance"]
