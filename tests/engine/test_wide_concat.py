"""A concat wider than a kernel may take is partitioned as a tree of narrower concats."""

from __future__ import annotations

import numpy as np
import pytest

import fusionlang
from fusionlang import reference
from fusionlang.engine.wide_concat import WIDEST_CONCAT, concat_fan_in, split_wide_concats
from fusionlang.ir.graph import Graph, Node
from fusionlang.ir.types import TensorType
from fusionlang.ops import GraphBuilder


def _wide(n: int, *, repeated: bool = False, axis: int = 1):
    """concat of n relus of f32[2,3] inputs (or of one input n times) along ``axis``."""
    b = GraphBuilder(f"wide{n}")
    if repeated:
        x = b.input("x", (2, 3))
        parts = [x] * n
    else:
        parts = [b.relu(b.input(f"x{k}", (2, 3))) for k in range(n)]
    b.output(b.concat(*parts, axis=axis, name="cat"))
    graph = b.build()
    rng = np.random.default_rng(n)
    return graph, {name: rng.standard_normal((2, 3)).astype(np.float32) for name in graph.inputs}


def _concats(graph):
    return [node for node in graph.nodes if node.op == "concat"]


@pytest.mark.parametrize("n, fan_in, levels", [(10, 3, 3), (9, 3, 2), (200, 95, 2), (1000, 8, 4)])
def test_each_concat_of_the_tree_reads_at_most_fan_in_values(n, fan_in, levels):
    graph, _ = _wide(n)
    split = split_wide_concats(graph, fan_in)
    assert max(len(node.inputs) for node in _concats(split)) <= fan_in
    root = split.node("cat")  # the root keeps the name and output of the concat it replaces
    assert root.outputs == graph.node("cat").outputs and split.outputs == graph.outputs
    depth, values = 1, list(root.inputs)
    producers = split.index.producers
    while any(producers[v].op == "concat" for v in values):
        depth += 1
        values = [u for v in values for u in (producers[v].inputs if producers[v].op == "concat" else [v])]
    assert depth == levels and values == graph.node("cat").inputs  # every input once, in order
    assert len(_concats(graph)) == 1  # the graph handed in is left as it was


@pytest.mark.parametrize("repeated", [False, True])
@pytest.mark.parametrize("axis", [1, 0, -1])
def test_the_tree_computes_the_concat_bit_for_bit(repeated, axis):
    graph, feeds = _wide(50, repeated=repeated, axis=axis)
    split = split_wide_concats(graph, 4)
    split.toposort()  # the order given is already topological: toposort keeps it
    assert [n.name for n in split.nodes] == [n.name for n in split_wide_concats(graph, 4).nodes]
    expected, got = reference.run(graph, feeds), reference.run(split, feeds)
    assert list(got) == list(expected)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name])


def test_a_narrow_concat_is_left_alone():
    graph, _ = _wide(5)
    assert split_wide_concats(graph, 5) is graph


@pytest.mark.parametrize("max_args, fan_in", [(96, 95), (1, 2), (3, 2), (10_000, WIDEST_CONCAT)])
def test_the_fan_in_follows_max_args_within_bounds(max_args, fan_in):
    assert concat_fan_in({"max_args": max_args}) == fan_in


def test_a_strategy_without_max_args_still_bounds_the_fan_in():
    assert concat_fan_in({}) == WIDEST_CONCAT


@pytest.mark.parametrize("rules, strategy", [("apollo", "apollo"), ("tvm", "tvm"), ("dnnfusion", "dp")])
def test_fuse_splits_a_wide_concat_and_records_why(rules, strategy):
    graph, _ = _wide(300)
    plan = fusionlang.fuse(graph, rules, strategy, feedback=False)
    widest = max(len(node.inputs) for node in _concats(plan.graph))
    assert widest <= (WIDEST_CONCAT if strategy == "tvm" else 95)
    noted = [g for g in plan.groups if any(r.startswith("split: concat of 300 inputs") for r in g.rules)]
    assert {n for g in noted for n in g.nodes if plan.graph.node(n).op == "concat"} == \
        {node.name for node in _concats(plan.graph)}
    assert plan.original is graph and len(_concats(graph)) == 1


def test_max_args_set_lower_splits_narrower():
    graph, _ = _wide(300)
    plan = fusionlang.fuse(graph, "apollo", options={"max_args": 17}, feedback=False)
    assert max(len(node.inputs) for node in _concats(plan.graph)) == 16


def test_a_concat_named_as_its_output_gets_parts_named_alike():
    graph = Graph("same_names")
    graph.add_input("x", TensorType((1, 2)))
    graph.add_node(Node("y", "concat", ["x"] * 10, ["y"], {"axis": 1}), [TensorType((1, 20))])
    graph.outputs = ["y"]
    split = split_wide_concats(graph, 3)
    assert [(n.name, n.outputs) for n in split.nodes] == [
        ("y_part0", ["y_part0"]), ("y_part1", ["y_part1"]), ("y_part2", ["y_part2"]), ("y_part3", ["y_part3"]),
        ("y", ["y"])]
    assert split.node("y").inputs == ["y_part3", "x"] and split.types["y_part3"] == TensorType((1, 18))


# ----- splits: the mirror image ------------------------------------------------------------


def _wide_split(n: int, axis: int = 1):
    """x: f32[2, 3n] split along ``axis`` into n parts of 3 (different sizes at the ends), each relu'd."""
    graph = Graph(f"split{n}")
    sizes = [1] + [3] * (n - 2) + [5]
    total = sum(sizes)
    shape = (2, total) if axis in (1, -1) else (total, 2)
    graph.add_input("x", TensorType(shape))
    outs = [f"s{k}" for k in range(n)]
    graph.add_node(Node("sp", "split", ["x"], outs, {"axis": axis, "split": sizes}),
                   [TensorType((2, s) if axis in (1, -1) else (s, 2)) for s in sizes])
    for k in range(n):
        graph.add_node(Node(f"r{k}", "relu", [outs[k]], [f"y{k}"]), [graph.types[outs[k]]])
    graph.outputs = [f"y{k}" for k in range(n)]
    feeds = {"x": np.random.default_rng(n).standard_normal(shape).astype(np.float32)}
    return graph, feeds


@pytest.mark.parametrize("n, fan_out", [(10, 3), (200, 95), (1000, 8)])
@pytest.mark.parametrize("axis", [1, 0, -1])
def test_a_wide_split_is_a_tree_of_narrow_ones_that_computes_the_same(n, fan_out, axis):
    from fusionlang.engine.wide_concat import split_wide_splits

    graph, feeds = _wide_split(n, axis)
    split = split_wide_splits(graph, fan_out)
    splits = [node for node in split.nodes if node.op == "split"]
    assert len(splits) > 1 and max(len(node.outputs) for node in splits) <= fan_out
    assert split.node("sp").inputs == ["x"] and len(graph.node("sp").outputs) == n  # the input graph is kept
    assert all(WIDE_SPLIT in " ".join(node.provenance) for node in splits)
    expected, got = reference.run(graph, feeds), reference.run(split, feeds)
    for name in graph.outputs:
        np.testing.assert_array_equal(got[name], expected[name])


WIDE_SPLIT = "split: split into "


def test_fuse_compile_and_run_a_split_into_a_thousand_outputs():
    """One split of 1,000 outputs was one kernel writing 1,000 pointers: gcc did not finish in minutes."""
    graph, feeds = _wide_split(1000)
    plan = fusionlang.fuse(graph, "apollo")
    assert max(len(plan.graph.node(n).outputs) for g in plan.groups for n in g.nodes) <= 95
    assert any(r.startswith(WIDE_SPLIT + "1000 outputs") for g in plan.groups for r in g.rules)
    got, expected = fusionlang.compile(plan).run(feeds), reference.run(graph, feeds)
    for name in graph.outputs:
        np.testing.assert_array_equal(got[name], expected[name])
