"""`fusionlang run` on models with sequence ops: a bad position a run feeds, or a sequence the
model outputs, is a one-line error with exit status 2."""

from __future__ import annotations

import numpy as np
import onnx
from cli_helpers import one_line_error
from onnx import TensorProto, helper

from fusionlang.cli import main


def save(tmp_path, nodes, inputs, outputs) -> str:
    graph = helper.make_graph(nodes, "seq", inputs, outputs)
    path = tmp_path / "seq.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)]), path)
    return str(path)


def array_file(tmp_path, name, array) -> str:
    np.save(tmp_path / f"{name}.npy", array)
    return f"{name}={tmp_path / name}.npy"


def sequence_at_model(tmp_path) -> str:
    nodes = [helper.make_node("SplitToSequence", ["x"], ["seq"], axis=0),
             helper.make_node("SequenceAt", ["seq", "pos"], ["y"])]
    return save(tmp_path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2]),
                                  helper.make_tensor_value_info("pos", TensorProto.INT64, [])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])


def test_a_fed_position_runs_and_an_out_of_range_one_is_a_one_line_error(capsys, tmp_path):
    model = sequence_at_model(tmp_path)
    x = array_file(tmp_path, "x", np.arange(6, dtype=np.float32).reshape(3, 2))
    assert main(["run", model, "--input", x, "--input", array_file(tmp_path, "pos", np.array(-1, np.int64))]) == 0
    capsys.readouterr()
    message = one_line_error(capsys, ["run", model, "--input", x,
                                      "--input", array_file(tmp_path, "pos", np.array(3, np.int64))])
    assert message == ("fusionlang: error: node 'SequenceAt#1' (SequenceAt): position 3 is out of range for a "
                       "sequence of 3 tensors (accepted: -3 to 2)")


def test_a_sequence_graph_output_is_a_one_line_error(capsys, tmp_path):
    model = save(tmp_path, [helper.make_node("SplitToSequence", ["x"], ["seq"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2])],
                 [helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None)])
    assert one_line_error(capsys, ["run", model, "--random-inputs", "0"]) == (
        "fusionlang: error: graph output 'seq' is a sequence (made by node 'SplitToSequence#0' (SplitToSequence)); "
        "fusionlang's graphs hold tensors only, so a sequence may only live inside the model")
