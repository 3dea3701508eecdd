"""Graph structure: construction, topological order, cycles, dead code, copies."""

import numpy as np
import pytest

from fusionlang.errors import GraphError, ShapeError
from fusionlang.ir import Graph, Node, TensorType, format_graph, post_dominators, to_networkx
from fusionlang.ir.nxview import SINK

F = TensorType((2, 3))


def chain_graph() -> Graph:
    g = Graph("chain")
    g.add_input("x", F)
    g.add_constant("c", np.ones((2, 3), np.float32))
    g.add_node(Node("a", "add", ["x", "c"], ["va"]), [F])
    g.add_node(Node("b", "relu", ["va"], ["vb"]), [F])
    g.add_node(Node("dead", "exp", ["va"], ["vd"]), [F])
    g.outputs.append("vb")
    return g


def test_tensor_type_basics():
    t = TensorType((1, 3, 224, 224), "f32")
    assert (t.rank, t.size, t.nbytes, str(t)) == (4, 150528, 602112, "f32[1,3,224,224]")
    assert TensorType(()).size == 1


@pytest.mark.parametrize("shape, dtype, message", [
    ((2, -1), "float32", r"negative dimension in shape \(2, -1\)"),
    ((2,), "complex64", r"unsupported dtype 'complex64'"),
    ((2,), "no-such-type", r"unknown dtype 'no-such-type'"),
])
def test_tensor_type_rejects_bad_input(shape, dtype, message):
    with pytest.raises(ShapeError, match=message):
        TensorType(shape, dtype)


def test_a_value_defined_twice_is_rejected():
    g = chain_graph()
    with pytest.raises(GraphError, match=r"value 'va' is defined twice"):
        g.add_node(Node("again", "relu", ["x"], ["va"]), [F])


def test_toposort_restores_order_and_keeps_free_order():
    g = chain_graph()
    g.nodes.reverse()
    g.toposort()
    names = [n.name for n in g.nodes]
    assert names.index("a") < names.index("b") and names.index("a") < names.index("dead")


def test_toposort_names_the_nodes_on_a_cycle():
    g = Graph("loop")
    g.add_input("x", F)
    g.add_node(Node("p", "add", ["x", "vq"], ["vp"]), [F])
    g.add_node(Node("q", "relu", ["vp"], ["vq"]), [F])
    with pytest.raises(GraphError, match=r"cycle through nodes p -> q -> p"):
        g.toposort()


def test_toposort_names_a_dangling_read():
    g = Graph("dangling")
    g.add_input("x", F)
    g.add_node(Node("p", "add", ["x", "ghost"], ["vp"]), [F])
    with pytest.raises(GraphError, match=r"node 'p' \(add\) reads 'ghost', which nothing defines"):
        g.toposort()


def test_remove_unused_drops_dead_nodes_and_constants():
    g = chain_graph()
    g.add_constant("unused", np.zeros(2, np.float32))
    assert g.remove_unused() == 1
    assert [n.name for n in g.nodes] == ["a", "b"]
    assert "unused" not in g.constants and "vd" not in g.types


def test_copy_is_structural():
    g = chain_graph()
    h = g.copy()
    h.nodes[0].attrs["k"] = 1
    h.nodes[0].inputs[0] = "c"
    assert "k" not in g.nodes[0].attrs and g.nodes[0].inputs[0] == "x"
    assert h.constants["c"] is g.constants["c"]
    assert h.fresh_name("a") not in set(g.types) | {n.name for n in g.nodes}


def test_the_op_registry_is_a_declared_field_that_copies_keep():
    assert Graph("plain").registry is None  # None: the built-in op registry
    registry = object()  # ir does not know what a registry is; it only carries one
    g = Graph("with_defs", registry=registry)
    assert g.copy().registry is registry
    g.registry = None
    assert g.copy().registry is None


def test_zero_d_constants_stay_zero_d():
    g = Graph()
    g.add_constant("s", np.float32(2.5))
    assert g.types["s"] == TensorType((), "float32") and g.constants["s"].shape == ()


def test_consumers_and_producers():
    g = chain_graph()
    assert [n.name for n in g.consumers()["va"]] == ["b", "dead"]
    assert g.producers()["vb"].name == "b"
    with pytest.raises(GraphError, match=r"no node named 'zz' in graph 'chain'"):
        g.node("zz")


def test_printer_shows_types_attrs_and_constants():
    g = chain_graph()
    g.nodes[0].attrs["note"] = "x"
    text = format_graph(g)
    assert "graph chain(%x: f32[2,3]) {" in text
    assert "const %c: f32[2,3] = tensor[1.0, 1.0, 1.0, 1.0, 1.0, 1.0]" in text
    assert '%va: f32[2,3] = add(%x, %c) {note="x"}  # a' in text
    assert text.splitlines()[-2:] == ["  return %vb", "}"]


def test_networkx_view_and_post_dominators():
    g = Graph("diamond")
    g.add_input("x", F)
    g.add_node(Node("s", "relu", ["x"], ["vs"]), [F])
    g.add_node(Node("l", "exp", ["vs"], ["vl"]), [F])
    g.add_node(Node("r", "neg", ["vs"], ["vr"]), [F])
    g.add_node(Node("j", "add", ["vl", "vr"], ["vj"]), [F])
    g.outputs.append("vj")
    dig = to_networkx(g)
    assert set(dig.edges) == {("s", "l"), ("s", "r"), ("l", "j"), ("r", "j")}
    assert dig.edges["s", "l"]["values"] == ["vs"]
    assert post_dominators(g) == {"s": "j", "l": "j", "r": "j", "j": SINK}
