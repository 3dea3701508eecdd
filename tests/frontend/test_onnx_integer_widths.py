"""ONNX models on int16, uint16, uint32 and uint64 import and compile to C: Cast between
every pair of integer widths wraps as ONNX's definition (NumPy's astype) does, and integer
Div and Mod by zero give 0 without a trap, as they do on int32."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import fusionlang.onnx_backend as backend
from onnx_cases import make_model

pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")

ELEM = {"int8": TensorProto.INT8, "uint8": TensorProto.UINT8, "int16": TensorProto.INT16,
        "uint16": TensorProto.UINT16, "int32": TensorProto.INT32, "uint32": TensorProto.UINT32,
        "int64": TensorProto.INT64, "uint64": TensorProto.UINT64}
NEW = ("int16", "uint16", "uint32", "uint64")


def edges(dtype: str) -> np.ndarray:
    info = np.iinfo(dtype)
    values = [0, 1, 2, info.max, info.max - 1, info.min, info.min + 1, (info.max >> 1) + 1, 255, 256, 65535, 65536]
    return np.array([min(max(v, info.min), info.max) for v in values], dtype)


@pytest.mark.parametrize("source", list(ELEM))
def test_cast_to_and_from_the_new_widths_wraps_like_astype(source):
    targets = [t for t in ELEM if source in NEW or t in NEW]
    nodes = [helper.make_node("Cast", ["x"], [f"to_{t}"], to=ELEM[t]) for t in targets]
    model = make_model(nodes, {"x": ([12], ELEM[source])}, {f"to_{t}": ([12], ELEM[t]) for t in targets}, 13)
    x = edges(source)
    got = backend.prepare(model, target="c").run({"x": x})
    for target, out in zip(targets, got):
        assert out.dtype == np.dtype(target)
        np.testing.assert_array_equal(out, x.astype(target), err_msg=f"{source} -> {target}")


@pytest.mark.parametrize("dtype", NEW)
@pytest.mark.parametrize("op", ["Div", "Mod"])
def test_integer_division_by_zero_gives_zero_without_a_trap(dtype, op):
    node = helper.make_node(op, ["a", "b"], ["y"], **({"fmod": 0} if op == "Mod" else {}))
    model = make_model([node], {"a": ([6], ELEM[dtype]), "b": ([6], ELEM[dtype])}, {"y": ([6], ELEM[dtype])}, 13)
    info = np.iinfo(dtype)
    a = np.array([7, info.max, info.min, 0, 9, info.max], dtype)
    b = np.array([0, 0, 0, 0, 2, info.max], dtype)
    got = backend.prepare(model, target="c").run({"a": a, "b": b})[0]
    want = [0 if q == 0 else _truncated(p, q) if op == "Div" else p % q for p, q in zip(a.tolist(), b.tolist())]
    np.testing.assert_array_equal(got, np.array(want, dtype))


def _truncated(p: int, q: int) -> int:
    return abs(p) // abs(q) * (1 if (p < 0) == (q < 0) else -1)
