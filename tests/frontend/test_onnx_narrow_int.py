"""int4, uint4, int2 and uint2 as stored tensors: Cast and CastLike to and from them compiled to C (and
CUDA, emulated), bit for bit against fusionlang's definition of the conversion (ir.narrow_int: the low
bits of the truncated value) and, where its versions agree with it (values in range), against ONNX's
reference (ml_dtypes' conversions: 0.7 turns out-of-range floats into 0, 0.6 wrapped them)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import fusionlang
import fusionlang.onnx_backend as backend
from fusionlang.frontend import from_onnx
from fusionlang.ir.narrow_int import int_range, to_narrow_int
from onnx_cases import make_model

pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")

INT4 = {"int4": TensorProto.INT4, "uint4": TensorProto.UINT4, "int2": TensorProto.INT2, "uint2": TensorProto.UINT2}
WIDE = {"int4": ("int8", TensorProto.INT8), "uint4": ("uint8", TensorProto.UINT8),
        "int2": ("int8", TensorProto.INT8), "uint2": ("uint8", TensorProto.UINT8)}


def run_both(model, feeds, target="c"):
    with np.errstate(invalid="ignore"):
        want = ReferenceEvaluator(model).run(None, feeds)[0]
    got = backend.prepare(model, target=target).run(feeds)[0]
    interpreted = fusionlang.reference.run(from_onnx(model), feeds)[from_onnx(model).outputs[0]]
    return got, want, interpreted


@pytest.mark.parametrize("dtype", list(INT4))
@pytest.mark.parametrize("like", [False, True])
@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_float_and_wide_integers_cast_to_4_bits_by_wrapping(dtype, like, target):
    x = np.concatenate([np.arange(-20, 20, 0.5), [np.nan, np.inf, 1e12, -3e9]]).astype(np.float32).reshape(4, 21)
    if like:
        node = helper.make_node("CastLike", ["x", "like"], ["y"])
        inputs, feeds = {"x": ([4, 21], TensorProto.FLOAT), "like": ([1], INT4[dtype])}, {"x": x}
        feeds["like"] = np.zeros(1, getattr(ml_dtypes, dtype))
    else:
        node = helper.make_node("Cast", ["x"], ["y"], to=INT4[dtype])
        inputs, feeds = {"x": ([4, 21], TensorProto.FLOAT)}, {"x": x}
    got, onnx_reference, interpreted = run_both(make_model([node], inputs, {"y": None}, 25), feeds, target)
    want = to_narrow_int(x, dtype)
    assert got.dtype == onnx_reference.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    np.testing.assert_array_equal(interpreted.view(np.uint8), want.view(np.uint8))
    low, high = int_range(dtype)
    in_range = (x > low - 1) & (x < high + 1)
    np.testing.assert_array_equal(got.view(np.uint8)[in_range], onnx_reference.view(np.uint8)[in_range])


@pytest.mark.parametrize("dtype", list(INT4))
@pytest.mark.parametrize("to", ["float", "wide"])
def test_every_4_bit_value_casts_back_exactly(dtype, to):
    name, elem = ("float32", TensorProto.FLOAT) if to == "float" else WIDE[dtype]
    node = helper.make_node("Cast", ["x"], ["y"], to=elem)
    count = 16 if dtype.endswith("4") else 4
    model = make_model([node], {"x": ([2, count // 2], INT4[dtype])}, {"y": None}, 25)
    codes = np.arange(count, dtype=np.uint8).view(getattr(ml_dtypes, dtype)).reshape(2, count // 2)
    got, want, _ = run_both(model, {"x": codes})
    assert got.dtype == np.dtype(name)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", list(INT4))
def test_4_bit_reductions_start_at_the_types_extremes(dtype):
    # not valid ONNX (no 4-bit arithmetic), but the interpreter and the code agree on it
    nodes = [helper.make_node("ReduceMax", ["x"], ["hi"], axes=[1]),
             helper.make_node("ReduceMin", ["x"], ["lo"], axes=[1])]
    model = make_model(nodes, {"x": ([3, 16], INT4[dtype])}, {"hi": None, "lo": None}, 13)
    codes = np.random.default_rng(6).integers(0, 16 if dtype.endswith("4") else 4, (3, 16)).astype(np.uint8)
    x = codes.view(getattr(ml_dtypes, dtype))
    graph = from_onnx(model)
    want = fusionlang.reference.run(graph, {"x": x})
    got = backend.prepare(model, target="c").run({"x": x})
    for g, name in zip(got, graph.outputs):
        np.testing.assert_array_equal(g.view(np.uint8), want[name].view(np.uint8))
        extreme = x.astype(np.int32).max(1, keepdims=True) if name == "hi" else x.astype(np.int32).min(1, keepdims=True)
        np.testing.assert_array_equal(g.astype(np.int32), extreme)
