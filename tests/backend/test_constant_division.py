"""Dividing by a one-element constant, which generated code inlines as a literal, rounds as
NumPy's division does: x / c, not x times a rounded 1 / c (an ulp off for about a third of
all x when 1 / c is inexact)."""

from __future__ import annotations

import numpy as np
import pytest

import fusionlang.backend as backend
from fusionlang import reference
from fusionlang.engine.plan import per_node_plan
from fusionlang.ops import GraphBuilder


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("divisor", [255.0, 3.0, 0.1, 4.0])
def test_division_by_a_constant_is_correctly_rounded(dtype, divisor):
    b = GraphBuilder("divide")
    b.output(b.div(b.input("x", (4096,), dtype), b.constant(np.array(divisor, dtype))))
    graph = b.build()
    x = np.random.default_rng(0).standard_normal(4096).astype(dtype) * 100
    got = backend.compile(per_node_plan(graph), "c").run({"x": x})[graph.outputs[0]]
    np.testing.assert_array_equal(got, x / np.array(divisor, dtype))
    np.testing.assert_array_equal(got, reference.run(graph, {"x": x})[graph.outputs[0]])
