"""Gathered indices are checked in generated code: a bad one is an InputError naming the
node, the axis and the index (never a wrapped-around row); in-range negative indices count
from the end; check_indices=False drops the check."""

from __future__ import annotations

import numpy as np
import pytest

import fusionlang
from fusionlang import reference
from fusionlang.backend import cuda_sources, nvrtc_available, nvrtc_compile
from fusionlang.engine.plan import per_node_plan
from fusionlang.errors import InputError, ShapeError
from fusionlang.ops import GraphBuilder

from helpers import groups_plan, planned_loops


def embedding_graph(rows: int = 5, width: int = 3, count: int = 4, index_dtype: str = "int64"):
    """x[ids] -> relu: the gather alone, or fused with its consumer."""
    b = GraphBuilder("embed")
    x = b.input("x", (rows, width), "float32")
    ids = b.input("ids", (count,), index_dtype)
    b.output(b.relu(b.gather(x, ids, axis=0)))
    return b.build()


def feeds_with(ids, rows: int = 5, width: int = 3, dtype="int64"):
    return {"x": np.arange(rows * width, dtype=np.float32).reshape(rows, width) - 4,
            "ids": np.asarray(ids, dtype)}


PLANS = {
    "alone": lambda g: per_node_plan(g, lambda n: "kernel"),
    "fused": lambda g: groups_plan(g, [[n.name for n in g.nodes]]),
}


@pytest.mark.parametrize("plan", sorted(PLANS))
@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_in_range_indices_negative_ones_included_match_the_reference(plan, dtype):
    graph = embedding_graph(index_dtype=dtype)
    compiled = fusionlang.compile(PLANS[plan](graph), target="c")
    feeds = feeds_with([0, -1, 4, -5], dtype=dtype)
    np.testing.assert_array_equal(compiled.run(feeds)["relu_1"], reference.run(graph, feeds)["relu_1"])


@pytest.mark.parametrize("plan", sorted(PLANS))
@pytest.mark.parametrize("bad", [5, -6, 2**40, -(2**62)])
def test_an_out_of_range_index_is_an_input_error_naming_node_and_index(plan, bad):
    graph = embedding_graph()
    compiled = fusionlang.compile(PLANS[plan](graph), target="c")
    feeds = feeds_with([0, 1, bad, 2])
    with pytest.raises(ShapeError, match=rf"index {bad} is out of range"):
        reference.run(graph, feeds)  # the oracle refuses it too
    with pytest.raises(InputError) as err:
        compiled.run(feeds)
    assert str(err.value) == f"node 'gather_0' (gather): index {bad} is out of range for axis 0 of size 5"
    # the compiled graph stays usable
    good = feeds_with([3, 2, 1, 0])
    np.testing.assert_array_equal(compiled.run(good)["relu_1"], reference.run(graph, good)["relu_1"])


def test_an_empty_axis_admits_no_index():
    b = GraphBuilder("empty_axis")
    x = b.input("x", (3, 0), "float32")
    b.output(b.gather(x, b.input("ids", (2,), "int64"), axis=1))
    graph = b.build()
    compiled = fusionlang.compile(per_node_plan(graph, lambda n: "kernel"), target="c")
    with pytest.raises(InputError, match=r"index 0 is out of range for axis 1 of size 0"):
        compiled.run({"x": np.zeros((3, 0), np.float32), "ids": np.zeros(2, np.int64)})


def test_the_check_can_be_dropped():
    graph = embedding_graph()
    plan = per_node_plan(graph, lambda n: "kernel")
    checked = fusionlang.compile(plan, target="c")
    unchecked = fusionlang.compile(plan, target="c", check_indices=False)
    assert "fl_index(" in checked.sources and "fl_index(" not in unchecked.sources.split("fl_iwrap")[-1]
    feeds = feeds_with([0, -1, 4, -5])
    np.testing.assert_array_equal(unchecked.run(feeds)["relu_1"], reference.run(graph, feeds)["relu_1"])


def test_emulated_cuda_reports_a_bad_index_too():
    graph = embedding_graph()
    compiled = fusionlang.compile(per_node_plan(graph, lambda n: "kernel"), target="cuda-emu")
    good = feeds_with([0, -1, 4, -5])
    np.testing.assert_array_equal(compiled.run(good)["relu_1"], reference.run(graph, good)["relu_1"])
    with pytest.raises(InputError) as err:
        compiled.run(feeds_with([0, -7, 1, 1]))
    assert str(err.value) == "node 'gather_0' (gather): index -7 is out of range for axis 0 of size 5"


@pytest.mark.skipif(nvrtc_available() is not None, reason="NVRTC is not available")
def test_checked_cuda_compiles_with_nvrtc():
    sources = cuda_sources(PLANS["fused"](embedding_graph()))
    assert any("fl_index(" in text.split("fl_iwrap")[-1] for text in sources.values())
    for text in sources.values():
        nvrtc_compile(text)


def test_checks_inside_simd_loops_reduce_flags_and_report_a_bad_index():
    # a gather along the last axis loads a new index every innermost iteration: its check
    # or-reduces a flag (a store to the error record there would stop the loop vectorizing)
    b = GraphBuilder("columns")
    x = b.input("x", (3, 40), "float32")
    ids = b.input("ids", (64,), "int64")
    b.output(b.exp(b.gather(x, ids, axis=1)))
    graph = b.build()
    assert any(f.plan.lane_checks for f in planned_loops(PLANS["fused"](graph)))
    compiled = fusionlang.compile(PLANS["fused"](graph), target="c")
    assert "fl_index_lane(" in compiled.sources  # (how a lane check is printed)
    ids_ok = (np.arange(64) % 80 - 40).astype(np.int64)
    feeds = {"x": np.linspace(-1, 1, 120, dtype=np.float32).reshape(3, 40), "ids": ids_ok}
    np.testing.assert_allclose(compiled.run(feeds)["exp_1"], reference.run(graph, feeds)["exp_1"], rtol=1e-6)
    bad = ids_ok.copy()
    bad[[5, 50]] = [40, -41]
    with pytest.raises(InputError, match=r"^node 'gather_0' \(gather\): index (40|-41) is out of range for axis 1 "
                                         r"of size 40$"):
        compiled.run({**feeds, "ids": bad})
