"""The tiled transpose against numpy: 2-D and batched transposes after merging axes, tiles
cut at the edges, every copied dtype; which transposes stay loop nests."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusionlang import backend
from fusionlang.backend.transpose_template import merged_transpose
from fusionlang.engine.plan import single_group_plan
from fusionlang.ops import GraphBuilder


def transpose_graph(shape, perm, dtype="float32"):
    b = GraphBuilder("transpose")
    b.output(b.op("transpose", b.input("x", shape, dtype), perm=perm))
    return b.build()


def _compiled(shape, perm, dtype="float32"):
    graph = transpose_graph(shape, perm, dtype)
    return graph, backend.compile(single_group_plan(graph))


@pytest.mark.parametrize("shape, perm, merged", [
    ((4, 4, 64, 64), (0, 3, 1, 2), ((4, 256, 64), (0, 2, 1))),  # BERT's heads back to rows
    ((8000, 256), (1, 0), ((8000, 256), (1, 0))),
    ((2, 1, 3, 5), (3, 1, 0, 2), ((6, 5), (1, 0))),  # an axis of extent 1 goes
    ((2, 3, 4), (1, 0, 2), ((2, 3, 4), (1, 0, 2))),  # the innermost axis stays
    ((2, 3, 4), (0, 1, 2), ((24,), (0,))),
])
def test_axes_that_stay_together_merge(shape, perm, merged):
    assert merged_transpose(shape, perm) == merged


@settings(max_examples=25)
@given(shape=st.sampled_from([(70, 33), (33, 70), (1, 5), (3, 40, 65), (2, 3, 31, 4), (5, 1, 37, 2)]),
       dtype=st.sampled_from(["float32", "float64", "int32", "int64"]), seed=st.integers(0, 2**16), data=st.data())
def test_the_tiled_transpose_is_numpys(shape, dtype, seed, data):
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    graph, compiled = _compiled(shape, perm, dtype)
    x = (np.random.default_rng(seed).standard_normal(shape) * 100).astype(dtype)
    np.testing.assert_array_equal(compiled.run({"x": x})[graph.outputs[0]], x.transpose(perm))


@pytest.mark.parametrize("shape, perm, tiled", [
    ((70, 33), (1, 0), True),
    ((4, 4, 64, 64), (0, 3, 1, 2), True),
    ((3, 8, 5), (2, 1, 0), False),  # three axes move: a loop nest
    ((3, 8, 5), (1, 0, 2), False),  # rows move whole: a loop nest copies them
])
def test_which_transposes_run_tiled(shape, perm, tiled):
    _, compiled = _compiled(shape, perm)
    assert (compiled.kernels[0].strategy == "tiled transpose") == tiled
