"""FLOAT4E2M1 as a stored type: Cast to and from it, QuantizeLinear and DequantizeLinear,
compiled to C bit for bit against ONNX's reference (ml_dtypes' saturating conversion)."""

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


def run_both(model, feeds):
    with np.errstate(invalid="ignore", over="ignore"):
        want = ReferenceEvaluator(model).run(None, feeds)[0]
        interpreted = fusionlang.reference.run(from_onnx(model), feeds)
    got = backend.prepare(model, target="c").run(feeds)[0]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    np.testing.assert_array_equal(next(iter(interpreted.values())).view(np.uint8), want.view(np.uint8))
    return got


def test_cast_to_float4_rounds_and_saturates():
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT4E2M1)
    model = make_model([node], {"x": ([5, 8], TensorProto.FLOAT)}, {"y": None}, 23)
    x = np.concatenate([np.arange(-9, 9, 0.5), [np.nan, np.inf, -np.inf, 1e-30]]).astype(np.float32).reshape(5, 8)
    run_both(model, {"x": x})


def test_every_float4_value_casts_to_float32_exactly():
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)
    model = make_model([node], {"x": ([2, 8], TensorProto.FLOAT4E2M1)}, {"y": None}, 23)
    codes = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).reshape(2, 8)
    got = backend.prepare(model, target="c").run({"x": codes})[0]
    np.testing.assert_array_equal(got.view(np.uint32), codes.astype(np.float32).view(np.uint32))


@pytest.mark.parametrize("op", ["QuantizeLinear", "DequantizeLinear"])
def test_linear_quantization_with_float4(op):
    rng = np.random.default_rng(2)
    if op == "QuantizeLinear":
        x, elem = (rng.standard_normal((4, 6)) * 3).astype(np.float32), TensorProto.FLOAT
        extra = {"output_dtype": TensorProto.FLOAT4E2M1}
    else:
        x, elem = rng.integers(0, 16, (4, 6)).astype(np.uint8).view(ml_dtypes.float4_e2m1fn), TensorProto.FLOAT4E2M1
        extra = {}
    node = helper.make_node(op, ["x", "s"], ["y"], axis=0, block_size=2, **extra)
    model = make_model([node], {"x": ([4, 6], elem), "s": ([2, 6], TensorProto.FLOAT)}, {"y": None}, 23)
    run_both(model, {"x": x, "s": rng.uniform(0.2, 2, (2, 6)).astype(np.float32)})
