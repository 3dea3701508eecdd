"""QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear compiled to C (and CUDA,
emulated) against ONNX's reference: per tensor, per axis and blocked, integer and float8
types, and the forms and shapes import refuses."""

from __future__ import annotations

import re

import ml_dtypes  # noqa: F401  (the float8 dtype names)
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import fusionlang
import fusionlang.onnx_backend as backend
from fusionlang.cli import main
from fusionlang.errors import ModelError, ShapeError, UnsupportedOpError
from fusionlang.frontend import from_onnx
from fusionlang.ir.narrow_int import int_range
from onnx_cases import make_model

pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")

ELEM = {"uint8": TensorProto.UINT8, "int8": TensorProto.INT8, "uint4": TensorProto.UINT4, "int4": TensorProto.INT4,
        "float8_e4m3fn": TensorProto.FLOAT8E4M3FN,
        "float8_e4m3fnuz": TensorProto.FLOAT8E4M3FNUZ, "float8_e5m2": TensorProto.FLOAT8E5M2,
        "float8_e5m2fnuz": TensorProto.FLOAT8E5M2FNUZ}
X_SHAPE = (3, 4, 6)
#: scale (and zero point) shape and attributes of each layout
LAYOUTS = {"tensor": ((), {}), "axis": ((4,), {"axis": 1}), "negative_axis": ((6,), {"axis": -1}),
           "blocked": ((3, 2, 6), {"axis": 1, "block_size": 3}), "ragged_blocks": ((3, 4, 2), {"axis": 2,
                                                                                              "block_size": 4})}


def zero_point(dtype: str, shape, rng) -> np.ndarray:
    if dtype.startswith("float8"):
        return np.zeros(shape, dtype)  # ONNX wants float8 zero points to be 0
    low, high = int_range(dtype)
    return rng.integers(low // 4, high // 4 + 1, shape).astype(dtype)


def run_both(model, feeds, target="c"):
    with np.errstate(all="ignore"):
        want = ReferenceEvaluator(model).run(None, feeds)
    got = backend.prepare(model, target=target).run(feeds)
    return got, want


def assert_same_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8) if got.itemsize == 1 else got,
                                  want.view(np.uint8) if want.itemsize == 1 else want)


def quantize_model(dtype: str, layout: str, with_zero: bool, **extra):
    shape, attrs = LAYOUTS[layout]
    node = helper.make_node("QuantizeLinear", ["x", "scale"] + (["zero"] if with_zero else []), ["y"], name="q",
                            **attrs, **extra)
    inputs = {"x": (list(X_SHAPE), TensorProto.FLOAT), "scale": (list(shape), TensorProto.FLOAT)}
    if with_zero:
        inputs["zero"] = (list(shape), ELEM[dtype])
    return make_model([node], inputs, {"y": None}, 21), shape


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", list(ELEM))
@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_quantize_linear_matches_onnx(layout, dtype, target):
    with_zero = not dtype.startswith("float8") or layout == "tensor"
    extra = {} if with_zero or dtype == "uint8" else {"output_dtype": ELEM[dtype]}
    model, shape = quantize_model(dtype, layout, with_zero, **extra)
    rng = np.random.default_rng(len(layout) * 7 + len(dtype))
    feeds = {"x": (rng.standard_normal(X_SHAPE) * 40).astype(np.float32),
             "scale": rng.uniform(0.05, 0.5, shape).astype(np.float32)}
    # saturated (ONNX's reference rounds through int32: integer targets stay within its range)
    feeds["x"].flat[:4] = [np.inf, -np.inf, 1e9, -1e9] if dtype.startswith("float8") else [1e4, -1e4, 300, -300]
    if with_zero:
        feeds["zero"] = zero_point(dtype, shape, rng)
    got, want = run_both(model, feeds, target)
    assert_same_bits(got[0], want[0])


def test_a_quotient_rounds_to_float32_before_its_tie_is_broken():
    # 59.530518 / 0.6105694 is 97.49999897... exactly, but 97.5 in float32, as ONNX divides,
    # so ONNX gives 98; rounding the double quotient would give 97 (and likewise the others)
    model, _ = quantize_model("uint8", "tensor", False)
    pairs = [(59.530518, 0.6105694), (2.563256, 0.7323589), (1.5631421, 0.18389906), (47.233032, 0.5460466)]
    for x, s in pairs:
        feeds = {"x": np.full(X_SHAPE, x, np.float32), "scale": np.float32(s)}
        got, want = run_both(model, feeds)
        assert_same_bits(got[0], want[0])


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_integer_quantization_saturates_whatever_the_magnitude(dtype):
    # ONNX's reference converts the rounded quotient to int32, which wraps beyond 2**31 (inf
    # quantizes to 0 there); the definition, and onnxruntime, saturate
    model, _ = quantize_model(dtype, "tensor", True)
    x = np.resize(np.float32([np.inf, -np.inf, 3e38, -3e38, 1e12, -1e12, 2.5, -2.5]), X_SHAPE)
    feeds = {"x": x, "scale": np.float32(0.5), "zero": np.array(3, dtype)}
    got = backend.prepare(model, target="c").run(feeds)[0]
    info = np.iinfo(dtype)
    with np.errstate(invalid="ignore"):
        want = np.clip(np.rint(x.astype(np.float64) / 0.5) + 3, info.min, info.max).astype(dtype)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(fusionlang.reference.run(from_onnx(model), feeds)["y"], want)


@pytest.mark.parametrize("dtype", [d for d in ELEM if d.startswith("float8")])
def test_quantize_to_float8_without_saturation_overflows(dtype):
    model, _ = quantize_model(dtype, "tensor", False, output_dtype=ELEM[dtype], saturate=0)
    feeds = {"x": np.linspace(-1e6, 1e6, np.prod(X_SHAPE), dtype=np.float32).reshape(X_SHAPE),
             "scale": np.float32(2.0)}
    got, want = run_both(model, feeds)
    assert_same_bits(got[0], want[0])
    assert not np.isfinite(got[0].astype(np.float32)).all()


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", list(ELEM))
def test_dequantize_linear_matches_onnx(layout, dtype):
    shape, attrs = LAYOUTS[layout]
    node = helper.make_node("DequantizeLinear", ["x", "scale", "zero"], ["y"], name="dq", **attrs)
    model = make_model([node], {"x": (list(X_SHAPE), ELEM[dtype]), "scale": (list(shape), TensorProto.FLOAT),
                                "zero": (list(shape), ELEM[dtype])}, {"y": None}, 21)
    rng = np.random.default_rng(len(layout) + 3 * len(dtype))
    x = rng.integers(0, 256, X_SHAPE).astype(np.uint8)
    if dtype.startswith("float8"):
        x = np.where(np.isnan(x.view(dtype).astype(np.float32)), np.uint8(0x11), x)
    feeds = {"x": x.view(dtype), "scale": rng.uniform(0.05, 2, shape).astype(np.float32),
             "zero": zero_point(dtype, shape, rng)}
    got, want = run_both(model, feeds)
    assert_same_bits(got[0], want[0])


@pytest.mark.parametrize("scale", [1.0, 40.0, -3.0])
@pytest.mark.parametrize("offset", [0.0, 25.0, -25.0])
def test_dynamic_quantize_linear_matches_onnx(scale, offset):
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "y_scale", "y_zero_point"], name="dq")
    model = make_model([node], {"x": ([4, 5], TensorProto.FLOAT)}, {"y": None, "y_scale": None,
                                                                     "y_zero_point": None}, 11)
    x = (np.random.default_rng(5).standard_normal((4, 5)) * scale + offset).astype(np.float32)
    got, want = run_both(model, {"x": x})
    for g, w in zip(got, want):
        assert_same_bits(g, w)


def test_dynamic_quantize_linear_of_zeros_uses_scale_one_over_255():
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"], name="dq")
    model = make_model([node], {"x": ([3], TensorProto.FLOAT)}, {"y": None, "s": None, "z": None}, 11)
    got, want = run_both(model, {"x": np.zeros(3, np.float32)})
    for g, w in zip(got, want):
        assert_same_bits(g, w)


# ----- refused forms ------------------------------------------------------------------------
def test_a_scale_that_fits_no_layout_is_a_located_shape_error(tmp_path, capsys):
    node = helper.make_node("DequantizeLinear", ["x", "scale"], ["y"], name="dq", axis=1)
    model = make_model([node], {"x": ([3, 4], TensorProto.UINT8), "scale": ([3], TensorProto.FLOAT)}, {"y": None}, 21)
    message = ("node 'dq' (dequantize_linear): scale of shape [3] is neither one value nor one per element of "
               "axis 1 (size 4) of x u8[3,4]")
    with pytest.raises(ShapeError, match="^" + re.escape(message) + "$"):
        from_onnx(model)
    path = tmp_path / "dq.onnx"
    onnx.save(model, str(path))
    assert main(["fuse", str(path)]) == 2
    assert capsys.readouterr().err == f"fusionlang: error: {message}\n"


def test_blocks_that_do_not_cover_the_axis_are_refused():
    node = helper.make_node("QuantizeLinear", ["x", "scale"], ["y"], name="q", axis=0, block_size=2)
    inputs = {"x": ([5, 2], TensorProto.FLOAT), "scale": ([2, 2], TensorProto.FLOAT)}
    model = make_model([node], inputs, {"y": None}, 21)
    with pytest.raises(ShapeError, match=re.escape("scale of shape [2, 2] does not hold one value per block of 2 "
                                                   "along axis 0 of x f32[5,2] (expected [3, 2])")):
        from_onnx(model)


def test_an_output_dtype_other_than_the_zero_points_is_a_model_error():
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], name="q", output_dtype=TensorProto.INT8)
    model = make_model([node], {"x": ([3], TensorProto.FLOAT), "s": ([], TensorProto.FLOAT),
                                "z": ([], TensorProto.UINT8)}, {"y": None}, 21)
    with pytest.raises(ModelError, match="^node 'q' \\(QuantizeLinear\\): output_dtype int8 differs from the zero "
                                         "point's dtype uint8$"):
        from_onnx(model)


def test_a_division_precision_other_than_float32_is_unsupported():
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"], name="q", precision=TensorProto.FLOAT16)
    model = make_model([node], {"x": ([3], TensorProto.FLOAT), "s": ([], TensorProto.FLOAT)}, {"y": None}, 23)
    with pytest.raises(UnsupportedOpError, match=re.escape("QuantizeLinear (domain ai.onnx, opset 23) is not "
                                                           "supported in this form: precision=FLOAT16 (only FLOAT)")):
        from_onnx(model)


def test_the_interpreter_and_the_compiled_graph_agree_on_a_quantize_dequantize_chain():
    # QDQ as exporters write it: quantize, dequantize, then float arithmetic, fused
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
             helper.make_node("Relu", ["d"], ["y"])]
    model = make_model(nodes, {"x": ([8, 16], TensorProto.FLOAT)}, {"y": None}, 21,
                       {"s": np.float32(0.03), "z": np.int8(-4)})
    x = np.random.default_rng(2).standard_normal((8, 16)).astype(np.float32) * 3
    graph = from_onnx(model)
    compiled = fusionlang.compile(fusionlang.fuse(graph, fusionlang.load_rules("apollo")), target="c")
    np.testing.assert_array_equal(compiled.run({"x": x})["y"], fusionlang.reference.run(graph, {"x": x})["y"])
    np.testing.assert_array_equal(compiled.run({"x": x})["y"], ReferenceEvaluator(model).run(None, {"x": x})[0])


def test_dynamic_quantization_of_a_double_tensor_is_a_model_error():
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"], name="dq")
    model = make_model([node], {"x": ([3], TensorProto.DOUBLE)}, {"y": None, "s": None, "z": None}, 11)
    with pytest.raises(ModelError, match="^node 'dq' \\(DynamicQuantizeLinear\\): x must be a float32 tensor, "
                                         "got float64$"):
        from_onnx(model)
