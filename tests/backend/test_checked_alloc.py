"""Heap buffers in generated C are checked: an allocation that fails is a ResourceError
naming the bytes and the kernel (never a NULL dereference), and frees what was held.

Allocations are made to fail deterministically by compiling with -DFL_ALLOC_LIMIT=N (the
hook of emit_c's fl_alloc), passed through $FUSIONLANG_COPT."""

from __future__ import annotations

import re

import numpy as np
import pytest

import fusionlang
from fusionlang import reference
from fusionlang.backend.emit_c import STACK_LIMIT
from fusionlang.errors import ResourceError
from fusionlang.ops import GraphBuilder

from helpers import groups_plan, softmax

#: a softmax row longer than the stack limit keeps its row buffers on the heap
ROW = STACK_LIMIT // 4 + 4096


def long_softmax_plan():
    b = GraphBuilder("long_rows")
    x = b.input("x", (2, ROW), "float32")
    b.output(softmax(b, b.exp(x)))
    graph = b.build()
    return graph, groups_plan(graph, [[n.name for n in graph.nodes]])


def test_heap_buffers_are_allocated_checked_and_freed():
    graph, plan = long_softmax_plan()
    compiled = fusionlang.compile(plan, target="c")
    assert "malloc(" not in compiled.sources.split("fl_alloc(size_t n)")[-1].split("}", 1)[-1]
    assert re.search(r"if \(!b\d+\) \{ fl_err\[0\] = 2; fl_err\[2\] = \d+; goto fl_out; \}", compiled.sources)
    feeds = {"x": np.random.default_rng(0).standard_normal((2, ROW)).astype(np.float32)}
    np.testing.assert_allclose(compiled.run(feeds)["div_5"], reference.run(graph, feeds)["div_5"], rtol=1e-4,
                               atol=1e-9)


def test_a_failed_allocation_is_a_one_line_resource_error(monkeypatch):
    monkeypatch.setenv("FUSIONLANG_COPT", "-O2 -DFL_ALLOC_LIMIT=4096")
    graph, plan = long_softmax_plan()
    compiled = fusionlang.compile(plan, target="c")
    feeds = {"x": np.ones((2, ROW), np.float32)}
    with pytest.raises(ResourceError) as err:
        compiled.run(feeds)
    kernel = compiled.kernels[0].name
    assert str(err.value) == f"out of memory allocating {ROW * 4} bytes in kernel {kernel}"
    with pytest.raises(ResourceError):  # and again: nothing was left half done
        compiled.run(feeds)
