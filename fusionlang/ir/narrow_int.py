"""The 4- and 2-bit integer storage types int4, uint4, int2 and uint2 (ml_dtypes' numpy
types, one element per byte, the value in the low bits).

A conversion to them is fusionlang's own definition, not whatever the installed
ml_dtypes does: keep the low bits of the integer part (C's truncation toward zero, then
two's-complement wrapping, as every other integer narrowing here); NaN, infinities and
magnitudes from 2**63 on become 0. ml_dtypes up to 0.6 converted floats the same way;
0.7 turns an out-of-range float into 0 instead (-40.0 -> int4 gave 8, now 0) while
still wrapping integers, so the reference interpreter and the generated C
(backend.storage_codecs) both follow :func:`to_narrow_int` rather than ``astype``.
In range, every ml_dtypes version, ONNX's reference and this definition agree.
"""

from __future__ import annotations

import numpy as np

from fusionlang.ir.types import dtype_name

#: numpy names of the narrow integer dtypes fusionlang stores, and their width in bits
NARROW_INT_BITS = {"int4": 4, "uint4": 4, "int2": 2, "uint2": 2}
NARROW_INT_DTYPES = tuple(NARROW_INT_BITS)

#: floats at or past this magnitude have no 64-bit integer part: they convert to 0
_INT64_LIMIT = 2.0**63


def is_narrow_int(dtype) -> bool:
    return dtype_name(dtype) in NARROW_INT_BITS


def int_range(dtype) -> tuple[int, int]:
    """(min, max) of an integer dtype, the narrow ones included (numpy's iinfo knows none)."""
    import ml_dtypes  # here, not at module level: see ir.types.register_ml_dtypes

    info = ml_dtypes.iinfo(np.dtype(dtype))
    return int(info.min), int(info.max)


def _integer_part(values: np.ndarray) -> np.ndarray:
    """int64 integer part of each value (truncated toward zero); 0 where there is none."""
    if values.dtype.kind in "iub":
        return values.astype(np.int64)  # uint64 past 2**63 wraps, which keeps its low bits
    wide = values.astype(np.float64)
    with np.errstate(invalid="ignore"):
        has_part = np.abs(wide) < _INT64_LIMIT  # False for NaN and infinities
    return np.trunc(np.where(has_part, wide, 0.0)).astype(np.int64)


def to_narrow_int(values, dtype) -> np.ndarray:
    """``values`` (any numeric array) converted to the narrow integer ``dtype``."""
    dtype = np.dtype(dtype)
    bits = NARROW_INT_BITS[dtype.name]
    low = _integer_part(np.asarray(values)) & ((1 << bits) - 1)
    if not dtype.name.startswith("u"):
        low = np.where(low >= 1 << (bits - 1), low - (1 << bits), low)
    return low.astype(np.int8).astype(dtype)  # in range now: every ml_dtypes converts it exactly


def convert(values, dtype) -> np.ndarray:
    """``values.astype(dtype)``, with fusionlang's conversion where ``dtype`` is narrow."""
    if is_narrow_int(dtype):
        return to_narrow_int(values, dtype)
    return np.asarray(values).astype(dtype)
