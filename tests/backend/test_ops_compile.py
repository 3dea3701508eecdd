"""Every op with an access spec, compiled alone to C, computes what its reference computes.

Inputs and attributes are drawn by the op strategies of tests/ops (shared with the access
spec tests), so each op is compiled over random shapes and attributes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "ops"))
from ops_strategies import STRATEGIES  # noqa: E402

import fusionlang.backend as backend  # noqa: E402
from fusionlang import reference  # noqa: E402
from fusionlang.engine.plan import per_node_plan  # noqa: E402
from fusionlang.ops import REGISTRY, GraphBuilder  # noqa: E402

ACCESS_OPS = [op.name for op in REGISTRY if op.access is not None]


def single_op_graph(op: str, inputs: list, attrs: dict):
    """A graph of one node: float arrays are graph inputs, the others constants."""
    b = GraphBuilder(op)
    names, feeds = [], {}
    for k, arr in enumerate(inputs):
        if arr is None:
            names.append(None)
        elif np.asarray(arr).dtype.kind == "f":
            names.append(b.input(f"in{k}", np.shape(arr), np.asarray(arr).dtype.name))
            feeds[names[-1]] = np.asarray(arr)
        else:
            names.append(b.constant(np.asarray(arr)))
    while names and names[-1] is None:
        names.pop()
    out = b.op(op, *names, **attrs)
    for value in (out if isinstance(out, tuple) else (out,)):
        b.output(value)
    return b.build(), feeds


def assert_matches(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for name, w in want.items():
        g = got[name]
        assert g.dtype == w.dtype and g.shape == w.shape, name
        if w.dtype == np.float16:  # one rounding to 16 bits of a float32 result that may differ by an ulp
            np.testing.assert_allclose(g, w, rtol=2e-3, atol=2e-3, equal_nan=True, err_msg=name)
        elif w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5, equal_nan=True, err_msg=name)
        elif w.dtype.kind == "V":  # ml_dtypes (bfloat16, float8, int4): exact, and NaN where the reference has NaN
            np.testing.assert_array_equal(g.astype(np.float32), w.astype(np.float32), err_msg=name)
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)


@pytest.mark.parametrize("op", ACCESS_OPS)
@settings(max_examples=6)
@given(data=st.data())
def test_op_compiles_to_c_and_matches_the_reference(op, data):
    inputs, attrs = data.draw(STRATEGIES[op], label="inputs, attrs")
    graph, feeds = single_op_graph(op, inputs, attrs)
    with np.errstate(all="ignore"):
        want = reference.run(graph, feeds)
    got = backend.compile(per_node_plan(graph)).run(feeds)
    assert_matches(got, want)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int32", "int64", "float32"])
@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
def test_max_and_min_over_an_empty_axis_start_at_the_dtypes_identity(op, dtype):
    # bool's max started at -INFINITY, stored as true
    b = GraphBuilder("empty")
    b.output(getattr(b, op)(b.input("x", (2, 0, 3), dtype), axes=[1], keepdims=1))
    graph = b.build()
    feeds = {"x": np.zeros((2, 0, 3), dtype)}
    got = backend.compile(per_node_plan(graph), "c").run(feeds)[graph.outputs[0]]
    np.testing.assert_array_equal(got, reference.run(graph, feeds)[graph.outputs[0]])
