"""Row loops merged into one (backend.collapse): an NCHW plane's (row, element) loop pair
becomes one loop over the plane where every access reads the pair as a contiguous row,
and stays a pair where one does not; the merged kernels compute what the reference does."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusionlang
from fusionlang import reference
from fusionlang.backend import collapse
from fusionlang.backend.runtime import lower_group
from fusionlang.ops import GraphBuilder


def _squeeze_excite(c, h, w):
    """A mean over the plane, a sigmoid of it, the channels scaled by it."""
    b = GraphBuilder("squeeze_excite")
    x = b.input("x", (1, c, h, w))
    mean = b.op("reduce_mean", x, axes=[2, 3], keepdims=1)
    b.output(b.mul(x, b.op("sigmoid", mean)))
    return b.build()


def _compiled(graph, **options):
    return fusionlang.compile(fusionlang.fuse(graph), "c", **options)


def _loop_bounds(compiled) -> list[int]:
    return [int(n) for k in compiled.kernels for n in re.findall(r"for \(int64_t c\d+ = 0; c\d+ <= (\d+);", k.source)]


def _check(graph, compiled, seed=0, specials=False):
    rng = np.random.default_rng(seed)
    feeds = {name: rng.standard_normal(graph.types[name].shape).astype(np.float32) for name in graph.inputs}
    if specials:
        for value in feeds.values():
            flat = value.reshape(-1)
            flat[rng.integers(0, flat.size, size=max(1, flat.size // 30))] = rng.choice([np.inf, -np.inf, np.nan])
    got = compiled.run(feeds)
    want = reference.run(graph, feeds)
    for name in graph.outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=1e-6, equal_nan=True)


def test_the_squeeze_excite_mean_and_scale_run_over_whole_planes():
    graph = _squeeze_excite(6, 14, 14)
    out = _compiled(graph)
    assert 14 * 14 - 1 in _loop_bounds(out) and 13 not in _loop_bounds(out)
    _check(graph, out)


def test_without_the_pass_the_plane_is_rows(monkeypatch):
    monkeypatch.setattr("fusionlang.backend.emit_c.collapse_rows", lambda group: group)
    graph = _squeeze_excite(6, 14, 14)
    out = _compiled(graph)
    assert 13 in _loop_bounds(out) and 14 * 14 - 1 not in _loop_bounds(out)


def _added(y_shape, transposed=False):
    b = GraphBuilder("added")
    y = b.input("y", y_shape)
    if transposed:
        y = b.op("transpose", y, perm=[0, 1, 3, 2])
    b.output(b.add(b.input("x", (1, 3, 9, 7)), y))
    return b.build()


@pytest.mark.parametrize("graph", [_added((1, 1, 9, 1)), _added((1, 1, 1, 7))], ids=["rows", "columns"])
def test_an_operand_read_otherwise_than_as_a_contiguous_row_keeps_the_pair(graph):
    # (1, 1, 9, 1) indexes the row alone, (1, 1, 1, 7) the element alone: neither is
    # row * 7 + element
    out = _compiled(graph)
    assert 9 * 7 - 1 not in _loop_bounds(out) and 6 in _loop_bounds(out)
    _check(graph, out)


def test_a_transposed_operand_is_its_own_kernel_and_the_add_walks_whole_planes():
    # the transpose runs as the transpose template; the add then reads both as rows
    graph = _added((1, 3, 7, 9), transposed=True)
    out = _compiled(graph)
    assert any("transpose" in k.source for k in out.kernels) and 9 * 7 - 1 in _loop_bounds(out)
    _check(graph, out)


def test_the_pass_leaves_a_group_with_nothing_to_merge_as_it_is():
    b = GraphBuilder("rows")
    b.output(b.exp(b.input("x", (5, 8))))
    graph = b.build()
    plan = fusionlang.fuse(graph)
    for group in plan.groups:
        lowered = lower_group(plan, group, "c")
        assert collapse.collapse_rows(lowered) is lowered


@st.composite
def planes(draw):
    c, h, w = draw(st.integers(1, 5)), draw(st.integers(1, 20)), draw(st.integers(1, 20))
    # each operand broadcast (or not) over channels, rows and columns
    shapes = [(1, c if draw(st.booleans()) else 1, h if draw(st.booleans()) else 1, w if draw(st.booleans()) else 1)
              for _ in range(draw(st.integers(0, 2)))]
    return c, h, w, shapes, draw(st.sampled_from(["mean", "max", "none"]))


@settings(max_examples=30)
@given(problem=planes(), threads=st.sampled_from([1, 2]), specials=st.booleans(), seed=st.integers(0, 2**16))
def test_planes_with_broadcast_operands_and_reductions_match_the_reference(problem, threads, specials, seed):
    c, h, w, shapes, reduce = problem
    b = GraphBuilder("plane")
    x = b.exp(b.input("x", (1, c, h, w)))
    for k, shape in enumerate(shapes):
        x = b.mul(x, b.input(f"y{k}", shape)) if k % 2 else b.add(x, b.input(f"y{k}", shape))
    if reduce != "none":
        x = b.mul(x, b.op(f"reduce_{reduce}", x, axes=[2, 3], keepdims=1))
    b.output(x)
    graph = b.build()
    _check(graph, _compiled(graph, threads=threads), seed, specials)
