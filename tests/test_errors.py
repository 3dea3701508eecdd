"""Error messages stay readable whatever the input: a list of numbers from a model (an
attribute of 200,000 entries made a 1.5 MB error line) is cut to its first entries, its
last and its length."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from fusionlang.cli import main
from fusionlang.errors import LIST_SHOWN, FuseError, ShapeError, abbreviated


def test_a_long_list_is_cut_to_its_ends_and_length():
    message = f"node 'n': perm {list(range(200_000))} is not a permutation of 4 axes"
    short = abbreviated(message)
    assert short == "node 'n': perm [0, 1, 2, 3, 4, 5, 6, 7, ..., 199999] (200000 entries) is not a permutation of 4 axes"
    assert str(ShapeError(message)) == short


def test_short_lists_and_short_messages_are_kept():
    assert abbreviated(f"{'x' * 300} {list(range(LIST_SHOWN))}") == f"{'x' * 300} {list(range(LIST_SHOWN))}"
    assert str(FuseError("pads [1, 2]")) == "pads [1, 2]"


def test_a_model_with_a_huge_attribute_gets_a_short_error(tmp_path, capsys):
    node = helper.make_node("Transpose", ["x"], ["y"], perm=list(range(200_000)))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, str(tmp_path / "m.onnx"))
    assert main(["fuse", str(tmp_path / "m.onnx")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert len(line) < 300 and "(200000 entries)" in line
