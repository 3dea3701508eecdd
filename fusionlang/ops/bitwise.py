"""Bitwise and, or, xor and not (ONNX BitwiseAnd/Or/Xor/Not) on integer tensors."""

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
from fusionlang.ops.registry import OpCall
from fusionlang.ops.scalar_numpy import bitwise


def _integers(call: OpCall, types: list[TensorType]) -> str:
    dtype = same_dtype(call, types)
    if np.dtype(dtype).kind not in "iu":
        raise call.fail(f"bitwise ops need integer inputs, got {dtype}")
    return dtype


for _kind, (_name, _doc) in enumerate((("bitwise_and", "a & b"), ("bitwise_or", "a | b"),
                                       ("bitwise_xor", "a ^ b"))):
    elementwise(
        _name,
        lambda v, a, k=_kind: scalar.Bitwise(v[0], v[1], sp.Integer(k)),
        lambda xs, a, k=_kind: bitwise(xs[0], xs[1], k),
        inputs=("a", "b"),
        dtype_rule=_integers,
        commutative=True,
        doc=f"Elementwise {_doc} on the bits of integer tensors, numpy broadcasting.",
    )

# ~a is a ^ -1: every bit flipped, in any width (the result wraps to the dtype)
elementwise(
    "bitwise_not",
    lambda v, a: scalar.Bitwise(v[0], sp.Integer(-1), sp.Integer(2)),
    lambda xs, a: bitwise(xs[0], -1, 2),
    dtype_rule=_integers,
    doc="Elementwise ~x: every bit of an integer tensor flipped.",
)
