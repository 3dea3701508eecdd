"""Extreme values of a dtype, and comparing results on them as IEEE does.

Where ``values`` keeps inputs in small ranges so that a tolerance means something, this
module draws the values where implementations part: signed zeros, subnormals, the
largest finite values and those just past what exp or a square can hold, infinities,
NaN, and an integer type's minimum and maximum (where a sum wraps and a division or an
absolute value overflows). ``assert_same_numbers`` then asks for the same NaNs, the same
infinities, zeros of the same sign and finite values within a few units in the last place.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

#: 16-bit float dtypes (their ops compute in float32 and round once)
HALF_FLOATS = ("float16", "bfloat16")
INTEGERS = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")

#: finite values past which a float32 exp, and a square, overflow
_EXP_EDGE, _SQUARE_EDGE = 88.72, 1.8446743e19

#: relative tolerance: two units in the last place of the dtype's significand
_RTOL = {"float16": 2.0**-9, "bfloat16": 2.0**-6, "float32": 2.0**-22, "float64": 2.0**-51}


def _dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def integer_edges(dtype: str) -> list[int]:
    """Where an integer type wraps or overflows: 0..3, -1 and -2, min and max and their
    neighbours, the middle of the range, and the square root of the maximum."""
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    root = int(hi**0.5)
    values = {0, 1, 2, 3, hi, hi - 1, lo, lo + 1, (hi >> 1) + 1, hi >> 1, root, root + 1}
    if lo < 0:
        values |= {-1, -2, -root - 1}
    return sorted(values)


def float_edges(dtype: str) -> list[float]:
    """Zeros of both signs, the smallest subnormal and normal, halves (rounding ties), one,
    the largest finite value and its neighbourhood, where exp and a square overflow
    float32 (for types that hold such values), the infinities and NaN; each with both
    signs, rounded to ``dtype``."""
    info = np.finfo(_dtype(dtype))
    big = float(info.max)
    magnitudes = [0.0, float(info.smallest_subnormal), float(info.smallest_normal), 0.5, 1.0, 1.5, 2.5, 3.0,
                  _EXP_EDGE, big / 2, big, np.inf]
    magnitudes += [m for m in (_SQUARE_EDGE, 1e10, 65504.0, 11.09, 256.0) if m < big]
    signed = [s * m for m in magnitudes for s in (1.0, -1.0)] + [np.nan]
    rounded = np.array(signed, np.float64).astype(_dtype(dtype)).astype(np.float64).tolist()
    # one of each value by its bits (a set would keep one of 0.0 and -0.0: they compare equal)
    unique = {(np.isnan(v), v, bool(np.signbit(v))): v for v in rounded}
    return [unique[key] for key in sorted(unique, key=lambda k: (k[0], 0.0 if k[0] else k[1], not k[2]))]


def edges(dtype: str) -> np.ndarray:
    """The extreme values of ``dtype`` as an array of it."""
    values = integer_edges(dtype) if dtype in INTEGERS else float_edges(dtype)
    return np.array(values, np.float64 if dtype not in INTEGERS else object).astype(_dtype(dtype))


def all_pairs(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(a, b), square arrays of the edges: a[i, j] = edges[j], b[i, j] = edges[i]. Every
    pair meets once in an elementwise op; each row of a holds every edge, each row of b
    one edge repeated (a reduction of a constant row: all -0.0, all max)."""
    e = edges(dtype)
    return np.tile(e, (e.size, 1)), np.repeat(e[:, None], e.size, axis=1)


def drawn_arrays(draw, dtype: str, shape: tuple[int, int]) -> np.ndarray:
    """An array of ``shape`` mixing the edges (a drawn share of the elements) with values
    from anywhere in the type's range (floats of any magnitude), some rows one value
    repeated. Hypothesis draws a seed and the share: a few choices, not one per element."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    share = draw(st.sampled_from([0.1, 0.5, 0.9]))
    e = edges(dtype)
    if dtype in INTEGERS:
        info = np.iinfo(dtype)
        anywhere = rng.integers(int(info.min), int(info.max), size=shape, dtype=dtype, endpoint=True)
    else:
        top = np.log10(float(np.finfo(_dtype(dtype)).max))
        anywhere = rng.choice([-1.0, 1.0], size=shape) * 10.0 ** rng.uniform(-8, top, size=shape)
    x = np.where(rng.random(shape) < share, rng.choice(e, size=shape), anywhere.astype(_dtype(dtype)))
    constant = rng.random(shape[0]) < 0.25
    x[constant] = x[constant, :1]
    return x.astype(_dtype(dtype))


def assert_same_numbers(got: np.ndarray, want: np.ndarray, err_msg: str = "", dtype: str | None = None) -> None:
    """Integers and booleans equal; floats with NaN in the same places, the same
    infinities, zeros of the same sign, and finite values within two units in the last
    place of ``dtype`` (by default ``want``'s; or of its smallest normal)."""
    assert got.shape == want.shape, f"{err_msg}: shape {got.shape}, want {want.shape}"
    name = dtype or ("bfloat16" if want.dtype == _dtype("bfloat16") else want.dtype.name)
    if name not in _RTOL:
        at = np.argwhere(got != want)
        if at.size:
            where = tuple(int(i) for i in at[0])
            raise AssertionError(f"{err_msg}: at {where} got {got[where]!r}, want {want[where]!r}")
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    where = _first_difference(g, w, _RTOL[name], float(np.finfo(_dtype(name)).smallest_normal))
    if where is not None:
        raise AssertionError(f"{err_msg}: at {where} got {g[where]!r}, want {w[where]!r} "
                             f"(signbit {np.signbit(g[where])}, {np.signbit(w[where])})")


def _first_difference(g: np.ndarray, w: np.ndarray, rtol: float, atol: float):
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(w) & np.isfinite(g)
        bad = np.isnan(g) != np.isnan(w)
        bad |= (np.isinf(g) | np.isinf(w)) & (g != w)
        bad |= finite & (np.abs(g - w) > rtol * np.abs(w) + atol)
        bad |= (g == 0) & (w == 0) & (np.signbit(g) != np.signbit(w))
    at = np.argwhere(bad)
    return tuple(int(i) for i in at[0]) if at.size else None
