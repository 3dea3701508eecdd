"""The C int4/uint4/int2/uint2 conversions against ml_dtypes (ONNX's reference): every
stored value decoded, and doubles encoded as ml_dtypes converts float32 and integer values (the low four
bits of the truncated value; 0 for NaN and infinities)."""

from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np
import pytest

from fusionlang.backend.ccompile import build_library, load_library
from fusionlang.backend.storage_codecs import codec, codec_helpers

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


@pytest.mark.parametrize("dtype", DTYPES)
def test_float32_and_integer_values_encode_as_ml_dtypes_does(conversions, dtype):
    rng = np.random.default_rng(4)
    floats = np.concatenate([np.arange(-40, 40, 0.25, dtype=np.float32),
                             np.float32([np.nan, np.inf, -np.inf, 2**24 + 2, 2**27 + 8, 3e9, -3e9, 1e30, -1e30]),
                             (rng.standard_normal(5000) * rng.choice([1, 1e3, 1e7, 1e12], 5000)).astype(np.float32)])
    integers = rng.integers(-2**40, 2**40, 5000)
    target = getattr(ml_dtypes, dtype)
    with np.errstate(invalid="ignore"):
        want = np.concatenate([floats.astype(target), integers.astype(target)]).view(np.uint8)
    values = np.concatenate([floats.astype(np.float64), integers.astype(np.float64)])
    got = np.empty(values.size, np.uint8)
    getattr(conversions, f"enc_{dtype}")(_pointer(values), _pointer(got), ctypes.c_long(values.size))
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, [(float(values[i]), int(got[i]), int(want[i])) for i in bad[:5]]
