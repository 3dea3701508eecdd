"""`fusionlang fuse` names each `fuse pattern` entry with its file:line and the groups it
formed; explain names the entry that formed a group. (Matches the backend refuses are
counted per verdict: tests/backend/test_attention_template.py, on the CUDA target.)"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fusionlang.cli import main
from fusionlang.lang import load_rules


def save(path, nodes, inputs, output, shape, inits=()) -> str:
    graph = helper.make_graph(nodes, path.stem, [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                                                 for n, s in inputs],
                              [helper.make_tensor_value_info(output, TensorProto.FLOAT, shape)], list(inits))
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


@pytest.fixture(scope="module")
def attention(tmp_path_factory) -> str:
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], name="t", perm=[1, 0]),
             helper.make_node("MatMul", ["q", "kt"], ["a"], name="a"),
             helper.make_node("Div", ["a", "s"], ["d"], name="d"),
             helper.make_node("Softmax", ["d"], ["p"], name="p", axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["o"], name="o")]
    inputs = [("q", [16, 32]), ("k", [16, 32]), ("v", [16, 32]), ("s", [1])]
    return save(tmp_path_factory.mktemp("pattern") / "attention.onnx", nodes, inputs, "o", [16, 32])


@pytest.fixture(scope="module")
def projection(tmp_path_factory) -> str:
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="r"), helper.make_node("MatMul", ["r", "w"], ["m"], name="m")]
    return save(tmp_path_factory.mktemp("pattern") / "projection.onnx", nodes, [("x", [4, 8])], "m", [4, 3], [w])


def cli(capsys, *args) -> tuple[int, list[str]]:
    status = main(list(args))
    return status, capsys.readouterr().out.splitlines()


def test_fuse_names_the_entry_and_the_group_it_formed(capsys, projection, tmp_path):
    rules = tmp_path / "p.fuse"
    rules.write_text('import "apollo.fuse"\nfuse pattern relu_matmul: matmul(relu(x), w)\n')
    status, lines = cli(capsys, "fuse", projection, "--rules", str(rules))
    assert status == 0
    assert f"  fuse pattern relu_matmul ({rules}:2): 1 group(s)" in lines
    status, lines = cli(capsys, "explain", projection, "--rules", str(rules), "--node", "r")
    assert status == 0 and f"    formed by {rules}:2:1: fuse pattern relu_matmul" in lines


def test_fuse_reports_the_attention_block_the_c_backend_runs_as_one_kernel(capsys, attention):
    # the C backend runs the block as its attention kernel: its feedback accepts the group
    where = load_rules("apollo_patterns").fuse_patterns[0].where
    status, lines = cli(capsys, "fuse", attention, "--rules", "apollo_patterns")
    assert status == 0
    assert f"  fuse pattern attention_block ({where}): 1 group(s)" in lines
