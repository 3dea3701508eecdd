"""`fusionlang run` on models with control flow: an If on a fed condition runs (specialized
on it); a loop whose condition is computed from tensors is a one-line error, exit status 2."""

from __future__ import annotations

import numpy as np
import onnx
from cli_helpers import one_line_error
from onnx import TensorProto, helper

from fusionlang.cli import main


def info(name, elem_type=TensorProto.FLOAT, shape=(3,)):
    return helper.make_tensor_value_info(name, elem_type, list(shape))


def save(tmp_path, nodes, inputs, initializers=()) -> str:
    graph = helper.make_graph(nodes, "control", inputs, [info("out")], list(initializers))
    path = tmp_path / "control.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return str(path)


def array_file(tmp_path, name, array) -> str:
    np.save(tmp_path / f"{name}.npy", array)
    return f"{name}={tmp_path / name}.npy"


def test_an_if_on_a_fed_condition_runs_either_branch(capsys, tmp_path):
    then_branch = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [], [info("t")])
    else_branch = helper.make_graph([helper.make_node("Abs", ["x"], ["e"])], "else", [], [info("e")])
    model = save(tmp_path, [helper.make_node("If", ["cond"], ["out"], then_branch=then_branch,
                                             else_branch=else_branch)],
                 [info("x"), info("cond", TensorProto.BOOL, ())])
    x = array_file(tmp_path, "x", np.array([-1, 2, -3], np.float32))
    for cond in (True, False):
        status = main(["run", model, "--input", x, "--input", array_file(tmp_path, "cond", np.array(cond))])
        assert status == 0, capsys.readouterr().err
    capsys.readouterr()


def test_a_loop_condition_computed_from_tensors_is_a_one_line_error(capsys, tmp_path):
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "x"], ["acc_out"]),
         helper.make_node("ReduceSum", ["acc_out"], ["total"], keepdims=0),
         helper.make_node("Less", ["total", "limit"], ["cond_out"])],
        "body", [info("i", TensorProto.INT64, ()), info("cond_in", TensorProto.BOOL, ()), info("acc_in")],
        [info("cond_out", TensorProto.BOOL, ()), info("acc_out")])
    inits = [onnx.numpy_helper.from_array(np.array(3, np.int64), "M"),
             onnx.numpy_helper.from_array(np.array(True), "cond"),
             onnx.numpy_helper.from_array(np.array(10, np.float32), "limit")]
    model = save(tmp_path, [helper.make_node("Loop", ["M", "cond", "x"], ["out"], body=body)], [info("x")], inits)
    assert one_line_error(capsys, ["run", model, "--random-inputs", "0"]) == (
        "fusionlang: error: node 'Loop#0': Loop (domain ai.onnx, opset 13) is not supported in this form: "
        "a loop condition computed from tensors (fusionlang unrolls loops at import time)")
