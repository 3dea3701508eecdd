"""The 4-bit integer storage types int4 and uint4 (ml_dtypes' numpy types, one element per
byte, the value in the low four bits). Conversions to them keep the low four bits of the
integer part (C's truncation toward zero, then wrapping), as ml_dtypes, so ONNX's reference
Cast, does; NaN, infinities and magnitudes from 2**63 on become 0."""

from __future__ import annotations

import ml_dtypes
import numpy as np

#: numpy names of the 4-bit integer dtypes fusionlang stores
INT4_DTYPES = ("int4", "uint4")


def is_int4(dtype) -> bool:
    return np.dtype(dtype).name in INT4_DTYPES


def int_range(dtype) -> tuple[int, int]:
    """(min, max) of an integer dtype, the 4-bit ones included (numpy's iinfo knows none)."""
    info = ml_dtypes.iinfo(np.dtype(dtype))
    return int(info.min), int(info.max)
