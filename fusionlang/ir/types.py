"""TensorType: a static shape and a dtype. Everything in fusionlang has static shapes."""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from fusionlang.errors import ShapeError

#: dtypes fusionlang understands, by numpy name, with their short printed form
DTYPES = {
    "float32": "f32",
    "float64": "f64",
    "float16": "f16",
    "bfloat16": "bf16",
    "int64": "i64",
    "int32": "i32",
    "int8": "i8",
    "uint8": "u8",
    "int16": "i16",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "bool": "bool",
    # float8 storage types (ml_dtypes' numpy types): computed on as float32
    "float8_e4m3fn": "f8e4m3fn",
    "float8_e4m3fnuz": "f8e4m3fnuz",
    "float8_e5m2": "f8e5m2",
    "float8_e5m2fnuz": "f8e5m2fnuz",
    # 4- and 2-bit types, one per byte (ml_dtypes' numpy types)
    "int4": "i4",
    "uint4": "u4",
    "float4_e2m1fn": "f4e2m1",
    "int2": "i2",
    "uint2": "u2",
}
_SHORT_TO_DTYPE = {short: name for name, short in DTYPES.items()}

#: the dtypes NumPy knows by name only once ml_dtypes is imported (it registers them)
ML_DTYPES = frozenset({"bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "int4", "uint4",
                       "float4_e2m1fn", "int2", "uint2"})


def register_ml_dtypes(dtype) -> None:
    """Import ml_dtypes when ``dtype`` names one of its types, so NumPy knows the name.
    Not at module level: the import takes about 0.8 s, which `lint` of a rule file that
    names none of them should not pay. A value of such a type (a TensorType, an array,
    an ONNX tensor) is only made after this ran or after ml_dtypes was imported."""
    if isinstance(dtype, str) and _SHORT_TO_DTYPE.get(dtype, dtype) in ML_DTYPES:
        import ml_dtypes  # noqa: F401


def dtype_name(dtype) -> str:
    """NumPy's name of ``dtype`` (a name or a numpy dtype), ml_dtypes' types included."""
    if isinstance(dtype, str) and dtype in DTYPES:
        return dtype
    return np.dtype(dtype).name

#: the 16-bit floats: stored in 16 bits, computed in float32 (numpy calls bfloat16's kind
#: "V", not "f", so a dtype's kind does not tell)
HALF_FLOATS = ("float16", "bfloat16")


def is_float_dtype(dtype) -> bool:
    """Is ``dtype`` (a name or numpy dtype) a floating-point type, bfloat16 included?"""
    name = dtype_name(dtype)
    return name.startswith("float") or name in HALF_FLOATS


def canonical_dtype(dtype) -> str:
    """Return the numpy name of ``dtype`` ('float32', ...) or raise ShapeError."""
    register_ml_dtypes(dtype)
    if isinstance(dtype, str) and dtype in _SHORT_TO_DTYPE:
        return _SHORT_TO_DTYPE[dtype]
    if isinstance(dtype, str) and dtype in DTYPES:
        # already canonical (each is numpy's own name): every value's type is built with one,
        # and asking numpy again was 4% of fusing a 20,000-iteration unrolled Loop
        return dtype
    try:
        name = np.dtype(dtype).name
    except TypeError as exc:
        raise ShapeError(f"unknown dtype {dtype!r}") from exc
    if name not in DTYPES:
        raise ShapeError(f"unsupported dtype {name!r} (supported: {', '.join(DTYPES)})")
    return name


@dataclass(frozen=True)
class TensorType:
    """A static tensor type: a shape (tuple of non-negative ints) and a canonical dtype
    name; prints as ``f32[1,3,224,224]``."""

    shape: tuple[int, ...]
    dtype: str = "float32"

    def __post_init__(self):
        shape = tuple(int(d) for d in self.shape)
        if any(d < 0 for d in shape):
            raise ShapeError(f"negative dimension in shape {shape}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", canonical_dtype(self.dtype))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype).itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    @property
    def is_float(self) -> bool:
        return is_float_dtype(self.dtype)

    def with_shape(self, shape) -> "TensorType":
        return TensorType(tuple(shape), self.dtype)

    def with_dtype(self, dtype) -> "TensorType":
        return TensorType(self.shape, dtype)

    @classmethod
    def of(cls, array) -> "TensorType":
        array = np.asarray(array)
        return cls(array.shape, canonical_dtype(array.dtype))

    def __str__(self) -> str:
        return f"{DTYPES[self.dtype]}[{','.join(map(str, self.shape))}]"
