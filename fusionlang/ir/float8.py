"""The float8 storage types: which dtypes they are, their range, and ONNX's saturating cast.

fusionlang stores float8 tensors as one byte each (ml_dtypes' numpy types) and computes on
them as float32; only conversions know the encodings. ONNX casts to float8 saturate by
default (``saturate=1``): out-of-range values and infinities become the largest finite
value of the sign, NaN stays NaN. Without saturation they become NaN (or infinity for
E5M2, the one type with infinities). A saturating cast is a NaN-keeping clamp to
``float8_max`` followed by the plain round-to-nearest-even conversion, which is how ONNX's
reference (``onnx.numpy_helper.saturate_cast``) computes it and how the code generators
do.
"""

from __future__ import annotations

import numpy as np

from fusionlang.ir.types import dtype_name

#: numpy names of the float8 dtypes fusionlang stores
FLOAT8_DTYPES = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")


#: the float storage types narrower than float16: the float8 types and FLOAT4E2M1 (which
#: has no infinity and no NaN: conversions to it saturate, as ml_dtypes converts)
NARROW_FLOAT_DTYPES = FLOAT8_DTYPES + ("float4_e2m1fn",)


def is_float8(dtype) -> bool:
    return dtype_name(dtype) in FLOAT8_DTYPES


def is_narrow_float(dtype) -> bool:
    return dtype_name(dtype) in NARROW_FLOAT_DTYPES


def float8_max(dtype) -> float:
    """The largest finite value of a float8 dtype (448 for E4M3FN, 57344 for E5M2...)."""
    return float(finite_range(dtype)[1])


def finite_range(dtype) -> tuple[np.generic, np.generic]:
    """(lowest, largest) finite value of a narrow float dtype, as that dtype's scalars."""
    import ml_dtypes  # here, not at module level: see ir.types.register_ml_dtypes

    info = ml_dtypes.finfo(np.dtype(dtype))
    return info.min, info.max


def to_float8(array: np.ndarray, dtype, saturate: bool) -> np.ndarray:
    """``array`` converted to a float8 dtype as ONNX's Cast does (round to nearest even;
    ``saturate``: clamp to the finite range first, keeping NaN)."""
    array = np.asarray(array)
    if saturate:
        array = np.clip(array, *finite_range(dtype))  # as onnx.numpy_helper.saturate_cast
    return array.astype(dtype)
