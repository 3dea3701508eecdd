"""bitcast in generated code: every same-width pair of dtypes, alone and inside a fused
kernel, compiled to C and as CUDA run on the CPU (target "cuda-emu"), gives the bytes the
reference interpreter (a NumPy view) gives, NaN payloads and integer extremes included."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import fusionlang
from fusionlang import reference
from fusionlang.engine.plan import per_node_plan, single_group_plan
from fusionlang.ops import GraphBuilder

WIDTHS = {1: ("int8", "uint8"), 2: ("float16", "bfloat16", "int16", "uint16"),
          4: ("float32", "int32", "uint32"), 8: ("float64", "int64", "uint64")}
PAIRS = [pair for names in WIDTHS.values() for pair in itertools.permutations(names, 2)]


def every_pattern(dtype: str, shape) -> np.ndarray:
    """Random bytes read as ``dtype``: NaNs with payloads, subnormals, both signs, extremes."""
    itemsize = np.dtype(dtype).itemsize
    raw = np.random.default_rng(itemsize).integers(0, 256, size=int(np.prod(shape)) * itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


def round_trip(source: str, target: str):
    # x -> bitcast -> bitcast back: both casts in one kernel under a single-group plan
    b = GraphBuilder("bits")
    x = b.input("x", (4, 5), source)
    there = b.op("bitcast", x, source=source, to=target)
    b.output(there)
    b.output(b.op("bitcast", there, source=target, to=source))
    return b.build()


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
@pytest.mark.parametrize("source, to", PAIRS)
def test_bitcast_gives_the_reference_bytes(source, to, target):
    graph = round_trip(source, to)
    feeds = {"x": every_pattern(source, (4, 5))}
    want = reference.run(graph, feeds)
    for plan in (per_node_plan(graph), single_group_plan(graph)):
        got = fusionlang.compile(plan, target=target).run(feeds)
        for name in graph.outputs:
            assert got[name].dtype == want[name].dtype
            assert got[name].tobytes() == want[name].tobytes(), name


@pytest.mark.parametrize("source, to", [("int64", "float64"), ("uint64", "int64"), ("int64", "uint64")])
def test_bitcast_of_a_large_integer_constant_keeps_its_low_bits(source, to):
    # a 0-d constant is folded into the expression: printed as a double literal it lost
    # every bit past 2**53
    value = np.array(np.iinfo(source).max - 417, source)
    b = GraphBuilder("const_bits")
    x = b.input("x", (2,), to)
    b.output(b.op("add" if to != "float64" else "mul", x, b.op("bitcast", b.constant(value), source=source, to=to)))
    graph = b.build()
    feeds = {"x": np.ones(2, to)}
    want = reference.run(graph, feeds)
    got = fusionlang.compile(single_group_plan(graph), target="c").run(feeds)
    assert got[graph.outputs[0]].tobytes() == want[graph.outputs[0]].tobytes()
