"""The C int4/uint4/int2/uint2 conversions: every stored value decoded as ml_dtypes (ONNX's
reference) decodes it, and doubles encoded as fusionlang defines the conversion
(ir.narrow_int: the low bits of the truncated value; 0 for NaN and infinities), which is
ml_dtypes' own conversion wherever ml_dtypes versions agree (values in range, integers)."""

from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np
import pytest

from fusionlang.backend.ccompile import build_library, load_library
from fusionlang.backend.storage_codecs import codec, codec_helpers
from fusionlang.ir.narrow_int import int_range, to_narrow_int

DTYPES = ["int4", "uint4", "int2", "uint2"]


def _pointer(array: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(array.ctypes.data)


@pytest.fixture(scope="module")
def conversions():
    src = "#include <stdint.h>\n" + codec_helpers("static inline")
    for dtype in DTYPES:
        decode, encode = codec(dtype)
        src += (f"void dec_{dtype}(const unsigned char* b, int* y, long n) "
                f"{{ for (long i = 0; i < n; i++) y[i] = {decode}(b[i]); }}\n"
                f"void enc_{dtype}(const double* x, unsigned char* y, long n) "
                f"{{ for (long i = 0; i < n; i++) y[i] = {encode}(x[i]); }}\n")
    return load_library(build_library([src]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_stored_value_decodes_as_ml_dtypes_does(conversions, dtype):
    codes = np.arange(16 if dtype.endswith("4") else 4, dtype=np.uint8)
    got = np.empty(codes.size, np.int32)
    getattr(conversions, f"dec_{dtype}")(_pointer(codes), _pointer(got), ctypes.c_long(codes.size))
    np.testing.assert_array_equal(got, codes.view(getattr(ml_dtypes, dtype)).astype(np.int32))


def _encoded(conversions, dtype, values: np.ndarray) -> np.ndarray:
    got = np.empty(values.size, np.uint8)
    getattr(conversions, f"enc_{dtype}")(_pointer(values), _pointer(got), ctypes.c_long(values.size))
    return got


def _drawn_values() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(4)
    floats = np.concatenate([np.arange(-40, 40, 0.25, dtype=np.float32),
                             np.float32([np.nan, np.inf, -np.inf, 2**24 + 2, 2**27 + 8, 3e9, -3e9, 1e30, -1e30]),
                             (rng.standard_normal(5000) * rng.choice([1, 1e3, 1e7, 1e12], 5000)).astype(np.float32)])
    return floats, rng.integers(-2**40, 2**40, 5000)


@pytest.mark.parametrize("dtype", DTYPES)
def test_float32_and_integer_values_encode_as_fusionlang_defines(conversions, dtype):
    floats, integers = _drawn_values()
    want = np.concatenate([to_narrow_int(floats, dtype), to_narrow_int(integers, dtype)]).view(np.uint8)
    values = np.concatenate([floats.astype(np.float64), integers.astype(np.float64)])
    got = _encoded(conversions, dtype, values)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, [(float(values[i]), int(got[i]), int(want[i])) for i in bad[:5]]


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_definition_is_ml_dtypes_where_its_versions_agree(dtype):
    """In range and for integers, ml_dtypes (every version) converts as fusionlang does."""
    floats, integers = _drawn_values()
    low, high = int_range(dtype)
    in_range = floats[(floats > low - 1) & (floats < high + 1)]
    target = getattr(ml_dtypes, dtype)
    for values in (in_range, integers):
        want = values.astype(target).view(np.uint8)
        np.testing.assert_array_equal(to_narrow_int(values, dtype).view(np.uint8), want)


@pytest.mark.parametrize(("dtype", "value", "stored"), [
    ("int4", -40.0, -8), ("int4", 8.0, -8), ("int4", 300.7, -4), ("int4", -8.9, -8),
    ("uint4", -1.0, 15), ("uint4", 17.5, 1), ("int2", 2.0, -2), ("uint2", -3.9, 1),
    ("int4", float("nan"), 0), ("uint4", float("-inf"), 0), ("int2", 1e30, 0)])
def test_out_of_range_floats_wrap_by_their_low_bits(conversions, dtype, value, stored):
    """ml_dtypes 0.7 gives 0 for these (0.6 wrapped): the definition and the C do not follow it."""
    assert int(to_narrow_int(np.float32([value]), dtype).astype(np.int32)[0]) == stored
    got = _encoded(conversions, dtype, np.float64([value]))
    assert int(got.view(getattr(ml_dtypes, dtype)).astype(np.int32)[0]) == stored
