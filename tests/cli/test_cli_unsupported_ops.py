"""A model with several unsupported ops: the CLI names them all, still on one line."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from fusionlang.cli import main


def two_unsupported_ops() -> onnx.ModelProto:
    nodes = [helper.make_node("Unique", ["x"], ["h"], name="hard"),
             helper.make_node("Normalizer", ["h"], ["y"], name="norm", domain="ai.onnx.ml")]
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("x", "y")]
    graph = helper.make_graph(nodes, "two", info[:1], info[1:])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])


def test_the_cli_prints_every_unsupported_op_on_one_line(tmp_path, capsys):
    path = tmp_path / "two.onnx"
    onnx.save(two_unsupported_ops(), str(path))
    assert main(["fuse", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (f"fusionlang: error: model {str(path)!r} uses 2 op types that fusionlang does not import "
                   "(2 nodes): Unique (domain ai.onnx, opset 17): 1 node, first 'hard'; Normalizer (domain "
                   "ai.onnx.ml, opset 3; ONNX-ML classical machine-learning ops, not supported): 1 node, "
                   "first 'norm'\n")
