"""The public strategies: random graphs are valid, varied and bounded; feeds respect
each input's domain; comparisons catch what they must and allow rounding."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fusionlang.ir.types import TensorType
from fusionlang.ops import GraphBuilder, verify_graph
from fusionlang.reference import run
from fusionlang.testing import (COMPOUND_FAMILIES, Domain, compare, feeds, feeds_for, graphs, input_domains,
                                sample_graphs)
from fusionlang.testing.values import array_for, magnitude


@given(graphs(max_nodes=10))
def test_random_graphs_are_valid_and_bounded(graph):
    verify_graph(graph)
    assert graph.nodes and graph.outputs
    # no dead code: every node feeds an output
    live = set(graph.outputs)
    for node in reversed(graph.nodes):
        assert any(out in live for out in node.outputs), f"dead node {node.name}"
        live.update(node.present_inputs())
    assert all(v in live for v in graph.inputs)
    assert all(graph.types[v].rank <= 5 and graph.types[v].size <= 4096 for v in graph.types)
    values = run(graph, feeds_for(graph), keep={v for n in graph.nodes for v in n.outputs})
    for name, array in values.items():
        if array.dtype.kind == "f":
            assert np.all(np.isfinite(array)), f"{name} is not finite"
    assert magnitude(values.values()) < 1e4


@given(graphs(families=COMPOUND_FAMILIES, max_nodes=6), st.data())
def test_feeds_strategy_fits_the_graph(graph, data):
    fed = data.draw(feeds(graph))
    assert set(fed) == set(graph.inputs)
    for name, array in fed.items():
        assert array.shape == graph.types[name].shape and array.dtype == np.dtype(graph.types[name].dtype)
    run(graph, fed)


def test_sampled_graphs_cover_every_family_and_are_reproducible():
    sample = sample_graphs(150, seed=5, min_nodes=3)
    assert [len(g.nodes) for g in sample] == [len(g.nodes) for g in sample_graphs(150, seed=5, min_nodes=3)]
    ops = Counter(n.op for g in sample for n in g.nodes)
    for op in ("relu", "add", "div", "where", "reduce_sum", "reduce_max", "exp", "transpose", "reshape", "conv",
               "matmul", "concat", "slice", "pad"):
        assert ops[op] > 0, f"no {op} in 150 graphs: {ops}"
    assert any(o in ops for o in ("max_pool", "average_pool", "global_average_pool", "global_max_pool"))
    # several inputs of different shapes broadcast somewhere
    assert any(len({g.types[v].shape for v in n.present_inputs()}) > 1
               for g in sample for n in g.nodes if n.op in ("add", "sub", "mul", "max", "min", "div"))
    # branches: some value has several consumers
    assert any(max(Counter(v for n in g.nodes for v in set(n.present_inputs())).values(), default=0) > 1
               for g in sample)


def test_compound_families_make_compound_ops():
    ops = Counter(n.op for g in sample_graphs(80, seed=2, families=COMPOUND_FAMILIES, min_nodes=3)
                  for n in g.nodes)
    assert ops["softmax"] + ops["log_softmax"] + ops["layer_norm"] + ops["batch_norm"] > 0


# ----- domains and feeds -----------------------------------------------------------------


def _graph_with_domains():
    b = GraphBuilder("domains")
    x = b.input("x", (3, 4))
    d = b.input("d", (4,))
    i = b.input("i", (5,), "int64")
    p = b.input("p", (3, 4))
    y = b.add(b.div(x, d), b.log(p))
    b.output(y, b.gather(x, i, axis=1))
    return b.build()


def test_domains_follow_the_consumers():
    domains = input_domains(_graph_with_domains())
    assert domains == {"x": Domain("real"), "d": Domain("nonzero"), "p": Domain("positive"),
                       "i": Domain("index", 4)}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_feeds_respect_domains_and_are_reproducible(seed):
    graph = _graph_with_domains()
    fed = feeds_for(graph, seed)
    assert np.all(np.abs(fed["d"]) >= 0.5) and np.all(fed["p"] >= 0.5)
    assert np.all((fed["i"] >= -4) & (fed["i"] < 4))
    assert np.all(np.abs(fed["x"]) <= 2.0)
    assert all(np.array_equal(fed[k], v) for k, v in feeds_for(graph, seed).items())
    out = run(graph, fed)
    assert all(np.all(np.isfinite(a)) for a in out.values())


def test_arrays_by_dtype():
    rng = np.random.default_rng(0)
    assert array_for(rng, TensorType((50,), "bool")).dtype == np.bool_
    ints = array_for(rng, TensorType((200,), "int32"))
    assert ints.min() >= -4 and ints.max() <= 4
    assert np.all(array_for(rng, TensorType((200,), "int64"), Domain("nonzero")) != 0)
    assert np.all(array_for(rng, TensorType((3,), "float32"), fill=1.5) == 1.5)


# ----- comparing -------------------------------------------------------------------------


def test_compare_allows_rounding_and_catches_errors():
    a = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    assert compare(a, a + np.float32(1e-6)) is None
    bad = a.copy()
    bad[1, 2] += 0.01
    mismatch = compare(a, bad)
    assert mismatch is not None and mismatch.index == (1, 2) and "1 of 12 elements differ" in str(mismatch)
    assert "shape" in str(compare(a, a.reshape(4, 3)))
    assert "dtype" in str(compare(a, a.astype(np.float64)))


def test_compare_treats_nan_and_inf_by_place():
    a = np.array([np.nan, np.inf, 1.0], dtype=np.float32)
    assert compare(a, a.copy()) is None
    assert compare(a, np.array([0.0, np.inf, 1.0], dtype=np.float32)) is not None
    assert compare(a, np.array([np.nan, -np.inf, 1.0], dtype=np.float32)) is not None
    assert compare(np.array([1.0], np.float32), np.array([np.nan], np.float32)) is not None


def test_compare_scales_absolute_tolerance_with_magnitude():
    a = np.array([0.0], dtype=np.float32)
    b = np.array([0.01], dtype=np.float32)
    assert compare(a, b) is not None
    # 0.01 is rounding noise when the operands were of size 1000 (a - b of close values)
    assert compare(a, b, scale=1000.0) is None


def test_compare_integers_exactly():
    assert compare(np.array([1, 2]), np.array([1, 3])).index == (1,)
    assert compare(np.array([True]), np.array([True])) is None
