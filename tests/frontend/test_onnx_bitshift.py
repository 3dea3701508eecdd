"""BitShift compiled to C (and CUDA, emulated) against ONNX's definition written with
Python integers, over each integer width the code generators support."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import fusionlang.onnx_backend as backend
from fusionlang.cli import main
from fusionlang.errors import FuseError, ModelError
from fusionlang.frontend import from_onnx
from onnx_cases import make_model

pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")

ELEM_TYPES = {"int8": TensorProto.INT8, "uint8": TensorProto.UINT8, "int32": TensorProto.INT32,
              "int64": TensorProto.INT64, "int16": TensorProto.INT16, "float32": TensorProto.FLOAT,
              "uint16": TensorProto.UINT16, "uint32": TensorProto.UINT32, "uint64": TensorProto.UINT64}


def shift_model(dtype: str, direction: str, shape=(4, 6)):
    node = helper.make_node("BitShift", ["a", "s"], ["y"], name="shift", direction=direction)
    elem = ELEM_TYPES[dtype]
    return make_model([node], {"a": (list(shape), elem), "s": (list(shape), elem)}, {"y": None}, 11)


def by_python_ints(a: np.ndarray, s: np.ndarray, left: bool) -> np.ndarray:
    """ONNX's BitShift on Python integers: the result wraps to the width, a count outside
    [0, width) gives 0 (or -1 for a negative value shifted right)."""
    info = np.iinfo(a.dtype)
    out = []
    for x, k in zip(a.ravel().tolist(), s.ravel().tolist()):
        if not 0 <= k < info.bits:
            out.append(-1 if x < 0 and not left else 0)
        elif left:
            wrapped = (x << k) % (1 << info.bits)
            out.append(wrapped - (1 << info.bits) if wrapped > info.max else wrapped)
        else:
            out.append(x >> k)
    return np.array(out, a.dtype).reshape(a.shape)


def feeds_for(dtype: str, seed: int):
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (4, 6), dtype=dtype, endpoint=True)
    a.flat[:3] = [info.min, info.max, 0]
    s = rng.integers(max(info.min, -3), info.bits + 3, (4, 6)).astype(dtype)
    s.flat[:3] = [info.bits - 1, 1, info.bits]
    return {"a": a, "s": s}


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64", "int16", "uint16", "uint32", "uint64"])
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_bit_shift_compiles_and_matches_the_definition(dtype, direction, target):
    feeds = feeds_for(dtype, seed=len(dtype))
    got = backend.prepare(shift_model(dtype, direction), target=target).run(feeds)[0]
    want = by_python_ints(feeds["a"], feeds["s"], direction == "LEFT")
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_a_constant_int64_operand_keeps_every_bit():
    # a scalar constant inlines into the kernel: as a double literal it would round past 2**53
    node = helper.make_node("BitShift", ["a", "s"], ["y"], name="shift", direction="LEFT")
    for value in (2526497193922298463, -(1 << 63), (1 << 62) + 1):
        a = np.array(value, np.int64)
        model = make_model([node], {"s": ([3], TensorProto.INT64)}, {"y": None}, 11, {"a": a})
        s = np.array([0, 1, 3], np.int64)
        got = backend.prepare(model, target="c").run({"s": s})[0]
        np.testing.assert_array_equal(got, by_python_ints(np.broadcast_to(a, (3,)).copy(), s, True))


def test_an_unknown_direction_is_a_model_error(tmp_path, capsys):
    model = shift_model("uint8", "UP")
    message = "node 'shift' (BitShift): direction='UP' should be 'LEFT' or 'RIGHT'"
    with pytest.raises(ModelError, match="^" + re.escape(message) + "$"):
        from_onnx(model)
    path = tmp_path / "shift.onnx"
    onnx.save(model, str(path))
    assert main(["fuse", str(path)]) == 2
    assert capsys.readouterr().err == f"fusionlang: error: {message}\n"


def test_float_operands_are_refused():
    with pytest.raises(FuseError, match=r"bit_shift needs integer inputs, got float32$"):
        from_onnx(shift_model("float32", "LEFT"))
