"""Every elementwise unary and binary op and every reduction ONNX defines for float16,
bfloat16 and the integer types (and onnxruntime's CPU provider runs; numerics_sweep
lists the pairs left out and why), on extreme values: signed zeros, subnormals, the
largest values, infinities, NaN, an integer type's minimum and maximum. The compiled C
and the reference interpreter are each compared with onnxruntime, not only with each
other: both follow one op formula, and a bug in it would be shared.

One model per dtype holds all its ops, so each dtype compiles once."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fusionlang
from fusionlang.frontend import from_onnx
from fusionlang.testing.extremes import all_pairs, assert_same_numbers, drawn_arrays, edges
from numerics_sweep import (DTYPES, KNOWN_GAPS, build, candidates, expected, feeds_of, run_onnxruntime, session_of,
                            units)

@functools.cache
def prepared(dtype: str):
    """(onnxruntime session, imported graph, compiled program, output names) of the
    dtype's model on inputs [n, n], n the number of its edges."""
    kept, _ = units(dtype)
    model = build(dtype, kept, edges(dtype).size, float_outputs=True)
    graph = from_onnx(model)
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), target="c")
    return session_of(model), graph, compiled, [o.name for o in model.graph.output]


def differences(dtype: str, a: np.ndarray, b: np.ndarray) -> list[str]:
    """Each output where the reference or the C differs from onnxruntime, as a line."""
    session, graph, compiled, names = prepared(dtype)
    feeds = feeds_of(dtype, a, b)
    want = {name: expected(dtype, name, feeds, value)
            for name, value in zip(names, run_onnxruntime(session, dtype, feeds))}
    with np.errstate(all="ignore"):
        interpreted = fusionlang.reference.run(graph, feeds)
    ran = compiled.run(feeds)
    found = []
    for name in names:
        for who, got in (("reference", interpreted[name]), ("C", ran[name])):
            try:
                assert_same_numbers(np.asarray(got), want[name], f"{dtype} {name} ({who})",
                                    dtype="bfloat16" if name.endswith("_f32") else None)
            except AssertionError as e:
                found.append(str(e).splitlines()[0])
    return found


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_pair_of_edges_matches_onnxruntime(dtype):
    a, b = all_pairs(dtype)
    assert differences(dtype, a, b) == []


@given(st.sampled_from(DTYPES), st.data())  # (examples: the hypothesis profile's, conftest.py)
def test_drawn_extreme_rows_match_onnxruntime(dtype, data):
    n = edges(dtype).size
    a, b = (drawn_arrays(data.draw, dtype, (n, n)) for _ in range(2))
    assert differences(dtype, a, b) == []


@pytest.mark.xfail(strict=True, reason="known gaps (numerics_sweep.KNOWN_GAPS): each must still differ")
@pytest.mark.parametrize("dtype, unit_name", sorted(KNOWN_GAPS))
def test_known_gaps_still_differ_from_onnxruntime(dtype, unit_name):
    unit = next(u for u in candidates(dtype) if u[0] == unit_name)
    model = build(dtype, [unit], edges(dtype).size)
    a, b = all_pairs(dtype)
    feeds = feeds_of(dtype, a, b)
    want = run_onnxruntime(session_of(model), dtype, feeds)
    graph = from_onnx(model)
    got = fusionlang.compile(fusionlang.fuse(graph, "apollo"), target="c").run(feeds)
    for name, value in zip(graph.outputs, want):
        assert_same_numbers(got[name], value, f"{dtype} {name}")
