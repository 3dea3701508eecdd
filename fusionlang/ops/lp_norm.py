"""LpNormalization: x divided by its L1 or L2 norm along one axis. Compound:
std/normalize.fuse opens it into a reduction and elementwise ops."""

from __future__ import annotations

import numpy as np

from fusionlang.ir.types import TensorType
from fusionlang.ops.common import accumulator, require_float
from fusionlang.ops.registry import Attr, OpCall, OpDef, register


def _infer(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    require_float(call, x)
    call.axis(call.attrs["axis"], x.rank)
    if call.attrs["p"] not in (1, 2):
        raise call.fail(f"p={call.attrs['p']} should be 1 or 2")
    return [x]


def _reference(xs, attrs):
    x = xs[0]
    wide = x.astype(accumulator(x.dtype))
    axis = attrs["axis"] % x.ndim
    if attrs["p"] == 1:
        norm = np.sum(np.abs(wide), axis=axis, keepdims=True)
    else:
        norm = np.sqrt(np.sum(wide * wide, axis=axis, keepdims=True))
    # a zero norm gives 0, not 0 / 0 (ONNX)
    with np.errstate(invalid="ignore", divide="ignore"):
        return [np.where(norm == 0, 0, wide / norm).astype(x.dtype)]


register(
    OpDef(
        name="lp_norm",
        inputs=("x",),
        attrs={"axis": Attr("int", -1), "p": Attr("int", 2, "1 or 2")},
        infer=_infer,
        reference=_reference,
        compound=True,
        doc="x / ||x||_p along `axis` (p = 1 or 2), 0 where the norm is 0 (ONNX LpNormalization).",
    )
)
