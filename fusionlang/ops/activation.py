"""Activations ONNX names on their own: Shrink and Mish."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import sympy as sp
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import sp

from fusionlang.ir.types import TensorType
from fusionlang.ops.common import elementwise
from fusionlang.ops.elementwise import stable_softplus
from fusionlang.ops.registry import Attr, OpCall


def _shrink_numpy(xs, a):
    x = xs[0]
    lambd, bias = x.dtype.type(a["lambd"]), x.dtype.type(a["bias"])
    return np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, x.dtype.type(0)))


def _shrink_dtype(call: OpCall, types: list[TensorType]) -> str:
    if types[0].dtype == "bool":
        raise call.fail("shrink needs a numeric input, got bool")
    return types[0].dtype


elementwise(
    "shrink",
    lambda v, a: sp.Piecewise((v[0] + a["bias"], v[0] < -a["lambd"]), (v[0] - a["bias"], v[0] > a["lambd"]),
                              (0, True)),
    _shrink_numpy,
    attrs={"lambd": Attr("float", 0.5), "bias": Attr("float", 0.0)},
    dtype_rule=_shrink_dtype,
    doc="x + bias below -lambd, x - bias above lambd, 0 between.",
)
elementwise(
    "mish",
    lambda v, a: v[0] * sp.tanh(stable_softplus(v[0])),
    lambda xs, a: xs[0] * np.tanh(np.logaddexp(xs[0], xs[0].dtype.type(0))),
    float_only=True,
    doc="x * tanh(log(1 + e**x)).",
)
