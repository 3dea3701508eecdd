"""The C float8 conversions against ml_dtypes (ONNX's reference), bit for bit: every stored
byte decoded, and float32 values encoded: every float8 value, the ties halfway between
neighbours and the floats next to them, overflow around the largest value, NaN, infinity,
subnormals, and a spread of random bit patterns."""

from __future__ import annotations

import ctypes

import ml_dtypes  # noqa: F401  (the float8 dtype names)
import numpy as np
import pytest

from fusionlang.backend.ccompile import build_library, load_library
from fusionlang.backend.cexpr import CUDA, helpers
from fusionlang.backend.float8_c import FORMATS, decoder, encoder, float8_helpers


def _pointer(array: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(array.ctypes.data)


@pytest.fixture(scope="module")
def conversions():
    src = "#include <stdint.h>\n" + float8_helpers("static inline")
    for dtype in FORMATS:
        src += (f"void dec_{dtype}(const unsigned char* b, float* y, long n) "
                f"{{ for (long i = 0; i < n; i++) y[i] = {decoder(dtype)}(b[i]); }}\n"
                f"void enc_{dtype}(const float* x, unsigned char* y, long n) "
                f"{{ for (long i = 0; i < n; i++) y[i] = {encoder(dtype)}(x[i]); }}\n")
    return load_library(build_library([src]))


def _decode(lib, dtype: str, codes: np.ndarray) -> np.ndarray:
    out = np.empty(codes.size, np.float32)
    getattr(lib, f"dec_{dtype}")(_pointer(codes), _pointer(out), ctypes.c_long(codes.size))
    return out


def _encode(lib, dtype: str, values: np.ndarray) -> np.ndarray:
    values = np.ascontiguousarray(values, np.float32)
    out = np.empty(values.size, np.uint8)
    getattr(lib, f"enc_{dtype}")(_pointer(values), _pointer(out), ctypes.c_long(values.size))
    return out


def _probes(dtype: str) -> np.ndarray:
    every = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float32)
    grid = np.unique(every[~np.isnan(every)].astype(np.float64))
    ties = ((grid[1:] + grid[:-1]) / 2).astype(np.float32)  # exact in float32: one more mantissa bit
    limit = float(ml_dtypes.finfo(np.dtype(dtype)).max)
    rng = np.random.default_rng(8)
    return np.concatenate([
        every, ties, np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf)),
        np.float32([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 3.4e38, -3.4e38, 1e-45, -1e-45, 1e-30]),
        np.float32([limit, limit * 1.03, limit * 1.0625, limit * 1.07, limit * 1.2, -limit * 1.07]),
        rng.integers(0, 2**32, 50_000, dtype=np.uint64).astype(np.uint32).view(np.float32),
        (rng.standard_normal(50_000) * rng.choice([1e-6, 1e-3, 1.0, 1e3, 1e5], 50_000)).astype(np.float32),
    ])


@pytest.mark.parametrize("dtype", list(FORMATS))
def test_every_float8_byte_decodes_as_ml_dtypes_does(conversions, dtype):
    codes = np.arange(256, dtype=np.uint8)
    got, want = _decode(conversions, dtype, codes), codes.view(dtype).astype(np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    finite = ~np.isnan(want)
    assert np.array_equal(got[finite].view(np.uint32), want[finite].view(np.uint32))  # -0 keeps its sign


@pytest.mark.parametrize("dtype", list(FORMATS))
def test_float32_encodes_to_the_same_byte_as_ml_dtypes(conversions, dtype):
    values = _probes(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        want = values.astype(dtype).view(np.uint8)
    got = _encode(conversions, dtype, values)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, [(float(values[i]), hex(got[i]), hex(want[i])) for i in bad[:5]]


def test_ties_round_to_even_and_overflow_follows_each_format(conversions):
    # 464 lies halfway between 448 (0x7E) and 480, which E4M3FN spends on NaN: even wins
    got = _encode(conversions, "float8_e4m3fn", np.float32([464, 465, -465, np.inf]))
    assert got.tolist() == [0x7E, 0x7F, 0xFF, 0x7F]
    # E5M2 has infinities; FNUZ types have one NaN, 0x80, and no negative zero
    assert _encode(conversions, "float8_e5m2", np.float32([61440, -np.inf])).tolist() == [0x7C, 0xFC]
    assert _encode(conversions, "float8_e4m3fnuz", np.float32([-0.0, 1e6, np.nan])).tolist() == [0x00, 0x80, 0x80]


def test_the_conversions_are_part_of_every_cuda_unit_too():
    text = helpers(CUDA)
    for dtype in FORMATS:
        assert f"static __device__ __forceinline__ float {decoder(dtype)}(" in text
        assert f"static __device__ __forceinline__ unsigned char {encoder(dtype)}(" in text


def test_the_cuda_runtime_hands_cupy_the_bytes_of_types_it_does_not_know():
    # CuPy has no ml_dtypes types: float8 and 4-bit buffers travel as their bytes
    from fusionlang.backend.runtime_cuda import _as_stored

    codes = np.arange(6, dtype=np.uint8)
    for dtype in ["float8_e4m3fn", "float8_e5m2fnuz", "int4", "uint4"]:
        stored = _as_stored(codes.view(dtype).reshape(2, 3))
        assert stored.dtype == np.uint8 and stored.shape == (2, 3)
        np.testing.assert_array_equal(stored.ravel(), codes)
    floats = np.ones((2, 2), np.float32)
    assert _as_stored(floats).dtype == np.float32
