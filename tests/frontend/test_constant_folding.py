"""fold_constants as a Graph pass: what folds, what stays, and that results never change."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fusionlang.errors import ShapeError
from fusionlang.frontend import fold_constants
from fusionlang.ops import GraphBuilder
from fusionlang.ops.interpreter import run as interpret


def test_constant_chain_folds_and_keeps_names():
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    k = b.relu(b.add(np.full((2, 3), -1.0, np.float32), np.arange(6, dtype=np.float32).reshape(2, 3)), name="k")
    b.output(b.mul(x, k))
    graph = b.build()
    assert fold_constants(graph) == 2
    assert [n.op for n in graph.nodes] == ["mul"]
    np.testing.assert_array_equal(graph.constants["k"], np.maximum(np.arange(6).reshape(2, 3) - 1, 0))
    assert graph.types["k"].shape == (2, 3)


def test_nothing_to_fold():
    b = GraphBuilder()
    b.output(b.exp(b.input("x", (3,))))
    graph = b.build()
    assert fold_constants(graph) == 0 and len(graph) == 1


def test_folded_graph_output_stays_an_output():
    b = GraphBuilder()
    b.input("x", (2,))
    b.output(b.neg(np.array([1.0, 2.0], np.float32), name="y"))
    graph = b.build()
    assert fold_constants(graph) == 1
    assert graph.outputs == ["y"] and graph.nodes == []
    np.testing.assert_array_equal(interpret(graph, {"x": np.zeros(2, np.float32)})["y"], [-1.0, -2.0])


def test_reference_disagreeing_with_the_recorded_type_is_reported():
    b = GraphBuilder()
    b.input("x", (2,))
    y = b.neg(np.array([1.0, 2.0], np.float32), name="y")
    b.output(y)
    graph = b.build()
    graph.types["y"] = graph.types["y"].with_shape((3,))  # a stale type, as a buggy pass might leave
    with pytest.raises(ShapeError, match=r"node 'y' \(neg\): folding computed float32\[2\] but its type says f32\[3\]"):
        fold_constants(graph)
    assert "y" not in graph.constants


UNARY = ["neg", "abs", "exp", "tanh", "sigmoid", "relu"]
BINARY = ["add", "sub", "mul", "max", "min"]


@st.composite
def partly_constant_graphs(draw):
    """Random elementwise DAGs over one input and a few constants."""
    b = GraphBuilder()
    values = [b.input("x", (2, 3))]
    for k in range(draw(st.integers(1, 3))):
        values.append(b.constant(np.asarray(draw(st.lists(st.floats(-2, 2), min_size=3, max_size=3)), np.float32)))
    for _ in range(draw(st.integers(1, 8))):
        if draw(st.booleans()):
            values.append(b.op(draw(st.sampled_from(UNARY)), draw(st.sampled_from(values))))
        else:
            values.append(b.op(draw(st.sampled_from(BINARY)), draw(st.sampled_from(values)),
                               draw(st.sampled_from(values))))
    b.output(values[-1])
    return b.build()


@given(partly_constant_graphs(), st.lists(st.floats(-3, 3), min_size=6, max_size=6))
def test_folding_never_changes_results(graph, xs):
    feeds = {"x": np.asarray(xs, np.float32).reshape(2, 3)}
    before = interpret(graph, feeds)
    copy = graph.copy()
    fold_constants(copy)
    after = interpret(copy, feeds)
    np.testing.assert_array_equal(after[graph.outputs[0]], before[graph.outputs[0]])
    assert all(any(v not in copy.constants for v in n.present_inputs()) for n in copy.nodes)


def test_multi_output_nodes_and_constant_of_shape_fold():
    b = GraphBuilder()
    x = b.input("x", (3,))
    filled = b.op("constant_of_shape", np.array([4], np.int64), value=np.array([2.0], np.float32), name="filled")
    first, rest = b.op("split", filled, axis=0, split=(1, 3), name="parts")
    b.output(b.add(b.mul(x, rest), first))
    graph = b.build()
    assert fold_constants(graph) == 2
    assert [n.op for n in graph.nodes] == ["mul", "add"]
    np.testing.assert_array_equal(graph.constants[first], [2.0])
    np.testing.assert_array_equal(graph.constants[rest], [2.0] * 3)
