"""The C FLOAT4E2M1 conversions against ml_dtypes (ONNX's reference), bit for bit: every
stored nibble decoded, and float32 values encoded: every float4 value, the ties between
neighbours and the floats next to them, saturation at 6, NaN (a zero of the opposite sign,
as ml_dtypes gives), infinities and random bit patterns."""

from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np
import pytest

from fusionlang.backend.ccompile import build_library, load_library
from fusionlang.backend.storage_codecs import codec, codec_helpers

FLOAT4 = ml_dtypes.float4_e2m1fn


def _pointer(array: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(array.ctypes.data)


@pytest.fixture(scope="module")
def conversions():
    decode, encode = codec("float4_e2m1fn")
    src = "#include <stdint.h>\n" + codec_helpers("static inline") + (
        "void dec(const unsigned char* b, float* y, long n) "
        f"{{ for (long i = 0; i < n; i++) y[i] = {decode}(b[i]); }}\n"
        "void enc(const float* x, unsigned char* y, long n) "
        f"{{ for (long i = 0; i < n; i++) y[i] = {encode}(x[i]); }}\n")
    return load_library(build_library([src]))


def test_every_nibble_decodes_as_ml_dtypes_does(conversions):
    codes = np.arange(16, dtype=np.uint8)
    got = np.empty(16, np.float32)
    conversions.dec(_pointer(codes), _pointer(got), ctypes.c_long(16))
    np.testing.assert_array_equal(got.view(np.uint32), codes.view(FLOAT4).astype(np.float32).view(np.uint32))


def test_float32_encodes_to_the_same_nibble_as_ml_dtypes(conversions):
    grid = np.unique(np.arange(16, dtype=np.uint8).view(FLOAT4).astype(np.float64))
    ties = ((grid[1:] + grid[:-1]) / 2).astype(np.float32)
    rng = np.random.default_rng(9)
    values = np.concatenate([
        grid.astype(np.float32), ties, np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf)),
        np.float32([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 6.5, 7.0, -1e30, 1e-45]),
        rng.integers(0, 2**32, 50_000, dtype=np.uint64).astype(np.uint32).view(np.float32),
        (rng.standard_normal(50_000) * 4).astype(np.float32)])
    got = np.empty(values.size, np.uint8)
    conversions.enc(_pointer(values), _pointer(got), ctypes.c_long(values.size))
    with np.errstate(invalid="ignore", over="ignore"):
        want = values.astype(FLOAT4).view(np.uint8)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, [(float(values[i]), int(got[i]), int(want[i])) for i in bad[:5]]
