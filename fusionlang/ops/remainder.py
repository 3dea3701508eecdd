"""Mod (ONNX): the remainder of an elementwise division, with C's or Python's sign rule."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import sympy as sp

    from fusionlang.ops import scalar
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import lazy_module, sp

    scalar = lazy_module("fusionlang.ops.scalar")

from fusionlang.ir.types import TensorType
from fusionlang.ops.common import elementwise, same_dtype
from fusionlang.ops.registry import Attr, OpCall


def _formula(v, a):
    a_, b = v
    truncated = scalar.Fmod(a_, b)
    if a["fmod"]:
        return truncated
    # the floored remainder takes the divisor's sign: shift a truncated one of the other sign
    # (by signs, not by the product's sign: an integer product can overflow)
    other_sign = sp.Or(sp.And(truncated < 0, b > 0), sp.And(truncated > 0, b < 0))
    return sp.Piecewise((truncated + b, other_sign), (truncated, True))


def _numpy(xs, a):
    x, y = xs
    with np.errstate(divide="ignore", invalid="ignore"):
        if a["fmod"]:
            return np.fmod(x, y)
        return np.mod(x, y)


def _dtype(call: OpCall, types: list[TensorType]) -> str:
    dtype = same_dtype(call, types)
    if dtype == "bool":
        raise call.fail("remainder needs numeric inputs, got bool")
    if call.attrs["fmod"] not in (0, 1):
        raise call.fail(f"fmod={call.attrs['fmod']} should be 0 or 1")
    return dtype


elementwise(
    "remainder",
    _formula,
    _numpy,
    inputs=("a", "b"),
    attrs={"fmod": Attr("int", 0, "1: sign of a (C fmod); 0: sign of b (Python %)")},
    dtype_rule=_dtype,
    doc="Elementwise remainder of a / b: with fmod=1 it takes a's sign (C fmod), with fmod=0 b's (Python %); "
        "numpy broadcasting.",
)
