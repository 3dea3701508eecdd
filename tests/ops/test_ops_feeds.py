"""Feeds of another dtype than the graph input's: converted when every value survives
(int64 for int8 holding small numbers, float64 for float32), refused with the input, the
value and where it is otherwise (int64 300 became int8 44, float64 1e300 became inf,
silently), by the reference interpreter and the compiled program alike."""

from __future__ import annotations

import numpy as np
import pytest

import fusionlang
from fusionlang.errors import InputError
from fusionlang.ops import GraphBuilder


def doubled(dtype: str):
    b = GraphBuilder("feeds")
    x = b.input("x", (3,), dtype)
    b.output(b.add(x, x))
    return b.build()


def runners(graph):
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), target="c")
    return {"reference": lambda feeds: fusionlang.reference.run(graph, feeds), "c": compiled.run}


@pytest.mark.parametrize("dtype, feed", [("int8", np.array([1, -2, 127])), ("uint16", np.array([0, 7, 65535])),
                                         ("float32", np.array([1.5, np.nan, -np.inf])),
                                         ("int32", np.array([1, 2, 3], np.int16))])
def test_a_feed_whose_values_fit_is_converted(dtype, feed):
    graph = doubled(dtype)
    for run in runners(graph).values():
        (out,) = run({"x": feed}).values()
        assert out.dtype == np.dtype(dtype)
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(out, (feed.astype(dtype) + feed.astype(dtype)))


@pytest.mark.parametrize("dtype, feed, shown", [("int8", np.array([1, 300, 3]), "300 at [1]"),
                                                ("uint8", np.array([1, 2, -1]), "-1 at [2]"),
                                                ("float32", np.array([1.0, 1e300, 2.0]), "1e+300 at [1]")])
def test_a_feed_whose_values_do_not_fit_is_refused(dtype, feed, shown):
    graph = doubled(dtype)
    for run in runners(graph).values():
        with pytest.raises(InputError) as caught:
            run({"x": feed})
        assert f"input 'x': expected dtype {dtype}, got {feed.dtype} holding {shown}" in str(caught.value)
