"""segment_sum's direct kernel (an in-order scatter-add) against the reference and the
pull-form loop nest it replaces: repeated and negative indices, rows of several axes,
integer updates, int32 indices, no rows; a bad index is an error naming the node."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusionlang import backend, reference
from fusionlang.engine.plan import single_group_plan
from fusionlang.errors import InputError
from fusionlang.ops import GraphBuilder


def segment_graph(rows: int, row_shape: tuple, segments: int, dtype="float32", index_dtype="int64"):
    b = GraphBuilder("segments")
    updates = b.input("updates", (rows, *row_shape), dtype)
    b.output(b.op("segment_sum", updates, b.input("indices", (rows,), index_dtype), num_segments=segments))
    return b.build()


def _strategies(compiled) -> list[str]:
    return [k.strategy for k in compiled.kernels]


@settings(max_examples=25)
@given(rows=st.integers(0, 40), row_shape=st.sampled_from([(), (3,), (2, 5), (37,)]), segments=st.integers(1, 9),
       dtype=st.sampled_from(["float32", "float64", "int32", "int64"]), index_dtype=st.sampled_from(["int64", "int32"]),
       seed=st.integers(0, 2**16))
def test_the_segment_kernel_is_the_reference_and_the_loop_nest(rows, row_shape, segments, dtype, index_dtype, seed):
    graph = segment_graph(rows, row_shape, segments, dtype, index_dtype)
    rng = np.random.default_rng(seed)
    updates = (rng.standard_normal((rows, *row_shape)) * 4).astype(dtype)
    feeds = {"updates": updates, "indices": rng.integers(-segments, segments, rows).astype(index_dtype)}
    plan = single_group_plan(graph)
    kernel = backend.compile(plan)
    assert _strategies(kernel) == ["segment-sum kernel"]
    loop_nest = backend.compile(plan, templates=False)
    assert _strategies(loop_nest) != ["segment-sum kernel"]
    out = graph.outputs[0]
    want = reference.run(graph, feeds)[out]
    got = kernel.run(feeds)[out]
    assert got.dtype == want.dtype and got.shape == want.shape
    # rows added in order from zero: the reference's np.add.at, bit for bit
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(loop_nest.run(feeds)[out], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad", [4, -5, 1 << 40])
def test_an_index_outside_the_segments_is_an_error_naming_the_node(bad):
    graph = segment_graph(3, (2,), 4)
    compiled = backend.compile(single_group_plan(graph))
    feeds = {"updates": np.ones((3, 2), np.float32), "indices": np.array([0, bad, 1])}
    node = graph.nodes[0].name
    with pytest.raises(InputError, match=rf"node '{node}' \(segment_sum\): index {bad} is out of range for axis 0 "
                                         r"of size 4"):
        compiled.run(feeds)
