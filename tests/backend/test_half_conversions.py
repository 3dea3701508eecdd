"""The 16-bit float conversions of generated code (backend.half), compiled and run on every
float16 and bfloat16 pattern and on float32 values chosen at the rounding edges, against
NumPy's float16 and ml_dtypes' bfloat16 casts (both round to nearest even)."""

from __future__ import annotations

import ctypes
from functools import lru_cache

import ml_dtypes
import numpy as np
import pytest

from fusionlang.backend.ccompile import build_library, load_library
from fusionlang.backend.cexpr import C
from fusionlang.backend.half import CONVERSIONS, half_helpers

ALL_PATTERNS = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)

_BATCH = """
void {name}_all(const {src}* in, {dst}* out, long n) {{ for (long k = 0; k < n; k++) out[k] = {name}(in[k]); }}
"""


@lru_cache(maxsize=None)
def _library():
    wrappers = "".join(_BATCH.format(name=widen, src="unsigned short", dst="float")
                       + _BATCH.format(name=narrow, src="float", dst="unsigned short")
                       for widen, narrow in CONVERSIONS.values())
    wrappers += _BATCH.format(name="fl_bf_round", src="float", dst="float")
    wrappers += "static inline unsigned short fl_d2h(double d) { return fl_f2h(fl_d2f_odd(d)); }\n"
    wrappers += _BATCH.format(name="fl_d2h", src="double", dst="unsigned short")
    return load_library(build_library([half_helpers(C.fn_prefix) + wrappers]))


def _call(name: str, values: np.ndarray, out_dtype) -> np.ndarray:
    values = np.ascontiguousarray(values)
    out = np.empty(values.shape, out_dtype)
    getattr(_library(), f"{name}_all")(ctypes.c_void_p(values.ctypes.data), ctypes.c_void_p(out.ctypes.data),
                                       ctypes.c_long(values.size))
    return out


def widen(dtype: str, patterns: np.ndarray) -> np.ndarray:
    return _call(CONVERSIONS[dtype][0], patterns, np.float32)


def narrow(dtype: str, values: np.ndarray) -> np.ndarray:
    return _call(CONVERSIONS[dtype][1], values.astype(np.float32), np.uint16)


def assert_same_patterns(got: np.ndarray, want: np.ndarray, dtype: str) -> None:
    """Equal bit patterns; a NaN only has to stay a NaN of the same sign (payloads differ
    between converters: F16C hardware quiets them, NumPy's software path does not)."""
    g, w = got.view(dtype).astype(np.float32), want.view(dtype).astype(np.float32)
    nan = np.isnan(w)
    assert np.array_equal(np.isnan(g), nan)
    assert np.array_equal(np.signbit(g[nan]), np.signbit(w[nan]))
    bad = np.flatnonzero((got != want) & ~nan)
    assert bad.size == 0, f"{bad.size} differ, first {got[bad[0]]:#06x} instead of {want[bad[0]]:#06x}"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_every_pattern_widens_exactly_and_round_trips(dtype):
    wide = widen(dtype, ALL_PATTERNS)
    want = ALL_PATTERNS.view(dtype).astype(np.float32)
    finite = ~np.isnan(want)
    assert np.array_equal(wide.view(np.uint32)[finite], want.view(np.uint32)[finite])
    assert np.array_equal(np.isnan(wide), ~finite)
    # NaN payloads are kept, so every pattern, NaNs included, comes back bit for bit
    assert np.array_equal(narrow(dtype, wide), ALL_PATTERNS)


def _edges(dtype: str) -> np.ndarray:
    """float32 values at every rounding edge of ``dtype``: each finite value, the ties
    halfway to its neighbour and the floats just beside them, then the specials."""
    values = ALL_PATTERNS.view(dtype).astype(np.float32)
    values = np.sort(values[np.isfinite(values)])
    ties = ((values[:-1].astype(np.float64) + values[1:]) / 2).astype(np.float32)  # exact in float32
    beside = np.concatenate([np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf))])
    top = np.float32(2.0 ** ml_dtypes.finfo(dtype).maxexp * (1 - 2.0 ** -(ml_dtypes.finfo(dtype).nmant + 2)))
    specials = np.array([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, np.finfo(np.float32).max,
                         np.finfo(np.float32).tiny, np.finfo(np.float32).smallest_subnormal, top,
                         np.nextafter(top, np.float32(0))], np.float32)
    return np.concatenate([values, ties, beside, specials, -specials])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_narrowing_rounds_ties_to_even_overflows_to_inf_and_keeps_subnormals(dtype):
    values = _edges(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        want = values.astype(dtype).view(np.uint16)
    assert_same_patterns(narrow(dtype, values), want, dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_narrowing_random_float32_patterns(dtype):
    rng = np.random.default_rng(13)
    values = rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        want = values.astype(dtype).view(np.uint16)
    assert_same_patterns(narrow(dtype, values), want, dtype)


def test_bf16_rounding_in_32_bit_lanes_is_the_round_trip_bit_for_bit_and_quiets_nans():
    # fl_bf_round (the epilogue's rounding of a bfloat16 value) against fl_bf2f(fl_f2bf(x)):
    # the rounding edges, NaNs with every payload shape, and a million random patterns; a
    # NaN keeps its sign and its payload's top bits, quiet bit set (signalling ones too)
    rng = np.random.default_rng(14)
    nans = np.array([0x7F800001, 0xFF800FFF, 0x7F810000, 0x7FC00000, 0xFFFFFFFF, 0x7F80FFFF, 0xFFA18000], np.uint32)
    values = np.concatenate([_edges("bfloat16"), nans.view(np.float32),
                             rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)])
    got = _call("fl_bf_round", values, np.float32).view(np.uint32)
    want = widen("bfloat16", narrow("bfloat16", values)).view(np.uint32)
    nan = np.isnan(values)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    np.testing.assert_array_equal(got[nan], values.view(np.uint32)[nan] & 0xFFFF0000 | 0x400000)


def test_nan_payload_that_would_vanish_stays_nan():
    """A float32 NaN whose payload lies in the 13 bits float16 drops must not become inf."""
    nan_low = np.array([0x7F800001, 0xFF800FFF], np.uint32).view(np.float32)
    out = narrow("float16", nan_low).view(np.float16)
    assert np.isnan(out).all() and np.signbit(out).tolist() == [False, True]


def test_float64_to_float16_rounds_once():
    """Doubles just beside every float16 tie: through a plain float32 they would land on the
    tie and round to even; rounded to odd first they round as NumPy's direct cast does."""
    values = ALL_PATTERNS.view(np.float16).astype(np.float64)
    values = np.sort(values[np.isfinite(values)])
    ties = (values[:-1] + values[1:]) / 2
    nudge = np.abs(ties) * 2.0 ** -30 + 2.0 ** -60
    rng = np.random.default_rng(5)
    doubles = np.concatenate([ties + nudge, ties - nudge, ties, rng.standard_normal(1 << 16) * 1000,
                              [np.inf, -np.inf, np.nan, 1e300, -1e-300, 0.0, -0.0]])
    with np.errstate(over="ignore"):
        want = doubles.astype(np.float16).view(np.uint16)
    assert_same_patterns(_call("fl_d2h", doubles, np.uint16), want, "float16")
