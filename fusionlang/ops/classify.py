"""Float classification (ONNX IsNaN, IsInf): a bool per element, by what the value is."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import sympy as sp

    from fusionlang.ops import scalar
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import lazy_module, sp

    scalar = lazy_module("fusionlang.ops.scalar")

from fusionlang.ops.common import elementwise
from fusionlang.ops.registry import Attr


def _inf_formula(v, a):
    x = v[0]
    signs = []
    if a["detect_positive"]:
        signs.append(x > 0)
    if a["detect_negative"]:
        signs.append(x < 0)
    if not signs:
        return sp.Integer(0)
    return sp.Piecewise((scalar.IsInf(x), sp.Or(*signs)), (0, True))


def _inf_numpy(xs, a):
    x = xs[0]
    wanted = (a["detect_positive"] and np.isposinf(x)) | (a["detect_negative"] and np.isneginf(x))
    return np.broadcast_to(wanted, x.shape)


elementwise(
    "is_nan",
    lambda v, a: scalar.IsNan(v[0]),
    lambda xs, a: np.isnan(xs[0]),
    out_dtype="bool",
    float_only=True,
    doc="True where x is NaN.",
)
elementwise(
    "is_inf",
    _inf_formula,
    _inf_numpy,
    attrs={"detect_positive": Attr("int", 1, "report +inf"), "detect_negative": Attr("int", 1, "report -inf")},
    out_dtype="bool",
    float_only=True,
    doc="True where x is +inf (detect_positive) or -inf (detect_negative).",
)
