"""Structural verification: each defect kind has a pinned message."""

import numpy as np
import pytest

from fusionlang.errors import GraphError
from fusionlang.ir import Graph, Node, TensorType, verify_structure

F = TensorType((4,))


def base() -> Graph:
    g = Graph("g")
    g.add_input("x", F)
    g.add_node(Node("a", "relu", ["x"], ["va"]), [F])
    g.outputs.append("va")
    return g


def test_a_well_formed_graph_passes():
    verify_structure(base())


def test_dangling_edge():
    g = base()
    g.nodes.append(Node("b", "add", ["va", "nowhere"], ["vb"]))
    g.types["vb"] = F
    with pytest.raises(GraphError, match=r"node 'b' \(add\) reads 'nowhere', which nothing defines"):
        verify_structure(g)


def test_duplicate_node_names():
    g = base()
    g.nodes.append(Node("a", "exp", ["va"], ["vb"]))
    g.types["vb"] = F
    with pytest.raises(GraphError, match=r"two nodes are named 'a'"):
        verify_structure(g)


def test_value_with_two_definitions():
    g = base()
    g.add_constant("c", np.zeros(4, np.float32))
    g.nodes.append(Node("b", "exp", ["va"], ["c"]))
    with pytest.raises(GraphError, match=r"value 'c' is defined twice \(constant and output of node 'b'\)"):
        verify_structure(g)


def test_undefined_graph_output():
    g = base()
    g.outputs.append("missing")
    with pytest.raises(GraphError, match=r"graph output 'missing' is not defined"):
        verify_structure(g)


def test_untyped_value():
    g = base()
    g.nodes.append(Node("b", "exp", ["va"], ["vb"]))
    with pytest.raises(GraphError, match=r"value 'vb' \(output of node 'b'\) has no type"):
        verify_structure(g)


def test_out_of_order_nodes():
    g = base()
    g.nodes.insert(0, Node("b", "exp", ["va"], ["vb"]))
    g.types["vb"] = F
    with pytest.raises(GraphError, match=r"'b' reads 'va' before it is computed"):
        verify_structure(g)


def test_cycle():
    g = Graph("loop")
    g.add_input("x", F)
    g.nodes = [Node("p", "add", ["x", "vq"], ["vp"]), Node("q", "relu", ["vp"], ["vq"])]
    g.types.update(vp=F, vq=F)
    with pytest.raises(GraphError, match=r"cycle through nodes"):
        verify_structure(g)


def test_node_without_outputs():
    g = base()
    g.nodes.append(Node("b", "exp", ["va"], []))
    with pytest.raises(GraphError, match=r"node 'b' \(exp\) has no outputs"):
        verify_structure(g)
