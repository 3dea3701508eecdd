"""bitcast: each element's bits reinterpreted as another dtype of the same width (ONNX
BitCast). Unlike cast no value is converted: 1.0 as float32 becomes 1065353216 as int32.

The op names its input's dtype too (``source``): the reference interpreter hands 16-bit
float inputs to a reference widened to float32 (ops.evaluate), where float16 and bfloat16
look alike, so the reference narrows them back to ``source`` (exact) before the view."""

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
from fusionlang.ops.access import Read, Stmt, out_indices, v_sym
from fusionlang.ops.registry import Attr, OpCall, OpDef, register
from fusionlang.ops.scalar_numpy import BITCAST_DTYPES, bit_cast


def _bitcast_infer(call: OpCall) -> list[TensorType]:
    x, target = call.input(0), call.attrs["to"]
    if call.attrs["source"] != x.dtype:
        raise call.fail(f"source={call.attrs['source']} but the input is {x.dtype}")
    for dtype in (x.dtype, target):
        if dtype not in BITCAST_DTYPES:
            raise call.fail(f"cannot bitcast {dtype}")
    if np.dtype(x.dtype).itemsize != np.dtype(target).itemsize:
        raise call.fail(f"{x.dtype} ({np.dtype(x.dtype).itemsize * 8} bits) and {target} "
                        f"({np.dtype(target).itemsize * 8} bits) differ in width")
    return [x.with_dtype(target)]


def _bitcast_access(call: OpCall) -> list[Stmt]:
    out = call.out_types[0]
    codes = (sp.Integer(BITCAST_DTYPES.index(t)) for t in (call.input(0).dtype, out.dtype))
    return [Stmt(0, out.shape, (Read(0, out_indices(out.rank)),), scalar.BitCast(v_sym(0), *codes))]


register(
    OpDef(
        name="bitcast",
        inputs=("x",),
        attrs={"source": Attr("dtype", doc="the input's dtype"),
               "to": Attr("dtype", doc="target dtype, as wide as the input's")},
        infer=_bitcast_infer,
        reference=lambda xs, a: [bit_cast(xs[0], a["source"], a["to"])],
        access=_bitcast_access,
        doc="Reinterpret each element's bits as another dtype of the same width (no value conversion).",
    )
)
