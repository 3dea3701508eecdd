"""Integer Add, Sub and Mul wrap as ONNX (and NumPy, and onnxruntime) define, for every
integer type, compiled to C and in the reference interpreter: uint16 65535 * 65535 is 1
(C promoted the operands to int, and the statement multiplied them as doubles: a product
past 2**32 converted to uint16 is undefined, x86 gave 0)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import fusionlang
from fusionlang.frontend import from_onnx

DTYPES = {"int8": TensorProto.INT8, "uint8": TensorProto.UINT8, "int16": TensorProto.INT16,
          "uint16": TensorProto.UINT16, "int32": TensorProto.INT32, "uint32": TensorProto.UINT32,
          "int64": TensorProto.INT64, "uint64": TensorProto.UINT64}
OPS = ("Add", "Sub", "Mul")
SIZE = 16


def model(op: str, dtype: str):
    elem = DTYPES[dtype]
    graph = helper.make_graph([helper.make_node(op, ["a", "b"], ["y"])], "wrap",
                              [helper.make_tensor_value_info(n, elem, [SIZE]) for n in "ab"],
                              [helper.make_tensor_value_info("y", elem, [SIZE])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m


def edges(dtype: str) -> list[int]:
    info = np.iinfo(dtype)
    return sorted({0, 1, 2, 3, int(info.max), int(info.max) - 1, int(info.min), int(info.min) + 1,
                   (int(info.max) >> 1) + 1, int(info.max) >> 1})


def assert_wraps_like_onnxruntime(op: str, dtype: str, a: np.ndarray, b: np.ndarray) -> None:
    import onnxruntime

    m = model(op, dtype)
    want = onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]) \
        .run(None, {"a": a, "b": b})[0]
    graph = from_onnx(m)
    interpreted = fusionlang.reference.run(graph, {"a": a, "b": b})["y"]
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), target="c").run({"a": a, "b": b})["y"]
    np.testing.assert_array_equal(interpreted, want)
    np.testing.assert_array_equal(compiled, want)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("op", OPS)
def test_the_edges_of_each_type_wrap(op, dtype):
    values = edges(dtype)
    pairs = [(x, y) for x in values for y in values]
    a = np.array([x for x, _ in pairs], dtype)
    b = np.array([y for _, y in pairs], dtype)
    for start in range(0, len(pairs) - SIZE + 1, SIZE):
        assert_wraps_like_onnxruntime(op, dtype, a[start:start + SIZE], b[start:start + SIZE])


def test_uint16_square_of_the_largest_is_one():
    a = np.full(SIZE, 65535, np.uint16)
    assert_wraps_like_onnxruntime("Mul", "uint16", a, a)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(OPS), st.sampled_from(list(DTYPES)), st.data())
def test_drawn_values_wrap(op, dtype, data):
    info = np.iinfo(dtype)
    value = st.one_of(st.sampled_from(edges(dtype)), st.integers(int(info.min), int(info.max)))
    a = np.array(data.draw(st.lists(value, min_size=SIZE, max_size=SIZE)), dtype)
    b = np.array(data.draw(st.lists(value, min_size=SIZE, max_size=SIZE)), dtype)
    assert_wraps_like_onnxruntime(op, dtype, a, b)


SPECIAL_FLOATS = np.float32([np.nan, np.inf, -np.inf, -3.4e38, 3.4e38, -1.5, 2.5, 1e10, -1e10, 300.7,
                             1e19, 9.3e18, 1.8e19, 1.9e19, -0.0, 0.9])


def test_floats_past_uint64_cast_as_onnxruntime_does():
    """C leaves them undefined: the C gave UINT64_MAX for NaN and infinities, the reference
    and onnxruntime 2**63 and 0."""
    import onnxruntime

    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.UINT64)
    graph = helper.make_graph([node], "cast", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT64, [16])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    want = onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]) \
        .run(None, {"x": SPECIAL_FLOATS})[0]
    g = from_onnx(m)
    np.testing.assert_array_equal(fusionlang.reference.run(g, {"x": SPECIAL_FLOATS})["y"], want)
    np.testing.assert_array_equal(fusionlang.compile(fusionlang.fuse(g, "apollo"), "c").run({"x": SPECIAL_FLOATS})["y"],
                                  want)
