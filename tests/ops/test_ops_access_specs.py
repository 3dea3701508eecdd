"""The loop form of every op (its access spec, run by spec_eval) computes its reference.

This checks the statements the polyhedral layer fuses and the backend compiles against
the NumPy semantics, op by op, over random shapes and attributes.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from ops_strategies import STRATEGIES

from fusionlang.ir.types import TensorType
from fusionlang.ops import REGISTRY
from fusionlang.ops.spec_eval import run_stmts

ACCESS_OPS = [op.name for op in REGISTRY if op.access is not None]


def _trimmed(inputs: list) -> list:
    while inputs and inputs[-1] is None:
        inputs = inputs[:-1]
    return inputs


def evaluate_both(op: str, inputs: list, attrs: dict) -> tuple[list, list, list]:
    """(spec_eval result, reference result, inferred types) of one call."""
    opdef = REGISTRY.get(op)
    types = [None if a is None else TensorType.of(a) for a in inputs]
    _, call = REGISTRY.call(op, "n", attrs, types, inputs)
    call.out_types = opdef.run_infer(call)
    stmts = opdef.access(call)
    with np.errstate(all="ignore"):
        got = run_stmts(stmts, inputs, call.out_types)
        want = opdef.reference(_trimmed(inputs), call.attrs)
    return got, want, call.out_types


def assert_close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "f":
        tol = 2e-3 if got.dtype == np.float16 else 2e-5
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ACCESS_OPS)
@given(data=st.data())
def test_access_spec_computes_the_reference(op, data):
    inputs, attrs = data.draw(STRATEGIES[op], label="inputs, attrs")
    got, want, types = evaluate_both(op, inputs, attrs)
    assert len(got) == len(want) == len(types)
    for g, w, t in zip(got, want, types):
        assert TensorType.of(w) == t
        assert_close(g, w)


def test_every_access_spec_has_a_strategy():
    assert sorted(set(ACCESS_OPS) - set(STRATEGIES)) == []
    assert sorted(set(STRATEGIES) - set(ACCESS_OPS)) == []
