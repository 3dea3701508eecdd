"""float16 and bfloat16 graphs compile to C (and to CUDA, run emulated) and agree with the
reference interpreter: stored in 16 bits, computed in float32, rounded once per stored
value (backend.half), as the reference rounds once per op."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from helpers import softmax
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import graphs

import fusionlang.backend as backend
from fusionlang import reference
from fusionlang.api import compile_model
from fusionlang.engine.plan import per_node_plan, single_group_plan
from fusionlang.ops import GraphBuilder
from fusionlang.testing.values import compare, magnitude

HALF = ["float16", "bfloat16"]


def assert_matches_reference(plan, feeds, target="c"):
    got = backend.compile(plan, target).run(feeds)
    want = reference.run(plan.graph, feeds)
    scale = magnitude(list(feeds.values()) + list(want.values()))
    for name in want:
        assert got[name].dtype == want[name].dtype, name
        mismatch = compare(want[name], got[name], scale=scale)
        assert mismatch is None, f"{name}: {mismatch}"


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(HALF).flatmap(lambda dtype: graphs(dtype=dtype)), st.booleans())
def test_random_half_graphs_match_reference(case, fused):
    graph, feeds = case
    assert_matches_reference(single_group_plan(graph) if fused else per_node_plan(graph), feeds)


def _row_block(dtype: str):
    """softmax and a row sum of 300-element rows: reductions in float32 accumulators."""
    b = GraphBuilder("rows")
    x = b.input("x", (3, 300), dtype)
    y = b.input("y", (3, 300), dtype)
    s = b.add(b.tanh(x), y)
    b.output(softmax(b, s), b.reduce_sum(x, axes=[1], keepdims=0))
    graph = b.build()
    rng = np.random.default_rng(1)
    return graph, {name: rng.standard_normal((3, 300)).astype(dtype) for name in ("x", "y")}


@pytest.mark.parametrize("dtype", HALF)
def test_half_rows_fused_and_unfused(dtype):
    graph, feeds = _row_block(dtype)
    assert_matches_reference(single_group_plan(graph), feeds)
    assert_matches_reference(per_node_plan(graph), feeds)


@pytest.mark.parametrize("dtype", HALF)
def test_half_rows_on_emulated_cuda(dtype):
    graph, feeds = _row_block(dtype)
    assert_matches_reference(single_group_plan(graph), feeds, "cuda-emu")


@pytest.mark.parametrize("dtype", HALF)
def test_half_arrays_are_16_bit_patterns_in_c(dtype):
    graph, _ = _row_block(dtype)
    text = backend.compile(single_group_plan(graph)).sources
    widen, narrow = {"float16": ("fl_h2f(", "fl_f2h("), "bfloat16": ("fl_bf2f(", "fl_f2bf(")}[dtype]
    assert "const unsigned short* restrict" in text
    assert widen in text and narrow in text


@pytest.mark.parametrize("dtype", HALF)
def test_stores_round_to_nearest_even_overflow_and_subnormals(dtype):
    """x * 1 stores exactly what the reference's rounding gives, at the edges of the
    format: overflow to inf, the smallest subnormals, ties, NaN and signed zeros."""
    info = ml_dtypes.finfo(dtype)
    tie_above_max = np.float32(2.0 ** info.maxexp * (1 - 2.0 ** -(info.nmant + 2)))  # rounds to even: inf
    wide = np.array([tie_above_max, np.nextafter(tie_above_max, np.float32(0)), -tie_above_max,
                     float(info.smallest_subnormal) * 0.5,
                     float(info.smallest_subnormal) * 0.75, -float(info.smallest_subnormal) * 1.5, 1 + float(info.eps) / 2,
                     1 + float(info.eps) * 1.5, np.nan, -0.0, np.inf], np.float32)
    b = GraphBuilder("narrow")
    x = b.input("x", wide.shape, "float32")
    b.output(b.cast(x, to=dtype))
    graph = b.build()
    got = backend.compile(per_node_plan(graph)).run({"x": wide})
    with np.errstate(over="ignore"):
        want = wide.astype(dtype)
    assert got[graph.outputs[0]].view(np.uint16).tolist() == want.view(np.uint16).tolist() \
        or _same_but_nan_payload(got[graph.outputs[0]], want)


def _same_but_nan_payload(got, want) -> bool:
    g, w = got.astype(np.float64), want.astype(np.float64)
    return bool(np.all((g == w) & (np.signbit(g) == np.signbit(w)) | (np.isnan(g) & np.isnan(w))))


#: one op each, as the fusion pipeline compiles it (compound ops decomposed): op -> (input
#: shapes, attributes); inputs of 0.5 to 2 in magnitude keep log, sqrt and pow defined
ONE_OP = {
    **{op: ([(2, 33)], {}) for op in ("exp", "log", "sqrt", "rsqrt", "reciprocal", "erf", "tanh", "sigmoid",
                                      "softplus", "softsign", "sin", "cos", "floor", "ceil", "abs", "neg", "sign",
                                      "relu", "silu")},
    **{op: ([(2, 33), (2, 33)], {}) for op in ("add", "sub", "mul", "div", "max", "min", "pow")},
    "matmul": ([(5, 40), (40, 7)], {}),
    "conv": ([(1, 3, 9, 9), (4, 3, 3, 3)], {"pads": [1, 1, 1, 1]}),
    "reduce_sum": ([(3, 200)], {"axes": [1]}),
    "reduce_mean": ([(3, 200)], {"axes": [0]}),
    "reduce_max": ([(3, 200)], {"axes": [1]}),
    "softmax": ([(3, 200)], {"axis": -1}),
    "layer_norm": ([(3, 64), (64,), (64,)], {"axis": -1}),
}


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("op", sorted(ONE_OP))
def test_each_op_in_16_bits_compiles_and_matches_reference(op, dtype):
    shapes, attrs = ONE_OP[op]
    b = GraphBuilder(op)
    rng = np.random.default_rng(len(op))
    names = [b.input(f"x{k}", s, dtype) for k, s in enumerate(shapes)]
    b.output(b.op(op, *names, **attrs))
    graph = b.build()
    magnitude_ = rng.uniform(0.5, 2.0, size=sum(int(np.prod(s)) for s in shapes))
    feeds, start = {}, 0
    for name, shape in zip(names, shapes):
        size = int(np.prod(shape))
        signs = rng.choice([-1.0, 1.0], size) if op not in ("log", "sqrt", "rsqrt", "pow") else 1.0
        feeds[name] = (magnitude_[start:start + size] * signs).reshape(shape).astype(dtype)
        start += size
    got = compile_model(graph).run(feeds)
    want = reference.run(graph, feeds)
    scale = magnitude(list(feeds.values()) + list(want.values()))
    for name in want:
        assert got[name].dtype == want[name].dtype
        assert compare(want[name], got[name], scale=scale) is None, compare(want[name], got[name], scale=scale)


def test_cast_from_float64_to_float16_rounds_once():
    """A double just above a float16 tie must round up, as the reference's NumPy cast does
    (float32 in between would land on the tie and round to even)."""
    ties = np.array([1 + 2.0 ** -11, 3 + 2.0 ** -10, -(1 + 3 * 2.0 ** -11), 65520.0])
    doubles = np.concatenate([ties + np.abs(ties) * 2.0 ** -30, ties - np.abs(ties) * 2.0 ** -30])
    b = GraphBuilder("narrow64")
    x = b.input("x", doubles.shape, "float64")
    b.output(b.cast(x, to="float16"))
    graph = b.build()
    got = backend.compile(per_node_plan(graph)).run({"x": doubles})[graph.outputs[0]]
    assert got.view(np.uint16).tolist() == reference.run(graph, {"x": doubles})[graph.outputs[0]].view(np.uint16).tolist()
