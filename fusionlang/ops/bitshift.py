"""BitShift (ONNX): integer a shifted left or right by s bits, elementwise, with the
result wrapped to a's width and out-of-range counts well defined (NumPy's results)."""

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
from fusionlang.ops.access import Read, Stmt, broadcast_index, v_sym
from fusionlang.ops.common import broadcast_shapes, same_dtype
from fusionlang.ops.registry import Attr, OpCall, OpDef, register
from fusionlang.ops.scalar_numpy import bit_shift

DIRECTIONS = ("left", "right")


def _infer(call: OpCall) -> list[TensorType]:
    a, s = call.input(0), call.input(1)
    dtype = same_dtype(call, [a, s])
    if np.dtype(dtype).kind not in "iu":
        raise call.fail(f"bit_shift needs integer inputs, got {dtype}")
    if call.attrs["direction"] not in DIRECTIONS:
        raise call.fail(f"direction={call.attrs['direction']!r} should be 'left' or 'right'")
    return [TensorType(broadcast_shapes(call, [a.shape, s.shape]), dtype)]


def _reference(xs, attrs):
    a, s = xs
    dtype = np.dtype(a.dtype)
    out = bit_shift(a, s, dtype.itemsize * 8, dtype.kind == "i", attrs["direction"] == "left")
    return [np.asarray(out.astype(dtype), order="C")]


def _access(call: OpCall) -> list[Stmt]:
    out = call.out_types[0]
    dtype = np.dtype(out.dtype)
    # the width and signedness are the dtype's: the compiled code computes in a wider type
    body = scalar.BitShift(v_sym(0), v_sym(1), sp.Integer(dtype.itemsize * 8), sp.Integer(int(dtype.kind == "i")),
                    sp.Integer(int(call.attrs["direction"] == "left")))
    reads = tuple(Read(k, broadcast_index(call.input(k).shape, out.rank)) for k in range(len(call.in_types)))
    return [Stmt(0, out.shape, reads, body)]


register(
    OpDef(
        name="bit_shift",
        inputs=("a", "s"),
        attrs={"direction": Attr("str", "left", "'left' or 'right'")},
        infer=_infer,
        reference=_reference,
        access=_access,
        doc="Elementwise a << s or a >> s (arithmetic for signed a) on integers, numpy broadcasting. "
            "Bits shifted past a's width are lost; a count outside [0, width) gives 0, or -1 for a "
            "negative a shifted right.",
    )
)
