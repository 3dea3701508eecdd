"""Bad models and unsupported forms: the error class and the words a user acts on."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from fusionlang.errors import FuseError, InputError, ModelError, RuntimeInputError, ShapeError, UnsupportedOpError
from fusionlang.frontend import from_onnx
from onnx_cases import I64, make_model, tensor_info


def relu_model() -> onnx.ModelProto:
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), helper.make_node("Relu", ["c"], ["y"])]
    return make_model(nodes, {"x": [1, 2, 5, 5]}, {"y": None}, 13, {"w": np.ones((3, 2, 3, 3), np.float32)})


def test_truncated_file(tmp_path):
    path = tmp_path / "x.onnx"
    data = relu_model().SerializeToString()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match=r"^cannot read model '.*x\.onnx': not a valid ONNX file \(DecodeError"):
        from_onnx(path)


def test_garbage_bytes(tmp_path):
    path = tmp_path / "garbage.onnx"
    path.write_bytes(b"\x00\xff this is not a protobuf \xfe" * 8)
    with pytest.raises(ModelError, match=r"^cannot read model '.*garbage\.onnx': not a valid ONNX file"):
        from_onnx(str(path))


def test_missing_file(tmp_path):
    with pytest.raises(ModelError, match=r"^cannot read model '.*nope\.onnx': No such file"):
        from_onnx(tmp_path / "nope.onnx")


def test_bytes_without_graph():
    with pytest.raises(ModelError, match="cannot read model '<bytes>': it contains no graph"):
        from_onnx(b"")


def test_wrong_argument_type():
    with pytest.raises(ModelError, match="expected a path, bytes or onnx.ModelProto, got int"):
        from_onnx(42)


def test_unsupported_op_names_node_op_domain_and_opset():
    model = make_model([helper.make_node("NonMaxSuppression", ["b", "s"], ["y"], name="nms_1")],
                       {"b": [1, 4, 4], "s": [1, 1, 4]}, {"y": ([3, 3], I64)}, 11)
    with pytest.raises(UnsupportedOpError) as info:
        from_onnx(model)
    assert str(info.value) == ("model 'test' uses 1 op type that fusionlang does not import (1 node):\n"
                               "  NonMaxSuppression (domain ai.onnx, opset 11): 1 node, first 'nms_1'")


def test_unsupported_domain():
    node = helper.make_node("FusedConv", ["x"], ["y"], domain="com.microsoft")
    graph = helper.make_graph([node], "g", [tensor_info("x", [1, 2])], [tensor_info("y", None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("com.microsoft", 1)])
    with pytest.raises(UnsupportedOpError, match=r"\n  FusedConv \(domain com.microsoft, opset 1; onnxruntime contrib "
                                                 r"ops, not supported\): 1 node, first 'FusedConv#0'$"):
        from_onnx(model)


def mixed_unsupported_model() -> onnx.ModelProto:
    """Two unconverted default-domain ops (one twice), an ONNX-ML op, a training op and a made-up op."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Unique", ["r"], ["h1"], name="hard_a"),
             helper.make_node("Unique", ["h1"], ["h2"]),
             helper.make_node("Unique", ["h2"], ["h3"], name="hard_c"),
             helper.make_node("Relu", ["h3"], ["y1"]),
             helper.make_node("Normalizer", ["y1"], ["y2"], name="norm", domain="ai.onnx.ml"),
             helper.make_node("Adagrad", ["y2"], ["y3"], name="grad", domain="ai.onnx.preview.training"),
             helper.make_node("NoSuchOp", ["y3"], ["y4"], name="typo"),
             helper.make_node("NonZero", ["y4"], ["y"], name="lp")]
    graph = helper.make_graph(nodes, "mixed", [tensor_info("x", [2, 3])], [tensor_info("y", None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3),
                                                   helper.make_opsetid("ai.onnx.preview.training", 1)])


def test_every_unsupported_op_is_reported_at_once():
    with pytest.raises(UnsupportedOpError) as info:
        from_onnx(mixed_unsupported_model())
    # the most used op type first, then by domain and name; each line says what to look up
    assert str(info.value).split("\n") == [
        "model 'mixed' uses 5 op types that fusionlang does not import (7 nodes):",
        "  Unique (domain ai.onnx, opset 17): 3 nodes, first 'hard_a'",
        "  NoSuchOp (domain ai.onnx, opset 17; not an ONNX op): 1 node, first 'typo'",
        "  NonZero (domain ai.onnx, opset 17): 1 node, first 'lp'",
        "  Normalizer (domain ai.onnx.ml, opset 3; ONNX-ML classical machine-learning ops, not supported): "
        "1 node, first 'norm'",
        "  Adagrad (domain ai.onnx.preview.training, opset 1; ONNX training ops, not supported): 1 node, "
        "first 'grad'",
    ]
    assert isinstance(info.value, FuseError)


def test_an_undeclared_domain_is_named_as_such():
    node = helper.make_node("Op", ["x"], ["y"], name="op", domain="org.example")
    graph = helper.make_graph([node], "g", [tensor_info("x", [1])], [tensor_info("y", None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(UnsupportedOpError, match=r"  Op \(domain org.example, opset undeclared; a custom domain, not "
                                                 r"supported\): 1 node, first 'op'$"):
        from_onnx(model)


def test_shape_mismatch_names_the_node():
    model = make_model([helper.make_node("Add", ["a", "b"], ["y"], name="add_bias")], {"a": [2, 3], "b": [4]},
                       {"y": None}, 13)
    with pytest.raises(ShapeError, match=r"node 'add_bias' \(add\): shapes \[2, 3\], \[4\] do not broadcast"):
        from_onnx(model)


def test_legacy_broadcast_zero_requires_equal_shapes():
    model = make_model([helper.make_node("Mul", ["a", "b"], ["y"], name="m")], {"a": [2, 3], "b": [3]},
                       {"y": None}, 6)
    with pytest.raises(ShapeError, match=r"node 'm' \(Mul\): shapes \[2, 3\] and \[3\] differ but broadcast=0"):
        from_onnx(model)


def test_legacy_broadcast_axis_mismatch():
    model = make_model([helper.make_node("Add", ["a", "b"], ["y"], name="a1", broadcast=1, axis=0)],
                       {"a": [2, 3], "b": [3]}, {"y": None}, 6)
    with pytest.raises(ShapeError, match=r"node 'a1' \(Add\): B of shape \[3\] does not match A \[2, 3\] at axis 0"):
        from_onnx(model)


def test_shape_fed_as_input_names_the_input_and_how_to_give_it():
    model = make_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="r")],
                       {"x": [2, 3], "s": ([2], I64)}, {"y": None}, 13)
    with pytest.raises(RuntimeInputError) as info:
        from_onnx(model)
    assert str(info.value) == (
        "node 'r' (Reshape): input 1 (shape) comes from graph input 's', whose value only a run knows (fusionlang "
        "compiles it as a constant): give it with constant_inputs={'s': array} in fusionlang.from_onnx, run the "
        "model through fusionlang.Specializer (as the ONNX backend does), or `fusionlang run MODEL --input "
        "s=FILE.npy`")
    assert "malformed" not in str(info.value) and info.value.values == ("s",)
    graph = from_onnx(model, constant_inputs={"s": np.array([3, 2], np.int64)})
    assert graph.inputs == ["x"] and graph.types["y"].shape == (3, 2)


def test_value_computed_from_an_input_names_that_input():
    nodes = [helper.make_node("Add", ["s", "one"], ["t"]), helper.make_node("Reshape", ["x", "t"], ["y"], name="r")]
    model = make_model(nodes, {"x": [2, 3], "s": ([2], I64)}, {"y": None}, 13, {"one": np.ones(2, np.int64)})
    with pytest.raises(RuntimeInputError, match=r"input 1 \(shape\) comes from graph input 's'"):
        from_onnx(model)
    graph = from_onnx(model, constant_inputs={"s": np.array([-2, 5], np.int64)})
    assert graph.types["y"].shape == (1, 2 * 3)


def test_constant_inputs_must_name_inputs_and_fit_them():
    model = make_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="r")],
                       {"x": [2, 3], "s": ([2], I64)}, {"y": None}, 13)
    with pytest.raises(InputError, match="constant_inputs names 'w', which is not a graph input"):
        from_onnx(model, constant_inputs={"w": np.array([1])})
    with pytest.raises(InputError, match=r"constant_inputs\['s'\] has dtype int32, the model declares int64"):
        from_onnx(model, constant_inputs={"s": np.array([3, 2], np.int32)})
    with pytest.raises(InputError, match=r"constant_inputs\['s'\] has shape \[3\], the model declares \[2\]"):
        from_onnx(model, constant_inputs={"s": np.array([3, 2, 1], np.int64)})


def test_symbolic_dim_needs_input_shapes():
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [tensor_info("x", ["N", 3, None])], [tensor_info("y", None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(RuntimeInputError) as info:
        from_onnx(model)
    message = str(info.value)
    assert "inputs whose shapes only a run knows: input 'x' dim 0 ('N'), dim 2" in message
    assert "pass input_shapes=" in message and "--input-shape NAME=DxD" in message
    assert info.value.shapes == ("x",)
    graph = from_onnx(model, input_shapes={"x": [4, 3, 2]})
    assert graph.types["x"].shape == (4, 3, 2)
    assert graph.types["y"].shape == (4, 3, 2)


def test_input_without_any_shape():
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)], [tensor_info("y", None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(ModelError, match="input 'x' has no declared shape"):
        from_onnx(model)


def test_input_shapes_must_name_inputs_and_match_rank():
    model = relu_model()
    with pytest.raises(ModelError, match="input_shapes names 'w', which is not a graph input"):
        from_onnx(model, input_shapes={"w": [1]})
    with pytest.raises(ModelError, match="input_shapes gives 'x' rank 2, but the model declares rank 4"):
        from_onnx(model, input_shapes={"x": [1, 2]})


def test_used_dropout_mask():
    model = make_model([helper.make_node("Dropout", ["x"], ["y", "mask"], name="drop")], {"x": [2, 3]},
                       {"y": None, "mask": ([2, 3], TensorProto.BOOL)}, 12)
    with pytest.raises(UnsupportedOpError, match=r"node 'drop': Dropout \(domain ai.onnx, opset 12\) is not supported "
                                                 r"in this form: the dropout mask \(output 1, 'mask', is used\)"):
        from_onnx(model)


def test_training_dropout():
    model = make_model([helper.make_node("Dropout", ["x", "r", "t"], ["y"], name="drop")], {"x": [2, 3]},
                       {"y": None}, 13, {"r": np.array(0.5, np.float32), "t": np.array(True)})
    with pytest.raises(UnsupportedOpError, match=r"training_mode=true"):
        from_onnx(model)


def test_used_maxpool_indices():
    model = make_model([helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], name="pool")],
                       {"x": [1, 1, 4, 4]}, {"y": None, "i": ([1, 1, 3, 3], I64)}, 12)
    with pytest.raises(UnsupportedOpError, match=r"node 'pool'.*MaxPool indices \(output 1, 'i', is used\)"):
        from_onnx(model)


def test_old_opset_is_refused():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": [2]}, {"y": None}, 5)
    with pytest.raises(ModelError, match="uses ai.onnx opset 5; fusionlang reads opset 6 and later"):
        from_onnx(model)


def test_value_read_before_definition():
    nodes = [helper.make_node("Relu", ["t"], ["y"], name="late"), helper.make_node("Relu", ["x"], ["t"])]
    model = make_model(nodes, {"x": [2]}, {"y": None}, 13)
    with pytest.raises(ModelError, match=r"node 'late' \(Relu\) reads 't', which no earlier node, graph input or "
                                         "initializer defines"):
        from_onnx(model)


def test_unsupported_input_dtype():
    model = make_model([helper.make_node("Identity", ["x"], ["y"])], {"x": ([2], TensorProto.STRING)},
                       {"y": ([2], TensorProto.STRING)}, 13)
    with pytest.raises(ModelError, match="graph input 'x' has element type STRING, which fusionlang does not support"):
        from_onnx(model)


def test_uneven_split_without_sizes():
    model = make_model([helper.make_node("Split", ["x"], ["a", "b"], axis=1, name="sp")], {"x": [2, 5]},
                       {"a": None, "b": None}, 13)
    with pytest.raises(ShapeError, match=r"node 'sp' \(Split\): cannot split dim 5 of axis 1 into 2 equal parts"):
        from_onnx(model)


def test_bad_attribute_type_is_a_fuse_error():
    model = make_model([helper.make_node("Transpose", ["x"], ["y"], perm=[0, 0], name="t")], {"x": [2, 3]},
                       {"y": None}, 13)
    with pytest.raises(ShapeError, match=r"node 't' \(transpose\): perm \[0, 0\] is not a permutation"):
        from_onnx(model)


def test_constant_without_value():
    model = make_model([helper.make_node("Constant", [], ["y"], value_string="hi", name="k")], {},
                       {"y": ([], TensorProto.STRING)}, 13)
    with pytest.raises(UnsupportedOpError, match=r"node 'k': Constant .*\(string tensors are not supported\)"):
        from_onnx(model)


@pytest.mark.parametrize("attribute", [helper.make_attribute("strides", [0, 1]), helper.make_attribute("pads", [1, 1]),
                                       helper.make_attribute("group", 5),
                                       helper.make_attribute("auto_pad", "SAME_WHATEVER"),
                                       helper.make_attribute("kernel_shape", [3.5, 2.0])],
                         ids=["zero-stride", "short-pads", "bad-group", "bad-auto-pad", "float-kernel"])
def test_malformed_conv_attributes_raise_fuse_errors(attribute):
    model = relu_model()
    model.graph.node[0].attribute.append(attribute)
    with pytest.raises(FuseError, match="node 'conv'"):
        from_onnx(model)


@pytest.mark.parametrize("op_type, inputs, message", [
    ("Add", ["x"], "add needs its input 1 (b), which the model leaves out"),
    ("Add", ["x", ""], "add needs its input 1 (b), which the model leaves out"),
    ("MatMul", ["", "x"], "matmul needs its input 0 (a), which the model leaves out"),
])
def test_a_required_input_left_out(op_type, inputs, message):
    model = make_model([helper.make_node(op_type, inputs, ["y"], name="n")], {"x": [2, 2]}, {"y": None}, 17)
    with pytest.raises(ModelError, match=rf"^node 'n' \({op_type}\): {re.escape(message)}$"):
        from_onnx(model)
