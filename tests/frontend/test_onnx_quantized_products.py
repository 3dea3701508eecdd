"""MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv, written with fusionlang ops,
compiled to C against ONNX's reference, exactly: zero points per tensor, per row or column,
per output channel; per-channel scales; bias; padding, strides and groups."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import fusionlang.onnx_backend as backend
from onnx_cases import make_model

pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")

ELEM = {"uint8": TensorProto.UINT8, "int8": TensorProto.INT8, "int32": TensorProto.INT32,
        "float32": TensorProto.FLOAT}


def quantized(rng, shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


def check(op_type, named, attrs=None, want=None):
    """Run one node whose inputs are ``named`` {name: array} (in order; None: omitted);
    ``want``: the result, where ONNX's reference lacks the form."""
    names = [name if array is not None else "" for name, array in named.items()]
    node = helper.make_node(op_type, names, ["y"], name="n", **(attrs or {}))
    inputs = {name: (list(a.shape), ELEM[a.dtype.name]) for name, a in named.items() if a is not None}
    model = make_model([node], inputs, {"y": None}, 21)
    feeds = {name: a for name, a in named.items() if a is not None}
    want = ReferenceEvaluator(model).run(None, feeds)[0] if want is None else want
    got = backend.prepare(model, target="c").run(feeds)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("a_dtype, b_dtype", [("uint8", "uint8"), ("int8", "int8"), ("uint8", "int8")])
@pytest.mark.parametrize("zeros", ["none", "tensor", "row_and_column"])
def test_matmul_integer(a_dtype, b_dtype, zeros):
    rng = np.random.default_rng(len(zeros))
    a, b = quantized(rng, (5, 7), a_dtype), quantized(rng, (7, 3), b_dtype)
    a_zero = {"none": None, "tensor": quantized(rng, (), a_dtype), "row_and_column": quantized(rng, (5,), a_dtype)}
    b_zero = {"none": None, "tensor": quantized(rng, (), b_dtype), "row_and_column": quantized(rng, (3,), b_dtype)}
    want = None
    if zeros == "row_and_column":  # ONNX's reference subtracts a 1-D a_zero_point per column, not per row
        want = (a.astype(np.int32) - a_zero[zeros][:, None]) @ (b.astype(np.int32) - b_zero[zeros])
    check("MatMulInteger", {"a": a, "b": b, "a_zero": a_zero[zeros], "b_zero": b_zero[zeros]}, want=want)


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("shapes", [((4, 6), (6, 3)), ((2, 4, 6), (2, 6, 3))])
@pytest.mark.parametrize("per_row", [False, True])
def test_qlinear_matmul(dtype, shapes, per_row):
    rng = np.random.default_rng(3)
    a_shape, b_shape = shapes
    rows = a_shape[-2]
    a_scale = rng.uniform(0.01, 0.1, (rows,) if per_row else ()).astype(np.float32)
    a_zero = quantized(rng, (rows,) if per_row else (), dtype) // 4
    named = {"a": quantized(rng, a_shape, dtype), "a_scale": a_scale, "a_zero": a_zero,
             "b": quantized(rng, b_shape, dtype), "b_scale": np.float32(0.03),
             "b_zero": quantized(rng, (), dtype) // 4, "y_scale": np.float32(0.4),
             "y_zero": quantized(rng, (), dtype) // 4}
    want = None
    if per_row:  # ONNX's reference takes no per-row a: the definition, as it computes the rest
        n = named
        row = (slice(None), None)
        product = (n["a"].astype(np.int32) - n["a_zero"][row]) @ (n["b"].astype(np.int32) - n["b_zero"])
        scaled = product * (n["a_scale"][row] * n["b_scale"] / n["y_scale"]) + n["y_zero"]
        info = np.iinfo(dtype)
        want = np.clip(np.rint(scaled), info.min, info.max).astype(dtype)
    check("QLinearMatMul", named, want=want)


@pytest.mark.parametrize("attrs", [{}, {"pads": [1, 0, 1, 2], "strides": [2, 1]}, {"auto_pad": "SAME_UPPER"},
                                   {"group": 2, "dilations": [2, 1]}])
@pytest.mark.parametrize("per_channel", [False, True])
def test_conv_integer(attrs, per_channel):
    rng = np.random.default_rng(len(attrs))
    group = attrs.get("group", 1)
    x, w = quantized(rng, (2, 4, 6, 5), "uint8"), quantized(rng, (6, 4 // group, 3, 2), "uint8")
    w_zero = quantized(rng, (6,) if per_channel else (), "uint8")
    check("ConvInteger", {"x": x, "w": w, "x_zero": quantized(rng, (), "uint8"), "w_zero": w_zero}, attrs)


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_qlinear_conv(dtype, per_channel, bias):
    rng = np.random.default_rng(7)
    channels = (6,) if per_channel else ()
    check("QLinearConv", {
        "x": quantized(rng, (1, 3, 7, 7), dtype), "x_scale": np.float32(0.02), "x_zero": quantized(rng, (), dtype) // 4,
        "w": quantized(rng, (6, 3, 3, 3), dtype), "w_scale": rng.uniform(0.005, 0.05, channels).astype(np.float32),
        "w_zero": np.zeros(channels, dtype), "y_scale": np.float32(0.7), "y_zero": quantized(rng, (), dtype) // 4,
        "bias": rng.integers(-3000, 3000, (6,)).astype(np.int32) if bias else None,
    }, {"pads": [1, 1, 1, 1]})
