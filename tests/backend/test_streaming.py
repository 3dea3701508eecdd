"""Non-temporal stores of large graph outputs (backend/streaming.py) and how the C printer
writes them: rows in L1, streamed out, the next rows prefetched, the same numbers."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers import layer_norm, softmax

from fusionlang import reference
from fusionlang.backend import compile
from fusionlang.backend.machine import host
from fusionlang.backend.streaming import streamed_values
from fusionlang.engine.plan import single_group_plan
from fusionlang.ops import GraphBuilder


def _rows(kind: str, rows: int, cols: int, also_read: bool = False):
    b = GraphBuilder(kind)
    x = b.input("x", (rows, cols))
    if kind == "layer_norm":
        y = layer_norm(b, x, b.constant(np.linspace(0.5, 1.5, cols, dtype=np.float32)),
                       b.constant(np.linspace(-1, 1, cols, dtype=np.float32)))
    else:
        y = softmax(b, x)
    b.output(y)
    if also_read:
        b.output(b.mul(y, b.constant(np.float32(2.0))))
    return b.build()


def _big_rows(l2: int) -> int:
    return l2 // (4 * 1001) + 3  # 1001 floats a row: rows start off any vector alignment


def test_only_large_graph_outputs_that_nothing_reads_stream():
    small_machine = dataclasses.replace(host(), l2=64 * 1024)
    big = _rows("softmax", _big_rows(small_machine.l2), 1001)
    assert streamed_values(big, small_machine) == set(big.outputs)
    assert streamed_values(_rows("softmax", 4, 1001), small_machine) == frozenset()  # fits in L2
    read = _rows("softmax", _big_rows(small_machine.l2), 1001, also_read=True)
    streamed = streamed_values(read, small_machine)
    assert read.outputs[0] not in streamed and read.outputs[1] in streamed


@pytest.mark.parametrize("kind", ["softmax", "layer_norm"])
def test_a_streamed_output_is_written_from_an_l1_row_and_matches_the_reference(kind):
    graph = _rows(kind, _big_rows(host().l2), 1001)
    assert streamed_values(graph, host()) == set(graph.outputs)
    compiled = compile(single_group_plan(graph), "c")
    source = compiled.kernels[0].source
    assert "fl_stream_lanes(" in source and "fl_stream_fence();" in source
    assert "__builtin_prefetch(&p0[" in source  # the input rows, while the row in L1 is worked on
    x = np.random.default_rng(1).standard_normal(graph.types["x"].shape).astype(np.float32) * 4
    want = reference.run(graph, {"x": x})[graph.outputs[0]]
    for _ in range(2):  # the second run writes into the array the first returned, if it is free
        got = compiled.run({"x": x})[graph.outputs[0]]
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


def test_threads_and_small_outputs_do_not_stream():
    graph = _rows("softmax", _big_rows(host().l2), 1001)
    assert "fl_stream_lanes(" not in compile(single_group_plan(graph), "c", threads=2).kernels[0].source
    small = _rows("softmax", 5, 37)
    assert "fl_stream_lanes(" not in compile(single_group_plan(small), "c").kernels[0].source
