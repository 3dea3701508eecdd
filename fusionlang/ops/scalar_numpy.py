"""Scalar functions on NumPy arrays that formulas stand for: erf and sigmoid as float32
computes them, bit casts, shifts and bitwise ops. Apart from the sympy functions in
:mod:`fusionlang.ops.scalar`, so registering an op that uses them does not import sympy."""

from __future__ import annotations

import math

import numpy as np


#: the dtypes a BitCast names, by index (sympy arguments are numbers)
BITCAST_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "int16",
                  "uint16", "uint32", "uint64", "bool")


def bit_cast(x, source: str, target: str) -> np.ndarray:
    """x's values, as ``source``, with their bytes reinterpreted as ``target`` (little endian
    on every machine fusionlang runs on)."""
    # np.array, not np.ascontiguousarray: that one makes a 0-d array 1-d
    return np.array(np.asarray(x).astype(source), order="C").view(np.dtype(target))


#: the NumPy function of each Bitwise kind
BITWISE_KINDS = (np.bitwise_and, np.bitwise_or, np.bitwise_xor)


def bitwise(a, b, kind: int):
    """Bitwise on int64 copies of integer arrays, so mixed widths and signs combine by their
    two's-complement bits (the caller casts the result back to its dtype, which wraps)."""
    return BITWISE_KINDS[kind](np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64))


def bit_shift(a, s, bits: int, signed: bool, left: bool):
    """BitShift on int64 arrays holding ``bits``-wide values (the NumPy form of BitShift);
    unsigned ones in uint64, where a uint64 from 2**63 on stays positive and shifts right
    logically."""
    a, s = np.asarray(a).astype(np.uint64 if not signed else np.int64), np.asarray(s).astype(np.int64)
    in_range = (s >= 0) & (s < bits)
    count = np.where(in_range, s, 0).astype(np.uint64)
    if not signed:
        shifted = (a << count) if left else (a >> count)
        if bits < 64:
            shifted &= np.uint64((1 << bits) - 1)
        return np.where(in_range, shifted, np.uint64(0))
    if not left:
        return np.where(in_range, a >> count.astype(np.int64), np.where(a < 0, -1, 0))
    shifted = a.astype(np.uint64) << count
    if bits < 64:
        shifted &= np.uint64((1 << bits) - 1)
    out = shifted.astype(np.int64)
    if signed and bits < 64:
        out = np.where(out >= 1 << (bits - 1), out - (1 << bits), out)
    return np.where(in_range, out, 0)


def _chebyshev_fit(fn, lo: float, hi: float, degree: int) -> np.ndarray:
    nodes = np.polynomial.chebyshev.chebpts1(degree + 1)
    values = [fn(lo + (u + 1) * (hi - lo) / 2) for u in nodes]
    return np.polynomial.chebyshev.chebfit(nodes, values, degree)


def _erf_over_root(t: float) -> float:
    return math.erf(math.sqrt(t)) / math.sqrt(t) if t > 0 else 2 / math.sqrt(math.pi)


def _erfcx(x: float) -> float:
    return math.exp(x * x) * math.erfc(x)


def _erf_table(small_degree: int, edges: tuple[float, ...], degree: int):
    """Chebyshev fits of erf(x)/x in x**2 on [0, 1) and of exp(x**2) erfc(x) between ``edges``.

    erfc is fitted through the smooth erfcx so 1 - erf keeps its relative accuracy;
    past the last edge erf is 1 to the working precision.
    """
    small = _chebyshev_fit(_erf_over_root, 0.0, 1.0, small_degree)
    return small, [(lo, hi, _chebyshev_fit(_erfcx, lo, hi, degree)) for lo, hi in zip(edges, edges[1:])]


# fitted once from math.erf; degrees chosen for <1e-9 (single) and <1e-14 (double) error
_ERF_TABLES = {4: _erf_table(7, (1.0, 4.0), 12), 8: _erf_table(12, (1.0, 2.0, 4.0, 6.0), 14)}


def _clenshaw(u: np.ndarray, coef: np.ndarray) -> np.ndarray:
    b1, b2 = np.zeros_like(u), np.zeros_like(u)
    twice = 2 * u
    for c in coef[:0:-1]:
        b1, b2 = twice * b1 - b2 + c, b1
    return u * b1 - b2 + coef[0]


def np_erf(x):
    """Error function of an array, vectorized (to about 1 ulp of the result dtype)."""
    x = np.asarray(x)
    out_dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
    small_coef, pieces = _ERF_TABLES[4 if out_dtype.itemsize <= 4 else 8]
    a = np.abs(x.astype(np.float64))
    out = np.ones_like(a)
    mask = a < 1
    s = a[mask]
    out[mask] = s * _clenshaw(2 * s * s - 1, small_coef)
    for lo, hi, coef in pieces:
        mask = (a >= lo) & (a < hi)
        s = a[mask]
        out[mask] = 1 - np.exp(-s * s) * _clenshaw((2 * s - (lo + hi)) / (hi - lo), coef)
    out[np.isnan(a)] = np.nan
    return np.copysign(out, x).astype(out_dtype)


def np_sigmoid(x):
    x = np.asarray(x)
    # split by sign so exp never overflows
    out = np.empty_like(x, dtype=x.dtype if x.dtype.kind == "f" else np.float64)
    pos = x >= 0
    out[pos] = 1 / (1 + np.exp(-x[pos]))
    ex = np.exp(x[~pos])
    out[~pos] = ex / (1 + ex)
    return out
