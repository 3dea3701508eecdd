"""A rule file that keeps a compound op whole must name the decompositions that lower it:
without them `run` and `fuse` stop with one line and exit 2; with them the model runs."""

from __future__ import annotations

import json

import onnx
import pytest
from onnx import TensorProto, helper

from fusionlang.cli import main

POLICY = 'import "std/ops.fuse"\n{lowering}fuse elemwise -> elemwise : elemwise\n'


@pytest.fixture
def model(tmp_path):
    graph = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=-1)], "softmax",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def policy(tmp_path, lowering: str) -> str:
    path = tmp_path / "mine.fuse"
    path.write_text(POLICY.format(lowering=lowering))
    return str(path)


@pytest.mark.parametrize("command", [["run", "--random-inputs", "0"], ["fuse"]])
def test_a_compound_op_nothing_lowers_is_one_line_and_exit_2(tmp_path, capsys, model, command):
    rules = policy(tmp_path, "")
    assert main([command[0], model, "--rules", rules, *command[1:]]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("fusionlang: error: node 'sm' (softmax) is a compound op and no decomposition in 'mine' "
                          "opens it")
    assert err.rstrip().endswith('import "decompose.fuse" for lowering')


def test_with_a_lowering_import_the_model_runs_and_checks(tmp_path, capsys, model):
    rules = policy(tmp_path, 'import "decompose.fuse" for lowering\n')
    assert main(["--json", "run", model, "--rules", rules, "--random-inputs", "0", "--check"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and json.loads(out)["check"] == "ok"
