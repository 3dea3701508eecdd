"""The integer widths int16, uint16, uint32 and uint64 in generated code: random elementwise
and reduction graphs over their whole range (uint64 past 2**63, the minimum of the signed
types, zero divisors, shift counts past the width) compute exactly what the reference
interpreter computes, compiled to C and as CUDA run on the CPU (target "cuda-emu")."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import fusionlang
from fusionlang import reference
from fusionlang.backend import cuda_sources, nvrtc_available, nvrtc_compile
from fusionlang.backend.cexpr import C, ValuePrinter, integer_literal
from fusionlang.engine.plan import per_node_plan, single_group_plan
from fusionlang.ops import GraphBuilder

WIDTHS = ("int16", "uint16", "uint32", "uint64")
BINARY = ("add", "sub", "mul", "div", "max", "min", "mod", "fmod", "shift_left", "shift_right", "select")
UNARY = ("neg", "abs", "sign", "relu", "widen_and_back")
REDUCE = ("reduce_sum", "reduce_prod", "reduce_max", "reduce_min")


def extremes(dtype: str, shape, rng) -> np.ndarray:
    """Values from the whole range of ``dtype``, its edges (and 0, 1, -1) often."""
    info = np.iinfo(dtype)
    edges = [0, 1, 2, info.max, info.max - 1, info.min, info.min + 1, (info.max >> 1) + 1]
    edges += [-1, -7] if info.min < 0 else [7, 3]
    size = int(np.prod(shape))
    spread = rng.integers(info.min, info.max, size=size, dtype=dtype, endpoint=True)
    picks = np.array(edges, dtype)[rng.integers(0, len(edges), size=size)]
    return np.where(rng.random(size) < 0.4, picks, spread).reshape(shape).astype(dtype)


def _binary(b: GraphBuilder, op: str, x: str, y: str, dtype: str, rng) -> str:
    if op in ("mod", "fmod"):
        return b.remainder(x, y, fmod=int(op == "fmod"))
    if op.startswith("shift"):  # counts mostly within the width, some past it
        bits = np.iinfo(dtype).bits
        counts = b.constant(rng.integers(0, bits + 3, size=b.graph.types[y].shape).astype(dtype))
        return b.bit_shift(x, counts, direction=op.split("_")[1])
    if op == "select":
        return b.where(b.less(x, y), x, y)
    return b.op(op, x, y)


def _unary(b: GraphBuilder, op: str, x: str, dtype: str) -> str:
    if op == "widen_and_back":  # through the other widths: the casts wrap as NumPy's do
        other = WIDTHS[(WIDTHS.index(dtype) + 1) % len(WIDTHS)]
        return b.cast(b.cast(x, to=other), to=dtype)
    return b.op(op, x)


@st.composite
def integer_graphs(draw, max_ops: int = 5):
    """(graph, feeds): a random DAG of integer ops on one of the new widths."""
    dtype = draw(st.sampled_from(WIDTHS))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=2)))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    b = GraphBuilder("ints")
    values = [b.input("x", shape, dtype), b.input("y", shape, dtype)]
    feeds = {"x": extremes(dtype, shape, rng), "y": extremes(dtype, shape, rng)}
    if draw(st.booleans()):  # a constant operand, from the same range (not inlined as a double)
        values.append(b.constant(extremes(dtype, shape, rng)))
    for _ in range(draw(st.integers(1, max_ops))):
        kind = draw(st.sampled_from(["binary", "binary", "unary", "reduce"]))
        x = draw(st.sampled_from(values))
        if kind == "binary":
            same = [v for v in values if b.graph.types[v].shape == b.graph.types[x].shape]
            out = _binary(b, draw(st.sampled_from(BINARY)), x, draw(st.sampled_from(same)), dtype, rng)
        elif kind == "unary":
            out = _unary(b, draw(st.sampled_from(UNARY)), x, dtype)
        else:
            axis = draw(st.integers(0, len(b.graph.types[x].shape) - 1))
            out = b.op(draw(st.sampled_from(REDUCE)), x, axes=[axis], keepdims=1)
        values.append(out)
    b.output(values[-1])
    return b.build(), feeds


def assert_exact(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for name in want:
        assert got[name].dtype == want[name].dtype, name
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def _reference(graph, feeds):
    with np.errstate(all="ignore"):  # wrap-around and zero divisors are defined, not errors
        return reference.run(graph, feeds)


@settings(max_examples=15, deadline=None)
@given(integer_graphs())
def test_random_integer_graphs_compile_to_c_as_the_reference_computes(case):
    graph, feeds = case
    want = _reference(graph, feeds)
    assert_exact(fusionlang.compile(per_node_plan(graph), target="c").run(feeds), want)
    assert_exact(fusionlang.compile(single_group_plan(graph), target="c").run(feeds), want)


@settings(max_examples=8, deadline=None)
@given(integer_graphs(max_ops=3))
def test_random_integer_graphs_as_cuda_compute_what_the_reference_computes(case):
    graph, feeds = case
    assert_exact(fusionlang.compile(single_group_plan(graph), target="cuda-emu").run(feeds), _reference(graph, feeds))


@pytest.mark.parametrize("reduce", REDUCE)
@pytest.mark.parametrize("dtype", WIDTHS + ("int32", "int64"))
def test_integer_reductions_are_exact_over_the_whole_range(dtype, reduce):
    # a double accumulator rounded uint64 and int64 values past 2**53, and converted an
    # overflowed int32 sum back to int32 undefinedly; the reference wraps
    x = extremes(dtype, (6, 9), np.random.default_rng(7))
    b = GraphBuilder("reduce")
    b.output(b.op(reduce, b.input("x", x.shape, dtype), axes=[1], keepdims=0))
    graph = b.build()
    assert_exact(fusionlang.compile(per_node_plan(graph), target="c").run({"x": x}), _reference(graph, {"x": x}))


@pytest.mark.parametrize("dtype", ("uint64", "int64", "int16"))
@pytest.mark.parametrize("reduce", REDUCE)
def test_long_integer_rows_reduce_across_a_cuda_block_exactly(dtype, reduce):
    # rows longer than a block: per-thread partials in int64/uint64, then a block all-reduce
    x = extremes(dtype, (3, 1500), np.random.default_rng(3))
    b = GraphBuilder("rows")
    v = b.input("x", x.shape, dtype)
    b.output(b.add(b.op(reduce, v, axes=[1], keepdims=1), v))
    graph = b.build()
    compiled = fusionlang.compile(single_group_plan(graph), target="cuda-emu")
    suffix = "ll" if dtype.startswith("int") and reduce in ("reduce_max", "reduce_min") else "ull"
    assert f"fl_block_{reduce[len('reduce_'):]}_{suffix}(part" in compiled.sources
    assert_exact(compiled.run({"x": x}), _reference(graph, {"x": x}))


def test_uint64_division_modulo_and_shift_past_int64_max():
    big = np.array([2**64 - 1, 2**63, 2**63 + 5, 10, 2**64 - 1, 7], np.uint64)
    div = np.array([2**63, 3, 0, 2**64 - 1, 2**64 - 1, 0], np.uint64)
    b = GraphBuilder("u64")
    x, y = b.input("x", big.shape, "uint64"), b.input("y", div.shape, "uint64")
    b.output(b.div(x, y), b.remainder(x, y), b.max(x, y), b.bit_shift(x, b.constant(np.full(6, 3, np.uint64)),
                                                                        direction="right"))
    graph = b.build()
    feeds = {"x": big, "y": div}
    safe = np.where(div == 0, 1, div)
    want = [np.where(div == 0, 0, big // safe), np.where(div == 0, 0, big % safe), np.maximum(big, div),
            big >> np.uint64(3)]  # a logical shift: the top bit is not a sign
    for got in (fusionlang.compile(per_node_plan(graph), target="c").run(feeds), _reference(graph, feeds)):
        for name, expected in zip(graph.outputs, want):
            np.testing.assert_array_equal(got[name], expected.astype(np.uint64), err_msg=name)


def test_integer_literals_never_overflow_their_c_type():
    assert integer_literal(2**64 - 1) == "18446744073709551615ULL"
    assert integer_literal(-(2**63)) == "(-9223372036854775807LL - 1)"
    assert integer_literal(2**40) == "1099511627776LL" and integer_literal(-3) == "(-3)"
    # a uint64 shift count or operand written as a literal: as int64_t, its bits
    a = sp.Symbol("a")
    printer = ValuePrinter("float64", C, lambda s: s.name, lambda s: True)
    from fusionlang.ops.scalar import BitShift

    text = printer.doprint(BitShift(sp.Integer(2**64 - 1), a, 64, 0, 1))
    assert "18446744073709551615ULL" in text and "18446744073709551615LL" not in text


@pytest.mark.skipif(nvrtc_available() is not None, reason="NVRTC is not available")
def test_cuda_source_of_the_integer_widths_compiles_with_nvrtc():
    b = GraphBuilder("widths")
    outs = []
    for dtype in WIDTHS:
        x, y = b.input(f"x_{dtype}", (64,), dtype), b.input(f"y_{dtype}", (64,), dtype)
        outs += [b.div(b.max(x, y), y), b.reduce_sum(b.remainder(x, y), axes=[0]),
                 b.bit_shift(x, y, direction="right")]
    b.output(*outs)
    for text in cuda_sources(per_node_plan(b.build())).values():
        nvrtc_compile(text)
