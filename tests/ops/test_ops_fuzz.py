"""Arbitrary shapes, dtypes and attributes: every op either infers a type whose reference
(and access spec) agree with it, or rejects the call with a located ShapeError."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fusionlang.errors import ShapeError
from fusionlang.ir.types import TensorType
from fusionlang.ops import REGISTRY
from fusionlang.ops.registry import REQUIRED

OPS = REGISTRY.names()

_SHAPES = st.lists(st.integers(0, 4), max_size=4).map(tuple)
_DTYPES = st.sampled_from(["float32", "float32", "float32", "int64", "int32", "bool"])
_SMALL_INTS = st.integers(-4, 6)
_ATTR_VALUES = {
    "int": _SMALL_INTS,
    "float": st.floats(-3, 3, allow_nan=False),
    "str": st.sampled_from(["none", "tanh", "constant", "reflect", "edge", "wrap", "bogus"]),
    "ints": st.lists(_SMALL_INTS, max_size=6).map(tuple),
    "floats": st.lists(st.floats(-3, 3, allow_nan=False), max_size=4).map(tuple),
    "dtype": st.sampled_from(["float32", "int64", "bool", "float16", "int8"]),
    "tensor": st.sampled_from([np.zeros(1, np.float32), np.ones(1, np.int64), np.zeros(2, np.float32)]),
}


def _array(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("int"):
        return rng.integers(0, 4, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@st.composite
def calls(draw, op: str):
    opdef = REGISTRY.get(op)
    high = opdef.max_inputs if opdef.max_inputs is not None else opdef.min_inputs + 3
    count = draw(st.integers(opdef.min_inputs, high))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    arrays = [_array(rng, draw(_SHAPES), draw(_DTYPES)) for _ in range(count)]
    attrs = {}
    for name, spec in opdef.attrs.items():
        if spec.default is REQUIRED or draw(st.booleans()):
            attrs[name] = draw(_ATTR_VALUES[spec.kind])
    return arrays, attrs


@pytest.mark.parametrize("op", OPS)
@given(data=st.data())
def test_inference_accepts_or_rejects_cleanly(op, data):
    arrays, attrs = data.draw(calls(op), label="arrays, attrs")
    opdef = REGISTRY.get(op)
    types = [TensorType.of(a) for a in arrays]
    try:
        _, call = REGISTRY.call(op, "fuzzed", attrs, types, arrays)
        call.out_types = opdef.run_infer(call)
    except ShapeError as exc:
        assert "'fuzzed'" in str(exc)
        return
    with np.errstate(all="ignore"):
        try:
            results = opdef.reference(arrays, call.attrs)
        except IndexError:
            assert op == "gather"  # indices drawn at random may be out of range
            return
    assert [TensorType.of(r) for r in results] == call.out_types[:len(results)]
    assert len(results) >= opdef.num_outputs
    if opdef.access is not None:
        stmts = opdef.access(call)
        assert {s.output for s in stmts} <= set(range(len(call.out_types)))
