"""A rule file that `def`s an op and rewrites a model onto it, next to a compound op,
fuses and compiles under every strategy from the command line."""

from __future__ import annotations

import json

import onnx
import pytest
from onnx import TensorProto, helper

from fusionlang.cli import main

SWISH_RULES = """\
import "tvm.fuse"

class swish : elemwise
def swish(x) = x * sigmoid(x)

rewrite to_swish:
    mul(x, sigmoid(x)) => swish(x)
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("defs")
    rules = root / "swish.fuse"
    rules.write_text(SWISH_RULES)
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"], name="sig"),
             helper.make_node("Mul", ["x", "s"], ["m"], name="mul"),
             helper.make_node("Softmax", ["m"], ["y"], name="softmax", axis=-1)]
    graph = helper.make_graph(nodes, "swish_softmax", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])])
    model = root / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(model))
    return str(model), str(rules)


@pytest.mark.parametrize("strategy", ["tvm", "apollo", "dp"])
def test_run_checks_a_def_op_next_to_softmax(capsys, files, strategy):
    model, rules = files
    status = main(["--json", "run", model, "--rules", rules, "--strategy", strategy, "--random-inputs", "0",
                   "--check"])
    out, err = capsys.readouterr()
    assert (status, err) == (0, "")
    assert json.loads(out)["check"] == "ok"


def test_fuse_with_loops_rewrites_onto_the_def_op(capsys, files):
    model, rules = files
    assert main(["fuse", model, "--rules", rules, "--strategy", "tvm", "--loops", "-v"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "mul:swish" in out and ":reduce_max" in out
