"""The 4- and 2-bit integer storage types int4, uint4, int2 and uint2 (ml_dtypes' numpy
types, one element per byte, the value in the low bits). Conversions to them keep the low
bits of the integer part (C's truncation toward zero, then wrapping), as ml_dtypes, so
ONNX's reference Cast, does; NaN, infinities and magnitudes from 2**63 on become 0."""

from __future__ import annotations

import ml_dtypes
import numpy as np

#: numpy names of the narrow integer dtypes fusionlang stores, and their width in bits
NARROW_INT_BITS = {"int4": 4, "uint4": 4, "int2": 2, "uint2": 2}
NARROW_INT_DTYPES = tuple(NARROW_INT_BITS)


def is_narrow_int(dtype) -> bool:
    return np.dtype(dtype).name in NARROW_INT_BITS


def int_range(dtype) -> tuple[int, int]:
    """(min, max) of an integer dtype, the narrow ones included (numpy's iinfo knows none)."""
    info = ml_dtypes.iinfo(np.dtype(dtype))
    return int(info.min), int(info.max)
