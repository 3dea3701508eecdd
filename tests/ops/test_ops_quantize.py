"""quantize_linear and dequantize_linear reject what they cannot compute with a located,
pinned message (the layouts themselves: tests/frontend/test_onnx_quantize.py)."""

from __future__ import annotations

import re

import pytest

from fusionlang.errors import ShapeError
from fusionlang.ir.types import TensorType
from fusionlang.ops import REGISTRY

X, S = TensorType((2, 3)), TensorType(())
# (op, input types, attrs, message after "node 'n1' (op)")
REJECTED = [
    ("quantize_linear", [TensorType((2, 3), "int32"), S], {}, ": x and scale must both be float32 or float64 tensors, "
                                                              "got int32 and float32"),
    ("quantize_linear", [X, TensorType((), "float64")], {}, ": x and scale must both be float32 or float64 tensors, "
                                                            "got float32 and float64"),
    ("quantize_linear", [X, S], {"to": "int32"}, ": to=int32 is not a quantized type (uint8, int8, uint16, int16, "
                                                 "uint4, int4, uint2, int2, float8 or float4)"),
    ("quantize_linear", [X, S, TensorType((), "int8")], {}, ": zero_point i8[] is not of the target dtype uint8"),
    ("quantize_linear", [X, TensorType((3,)), TensorType((2,), "uint8")], {},
     ": zero_point u8[2] and scale f32[3] differ in shape"),
    ("quantize_linear", [X, S], {"block_size": -1}, ": block_size=-1 must not be negative"),
    ("quantize_linear", [X, TensorType((3,))], {"axis": 2}, ": axis=2 is out of range for rank 2"),
    ("dequantize_linear", [X, S], {}, ": x must be a quantized tensor (uint8, int8, uint16, int16, uint4, int4, "
                                      "uint2, int2, float8 or float4), got float32"),
    ("dequantize_linear", [TensorType((2, 3), "uint8"), TensorType((), "int32")], {},
     ": scale must be a float tensor, got int32"),
    ("dequantize_linear", [TensorType((2, 3), "uint8"), S, TensorType((), "int8")], {},
     ": zero_point i8[] and x u8[2,3] differ in dtype"),
]


@pytest.mark.parametrize("op, types, attrs, message", REJECTED, ids=[f"{r[0]}:{r[3][2:40]}" for r in REJECTED])
def test_quantization_rejects_with_a_pinned_message(op, types, attrs, message):
    with pytest.raises(ShapeError, match="^" + re.escape(f"node 'n1' ({op})" + message) + "$"):
        REGISTRY.infer(op, "n1", attrs, types)
