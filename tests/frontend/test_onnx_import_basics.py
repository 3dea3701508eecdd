"""What an imported Graph looks like: names, provenance, constants, inputs, outputs."""

from __future__ import annotations

import numpy as np
import onnx.defs
from onnx import helper

from fusionlang.frontend import from_onnx
from fusionlang.frontend.onnx_import import MAX_OPSET
from fusionlang.frontend.onnx_ops import CONVERTERS
from fusionlang.ops.interpreter import run as interpret
from onnx_cases import I64, make_model, random_array, run_fusionlang


def test_value_names_are_kept_and_provenance_recorded():
    nodes = [helper.make_node("Conv", ["data_0", "w"], ["0"], name="conv1"), helper.make_node("Relu", ["0"], ["1"])]
    model = make_model(nodes, {"data_0": [1, 2, 4, 4]}, {"1": None}, 13, {"w": np.ones((3, 2, 1, 1), np.float32)})
    graph = from_onnx(model)
    assert graph.inputs == ["data_0"] and graph.outputs == ["1"]
    assert [(n.name, n.op, n.inputs, n.outputs, n.provenance) for n in graph.nodes] == [
        ("conv1", "conv", ["data_0", "w"], ["0"], ("onnx:conv1",)),
        ("Relu#1", "relu", ["0"], ["1"], ("onnx:Relu#1",)),
    ]
    assert list(graph.constants) == ["w"]


def test_attributes_are_normalized():
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"], strides=[2, 2])], {"x": [1, 2, 5, 5]},
                       {"y": None}, 13, {"w": np.ones((3, 2, 3, 3), np.float32)})
    (conv,) = from_onnx(model).nodes
    assert conv.attrs == {"kernel_shape": (3, 3), "strides": (2, 2), "pads": (0, 0, 0, 0), "dilations": (1, 1),
                          "group": 1}


def test_initializers_listed_as_inputs_are_constants():
    model = make_model([helper.make_node("Add", ["x", "b"], ["y"])], {"x": [2, 3], "b": [3]}, {"y": None}, 9,
                       {"b": np.arange(3, dtype=np.float32), "unused": np.zeros(4, np.float32)})
    graph = from_onnx(model)
    assert graph.inputs == ["x"]
    assert list(graph.constants) == ["b"]  # the unused initializer is dropped


def test_types_come_from_inference_not_value_info():
    model = make_model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Transpose", ["r"], ["y"])],
                       {"x": [2, 3]}, {"y": [7, 7]}, 13)
    model.graph.value_info.append(helper.make_tensor_value_info("r", 1, [9]))
    graph = from_onnx(model)
    assert graph.types["r"].shape == (2, 3) and graph.types["y"].shape == (3, 2)


def test_identity_and_dropout_are_removed():
    nodes = [helper.make_node("Identity", ["x"], ["i"]), helper.make_node("Dropout", ["i"], ["d"]),
             helper.make_node("Relu", ["d"], ["y"])]
    graph = from_onnx(make_model(nodes, {"x": [4]}, {"y": None}, 13))
    assert [(n.op, n.inputs) for n in graph.nodes] == [("relu", ["x"])]


def test_outputs_that_are_inputs_constants_or_identities():
    nodes = [helper.make_node("Identity", ["x"], ["same"]), helper.make_node("Identity", ["k"], ["kk"])]
    model = make_model(nodes, {"x": [2]}, {"x": None, "same": None, "k": None, "kk": None}, 13,
                       {"k": np.array([5.0, 6.0], np.float32)})
    graph = from_onnx(model)
    assert graph.outputs == ["x", "same", "k", "kk"]
    x = np.array([1.0, 2.0], np.float32)
    results = interpret(graph, {"x": x})
    for name, want in (("x", x), ("same", x), ("k", [5.0, 6.0]), ("kk", [5.0, 6.0])):
        np.testing.assert_array_equal(results[name], want)


def test_constant_shape_subgraph_is_folded_away():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "zero", "two"], ["s01"]),
             helper.make_node("ReduceProd", ["s01"], ["rows"], keepdims=1),
             helper.make_node("Concat", ["rows", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    model = make_model(nodes, {"x": [2, 3, 4, 5]}, {"y": None}, 13,
                       {"zero": np.array([0], np.int64), "two": np.array([2], np.int64),
                        "minus1": np.array([-1], np.int64)})
    graph = from_onnx(model)
    assert [(n.op, n.attrs["shape"]) for n in graph.nodes] == [("reshape", (6, -1))]
    assert graph.types["y"].shape == (6, 20)
    assert graph.constants == {}


def test_fresh_names_avoid_names_defined_later():
    # the legacy broadcast adds a reshape whose derived names must not take "a1/reshape_0"
    nodes = [helper.make_node("Add", ["a", "b"], ["s"], name="a1", broadcast=1, axis=0),
             helper.make_node("Relu", ["s"], ["a1/reshape_0"]), helper.make_node("Neg", ["a1/reshape_0"], ["y"])]
    model = make_model(nodes, {"a": [2, 3], "b": [2]}, {"y": None}, 6)
    a, b = random_array([2, 3]), random_array([2], 1)
    (y,) = run_fusionlang(model, {"a": a, "b": b})
    np.testing.assert_allclose(y, -np.maximum(a + b[:, None], 0))
    helper_names = [n.name for n in from_onnx(model).nodes if n.op == "reshape"]
    assert len(helper_names) == 1 and helper_names[0].startswith("a1/reshape_")


def test_input_shapes_override_declared_dims():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": [1, 3]}, {"y": None}, 13)
    graph = from_onnx(model, input_shapes={"x": (5, 3)})
    assert graph.types["x"].shape == (5, 3)


def test_integer_graph():
    model = make_model([helper.make_node("Mul", ["x", "x"], ["y"])], {"x": ([3], I64)}, {"y": ([3], I64)}, 13)
    (y,) = run_fusionlang(model, {"x": np.array([1, -2, 3], np.int64)})
    assert y.dtype == np.int64 and y.tolist() == [1, 4, 9]


def test_path_and_bytes_give_the_same_graph(tmp_path):
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": [3]}, {"y": None}, 13)
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    graphs = [from_onnx(path), from_onnx(str(path)), from_onnx(model.SerializeToString()), from_onnx(model)]
    assert {tuple((n.op, tuple(n.inputs), tuple(n.outputs)) for n in g.nodes) for g in graphs} == {
        (("relu", ("x",), ("y",)),)}


def test_newer_opsets_keep_the_forms_converted():
    # models above MAX_OPSET are read with the MAX_OPSET forms: that is only right while
    # no converted op changes its inputs or attributes (checked against the installed onnx)
    latest = onnx.defs.onnx_opset_version()
    # float8e8m0 rounding (fusionlang has no float8e8m0); Range-27's float16 stash type, which the converter reads;
    # SpaceToDepth-28's mode, which the converter reads
    allowed = {"Cast": {"round_mode"}, "CastLike": {"round_mode"}, "Range": {"stash_type"}, "SpaceToDepth": {"mode"},
               "QuantizeLinear": {"precision"}, "DequantizeLinear": {"output_dtype"}}  # (both read)
    introduced = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain == "":
            introduced[schema.name] = min(schema.since_version, introduced.get(schema.name, latest))
    for op_type in sorted(CONVERTERS):
        if introduced[op_type] > MAX_OPSET:
            continue  # an op newer than MAX_OPSET (Swish, SwiGLU): converted in the form it was introduced with
        old, new = onnx.defs.get_schema(op_type, MAX_OPSET), onnx.defs.get_schema(op_type, latest)
        assert [i.name for i in new.inputs] == [i.name for i in old.inputs], op_type
        assert set(new.attributes) - set(old.attributes) <= allowed.get(op_type, set()), op_type


def test_import_names_new_values_without_scanning_the_graph(monkeypatch):
    """Graph.fresh_name collected every name of the graph on each call: an import of
    16,000 nodes sharing one name took 33 s (quadratic), now about a second."""
    from onnx import TensorProto, helper

    from fusionlang.ir.graph import Graph

    scans = []
    real = Graph._taken_names
    monkeypatch.setattr(Graph, "_taken_names", lambda self: scans.append(1) or real(self))
    nodes, previous = [], "x"
    for k in range(300):
        nodes.append(helper.make_node("Relu", [previous], [f"v{k}"], name="same"))
        previous = f"v{k}"
    graph = helper.make_graph(nodes, "same_names", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info(previous, TensorProto.FLOAT, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    imported = from_onnx(model)
    assert len({n.name for n in imported.nodes}) == len(imported.nodes) == 300
    assert scans == []
