"""The float8 types as stored tensors: Cast and CastLike to and from them, saturating or
not, compiled to C (and to CUDA, emulated), bit for bit against ONNX's reference."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import fusionlang
import fusionlang.onnx_backend as backend
from fusionlang.frontend import from_onnx
from onnx_cases import make_model

pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")

FLOAT8 = {"float8_e4m3fn": TensorProto.FLOAT8E4M3FN, "float8_e4m3fnuz": TensorProto.FLOAT8E4M3FNUZ,
          "float8_e5m2": TensorProto.FLOAT8E5M2, "float8_e5m2fnuz": TensorProto.FLOAT8E5M2FNUZ}


def wide_floats(dtype: str) -> np.ndarray:
    """Values across and beyond the float8 range: ties, overflow, infinities, NaN, zeros."""
    limit = float(ml_dtypes.finfo(dtype).max)
    rng = np.random.default_rng(3)
    special = [0.0, -0.0, np.nan, np.inf, -np.inf, limit, -limit, limit * 1.06, limit * 1.2, -limit * 4,
               1e-6, -3e-3, 0.1, 1.5, 2.25, 3.1e38]
    spread = rng.standard_normal(48) * rng.choice([1e-3, 1.0, limit / 4, limit], 48)
    return np.float32(special + list(spread)).reshape(8, 8)


def cast_model(source: int, target: int, saturate: int | None, like: bool = False):
    extra = {} if saturate is None else {"saturate": saturate}
    if like:
        node = helper.make_node("CastLike", ["x", "like"], ["y"], name="cast", **extra)
        inputs = {"x": ([8, 8], source), "like": ([1], target)}
    else:
        node = helper.make_node("Cast", ["x"], ["y"], name="cast", to=target, **extra)
        inputs = {"x": ([8, 8], source)}
    return make_model([node], inputs, {"y": None}, 21)


def bits(array: np.ndarray) -> np.ndarray:
    return np.asarray(array).view(np.uint8 if np.asarray(array).itemsize == 1 else np.uint32)


@pytest.mark.parametrize("dtype", list(FLOAT8))
@pytest.mark.parametrize("saturate", [None, 0, 1])
@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_cast_to_float8_rounds_and_saturates_as_onnx(dtype, saturate, target):
    model = cast_model(TensorProto.FLOAT, FLOAT8[dtype], saturate)
    x = wide_floats(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        want = ReferenceEvaluator(model).run(None, {"x": x})[0]
        got = backend.prepare(model, target=target).run({"x": x})[0]
        interpreted = fusionlang.reference.run(from_onnx(model), {"x": x})["y"]
    assert got.dtype == want.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(bits(got), bits(want))
    np.testing.assert_array_equal(bits(interpreted), bits(want))


@pytest.mark.parametrize("dtype", list(FLOAT8))
def test_castlike_without_saturation_overflows_to_nan_or_infinity(dtype):
    model = cast_model(TensorProto.FLOAT, FLOAT8[dtype], 0, like=True)
    feeds = {"x": wide_floats(dtype), "like": np.zeros(1, dtype)}
    with np.errstate(over="ignore", invalid="ignore"):
        want = ReferenceEvaluator(model).run(None, feeds)[0]
        got = backend.prepare(model, target="c").run(feeds)[0]
    np.testing.assert_array_equal(bits(got), bits(want))
    beyond = np.abs(feeds["x"]) > float(ml_dtypes.finfo(dtype).max) * 1.1  # (0.7: max is a float8 scalar)
    assert not np.isfinite(got.astype(np.float32)[beyond]).any()  # not clamped


@pytest.mark.parametrize("dtype", list(FLOAT8))
def test_every_float8_value_casts_to_float32_exactly(dtype):
    model = cast_model(FLOAT8[dtype], TensorProto.FLOAT, None)
    for chunk in range(4):
        x = (np.arange(64, dtype=np.uint8) + 64 * chunk).view(dtype).reshape(8, 8)
        got = backend.prepare(model, target="c").run({"x": x})[0]
        np.testing.assert_array_equal(got, x.astype(np.float32))


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceSum"])
def test_float8_reductions_accumulate_in_float32_like_the_interpreter(op):
    # not valid ONNX (no float8 arithmetic), but nothing stops a graph from asking
    node = helper.make_node(op, ["x"], ["y"], name="r", keepdims=0, axes=[1])
    model = make_model([node], {"x": ([3, 100, 7], TensorProto.FLOAT8E4M3FN)}, {"y": None}, 12)
    x = np.random.default_rng(1).integers(0, 0x60, (3, 100, 7)).astype(np.uint8).view(ml_dtypes.float8_e4m3fn)
    got = backend.prepare(model, target="c").run({"x": x})[0]
    want = fusionlang.reference.run(from_onnx(model), {"x": x})["y"]
    np.testing.assert_array_equal(bits(got), bits(want))
