"""Zeros keep the sign IEEE and onnxruntime give them, in the reference interpreter and the
compiled C, and a few other values where both parted from onnxruntime (float32 here;
test_onnx_extreme_values sweeps the 16-bit and integer types). Each case compares the
sign bits with onnxruntime's, not only the values: -0.0 == 0.0."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import fusionlang
from fusionlang.frontend import from_onnx
from fusionlang.testing.extremes import assert_same_numbers
from onnx_cases import make_model, run_onnxruntime

Z = np.float32([-0.0, 0.0, -0.0, 0.0])


def assert_like_onnxruntime(model, feeds: dict[str, np.ndarray]) -> None:
    want = run_onnxruntime(model, feeds)
    graph = from_onnx(model)
    with np.errstate(all="ignore"):
        interpreted = fusionlang.reference.run(graph, feeds)
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), target="c").run(feeds)
    for name, value in zip(graph.outputs, want):
        assert_same_numbers(interpreted[name], value, f"{name} (reference)")
        assert_same_numbers(compiled[name], value, f"{name} (C)")


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
def test_a_running_sum_of_minus_zeros(exclusive, reverse):
    """An inclusive one is -0 (the C started at +0, and OpenMP's reduction(+) starts its
    lanes at +0); an exclusive one starts at +0, as onnxruntime's does."""
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    model = make_model([node], {"x": [4]}, {"y": [4]}, 14, {"axis": np.int64(0)})
    assert_like_onnxruntime(model, {"x": np.float32([-0.0, -0.0, -0.0, -0.0])})
    assert_like_onnxruntime(model, {"x": np.float32([-0.0, 0.0, -0.0, 1.0])})


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean"])
@pytest.mark.parametrize("width", [3, 256])  # 256: the loop the C splits into four sums
def test_a_sum_of_minus_zeros_is_minus_zero(op, width):
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)
    model = make_model([node], {"x": [2, width]}, {"y": [2]}, 18, {"axes": np.int64([1])})
    x = np.full((2, width), -0.0, np.float32)
    x[1, 1] = 0.0
    assert_like_onnxruntime(model, {"x": x})


def test_a_sum_of_nothing_is_plus_zero():
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)
    model = make_model([node], {"x": [2, 0]}, {"y": [2]}, 18, {"axes": np.int64([1])})
    assert_like_onnxruntime(model, {"x": np.zeros((2, 0), np.float32)})


@pytest.mark.parametrize("exponent", [0.5, 2.0, 3.0, -1.0])
def test_pow_of_minus_zero(exponent):
    """pow(-0, 0.5) is +0 (NumPy and C compute x ** 0.5 as sqrt, which gives -0)."""
    model = make_model([helper.make_node("Pow", ["x", "e"], ["y"])], {"x": [4]}, {"y": [4]}, 15,
                       {"e": np.float32(exponent)})
    assert_like_onnxruntime(model, {"x": Z})


@pytest.mark.parametrize("low, high", [(-0.0, 1.0), (-1.0, -0.0), (-0.0, -0.0)])
def test_a_clip_bound_of_minus_zero(low, high):
    model = make_model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], {"x": [6]}, {"y": [6]}, 13,
                       {"lo": np.float32(low), "hi": np.float32(high)})
    assert_like_onnxruntime(model, {"x": np.float32([-0.0, 0.0, -2.0, 2.0, -np.inf, np.nan])})


def test_relu_keeps_minus_zero():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": [4]}, {"y": [4]}, 14)
    assert_like_onnxruntime(model, {"x": Z})


def test_batch_norm_applies_scale_and_shift_as_onnxruntime():
    """x * k + (bias - mean * k): (x - mean) * k + bias gave -0 where onnxruntime gives +0.
    The statistics are inputs, so nothing folds them away."""
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])
    model = make_model([node], {"x": [1, 2, 4], "s": [2], "b": [2], "m": [2], "v": [2]}, {"y": [1, 2, 4]}, 15)
    feeds = {"x": np.float32([[[-0.0, 0.0, 1, -1], [0.0, -0.0, 1, -1]]]), "s": np.float32([1, -1]),
             "b": np.float32([-0.0, -0.0]), "m": np.float32([0, 0]), "v": np.float32([1, 1])}
    assert_like_onnxruntime(model, feeds)


def test_batch_norm_of_constant_statistics_adds_its_zero_shift():
    """With the statistics constant the shift folds to +0, and simplify's add_zero dropped
    x + 0 (-0.0 + 0 is +0): it now keeps a float one."""
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])
    inits = {"s": np.float32([1, -1]), "b": np.float32([-0.0, -0.0]), "m": np.float32([0, 0]),
             "v": np.float32([1, 1])}
    model = make_model([node], {"x": [1, 2, 4]}, {"y": [1, 2, 4]}, 15, inits)
    assert_like_onnxruntime(model, {"x": np.float32([[[-0.0, 0.0, 1, -1], [0.0, -0.0, 1, -1]]])})


@pytest.mark.parametrize("scale", [[0.0, -0.0], [1.0, -1.0]])
def test_instance_norm_applies_scale_and_shift_as_onnxruntime(scale):
    node = helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"])
    model = make_model([node], {"x": [1, 2, 4]}, {"y": [1, 2, 4]}, 15,
                       {"s": np.float32(scale), "b": np.float32([-0.0, -0.0])})
    assert_like_onnxruntime(model, {"x": np.float32([[[1, 2, 3, 4], [2, 2, 2, 2]]])})
    assert_like_onnxruntime(model, {"x": np.float32([[[0.0, -0.0, 1, -1], [-0.0, -0.0, -0.0, -0.0]]])})


@pytest.mark.parametrize("dtype, elem", [("float32", TensorProto.FLOAT), ("float64", TensorProto.DOUBLE)])
def test_floats_past_uint32_cast_as_onnxruntime_does(dtype, elem):
    """NumPy's and onnxruntime's x86 conversion; C leaves them undefined (AVX-512 code
    gave 4294967295 for each)."""
    x = np.array([np.nan, np.inf, -np.inf, -1e10, 1e10, 5e9, -5e9, 3e9, -3e9, 2.2e9, -2.2e9, 1e19, -7e4,
                  4294967040.0, 2147483648.0, -0.9], dtype)
    model = make_model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.UINT32)], {"x": ([16], elem)},
                       {"y": ([16], TensorProto.UINT32)}, 19)
    assert_like_onnxruntime(model, {"x": x})


@pytest.mark.parametrize("dtype, elem", [("int64", TensorProto.INT64), ("uint64", TensorProto.UINT64)])
def test_a_64_bit_clip_bound_stays_exact(dtype, elem):
    """A bound of 2**62 - 1 went through a float attribute (2**62), and the C compared and
    chose in double, which also rounded the values passed through."""
    high = (1 << 62) - 1
    model = make_model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], {"x": ([4], elem)}, {"y": ([4], elem)},
                       13, {"lo": np.array(3, dtype), "hi": np.array(high, dtype)})
    assert_like_onnxruntime(model, {"x": np.array([1 << 62, high, (1 << 62) - 3, 1], dtype)})


def test_a_float16_product_has_no_intermediate_underflow():
    """[6e-8] * 10 then -inf: in float32 the running product underflows to 0 and gives NaN
    (onnxruntime's answer; the C's SIMD lanes gave NaN or -inf by their order); in double it
    stays -inf, the product's value, as the reference computes it (a decision pinned here)."""
    node = helper.make_node("ReduceProd", ["x", "axes"], ["y"], keepdims=0)
    model = make_model([node], {"x": ([2, 16], TensorProto.FLOAT16)}, {"y": ([2], TensorProto.FLOAT16)}, 18,
                       {"axes": np.int64([1])})
    x = np.array([[6e-8] * 10 + [-np.inf] + [1] * 5, [300] * 8 + [1e-3] * 8], np.float16)
    assert np.isnan(run_onnxruntime(model, {"x": x})[0][0])
    want = np.prod(x.astype(np.float64), axis=1).astype(np.float16)
    graph = from_onnx(model)
    assert_same_numbers(fusionlang.reference.run(graph, {"x": x})["y"], want, "reference")
    assert_same_numbers(fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c").run({"x": x})["y"], want, "C")


def test_a_float16_running_sum_runs_in_float32():
    """-32752, 0.0002, 32752: 0 in float32 (onnxruntime, the C), 0.0002 in the reference's
    double, which the float16 result kept."""
    node = helper.make_node("CumSum", ["x", "axis"], ["y"])
    model = make_model([node], {"x": ([3], TensorProto.FLOAT16)}, {"y": ([3], TensorProto.FLOAT16)}, 14,
                       {"axis": np.int64(0)})
    assert_like_onnxruntime(model, {"x": np.array([-32752, 1.7833709716796875e-4, 32752], np.float16)})
