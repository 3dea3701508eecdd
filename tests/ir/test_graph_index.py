"""Graph.index: the name -> node, producer and consumer maps are built once per version
of the graph and follow every kind of edit."""

import copy
import pickle

import numpy as np
import pytest

from fusionlang.errors import GraphError
from fusionlang.ir import Graph, Node, TensorType

F = TensorType((2, 3))


def diamond() -> Graph:
    g = Graph("diamond")
    g.add_input("x", F)
    g.add_constant("c", np.ones((2, 3), np.float32))
    g.add_node(Node("a", "add", ["x", "c"], ["va"]), [F])
    g.add_node(Node("b", "relu", ["va"], ["vb"]), [F])
    g.add_node(Node("d", "mul", ["va", "va"], ["vd"]), [F])
    g.add_node(Node("e", "add", ["vb", "vd"], ["ve"]), [F])
    g.outputs.append("ve")
    return g


def test_the_index_is_built_once_while_the_graph_is_unchanged():
    g = diamond()
    first = g.index
    g.node("b"), g.producers(), g.consumers()
    assert g.index is first


def test_the_maps_say_who_computes_and_who_reads_each_value():
    g = diamond()
    assert g.node("d").op == "mul"
    assert g.index.producers["vd"] is g.node("d") and "x" not in g.index.producers
    assert [n.name for n in g.index.consumers["va"]] == ["b", "d"]  # d reads va twice, listed once
    with pytest.raises(GraphError, match="no node named 'zz' in graph 'diamond'"):
        g.node("zz")


def test_the_maps_are_read_only_and_the_copies_are_the_callers():
    g = diamond()
    with pytest.raises(TypeError):
        g.index.by_name["zz"] = g.node("a")
    mine = g.consumers()
    mine["va"].clear()
    del g.producers()["vb"]
    assert [n.name for n in g.consumers()["va"]] == ["b", "d"] and "vb" in g.index.producers


def test_add_node_remove_unused_and_assigning_nodes_drop_the_index():
    g = diamond()
    g.index
    g.add_node(Node("f", "exp", ["ve"], ["vf"]), [F])
    assert g.node("f").inputs == ["ve"] and g.index.consumers["ve"][0].name == "f"
    g.remove_unused()
    with pytest.raises(GraphError):
        g.node("f")
    g.nodes = [n for n in g.nodes if n.name != "e"]
    assert "vd" not in g.index.consumers


def test_growing_or_shrinking_the_node_list_in_place_is_noticed():
    g = diamond()
    g.index
    dropped = g.nodes.pop()
    with pytest.raises(GraphError):
        g.node(dropped.name)
    g.nodes.append(dropped)
    assert g.node(dropped.name) is dropped


def test_invalidate_after_editing_a_node_in_place():
    g = diamond()
    g.index
    b = g.node("b")
    b.name, b.inputs = "b2", ["vd"]
    g.invalidate()
    assert g.node("b2") is b and [n.name for n in g.index.consumers["vd"]] == ["b2", "e"]


def test_a_copy_has_its_own_index():
    g = diamond()
    other = g.copy()
    assert other.node("a") is not g.node("a") and other.index is not g.index


def test_a_graph_with_an_index_still_pickles_and_deep_copies():
    g = diamond()
    g.index
    for other in (pickle.loads(pickle.dumps(g)), copy.deepcopy(g)):
        assert [n.name for n in other.index.consumers["va"]] == ["b", "d"] and other.node("e") is not g.node("e")
