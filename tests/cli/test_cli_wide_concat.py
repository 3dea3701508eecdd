"""The report's model, a Concat of one input named thousands of times (15 KB at 5,000),
runs and checks against the reference: it was one isl problem of as many statements and
one C function of as many pointers (7.8 GB, exit 3 at 5,000)."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from fusionlang.cli import main


def test_run_checks_a_concat_of_one_input_a_thousand_times(tmp_path, capsys):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4000])
    graph = helper.make_graph([helper.make_node("Concat", ["x"] * 1000, ["y"], name="cat", axis=1)], "wide", [x], [y])
    path = tmp_path / "wide.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    assert main(["run", str(path), "--check", "--random-inputs", "0"]) == 0
    assert "check against the reference interpreter: ok" in capsys.readouterr().out
