"""`fusionlang run` on models that need run-time shapes (symbolic dims) or values (shape fed as an input):
the --input arrays give them; without them the one-line error names the flags."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from cli_helpers import one_line_error
from onnx import TensorProto, helper

from fusionlang.cli import main


def save(tmp_path, name, node, inputs, output_shape) -> str:
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, output_shape)])
    path = tmp_path / f"{name}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return str(path)


@pytest.fixture
def symbolic_batch(tmp_path) -> str:
    return save(tmp_path, "batch", helper.make_node("Relu", ["x"], ["y"]), [("x", TensorProto.FLOAT, ["N", 3])],
                ["N", 3])


@pytest.fixture
def reshape(tmp_path) -> str:
    return save(tmp_path, "reshape", helper.make_node("Reshape", ["x", "s"], ["y"]),
                [("x", TensorProto.FLOAT, [2, 3]), ("s", TensorProto.INT64, [2])], None)


def array_file(tmp_path, name, array) -> str:
    np.save(tmp_path / f"{name}.npy", array)
    return f"{name}={tmp_path / name}.npy"


def run_json(capsys, argv) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_symbolic_batch_takes_its_shape_from_the_input_file(capsys, tmp_path, symbolic_batch):
    x = array_file(tmp_path, "x", np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3))
    report = run_json(capsys, ["run", symbolic_batch, "--input", x, "--check"])
    assert report["outputs"] == {"y": [5, 3]} and report["check"] == "ok"
    assert report["specialized"] == {"shapes": ["x"], "values": []}


def test_shape_fed_as_input_is_taken_from_the_input_file(capsys, tmp_path, reshape):
    x = array_file(tmp_path, "x", np.arange(6, dtype=np.float32).reshape(2, 3))
    s = array_file(tmp_path, "s", np.array([3, 2], np.int64))
    report = run_json(capsys, ["run", reshape, "--input", x, "--input", s, "--check"])
    assert report["outputs"] == {"y": [3, 2]} and report["check"] == "ok"
    assert report["specialized"] == {"shapes": [], "values": ["s"]}
    assert main(["run", reshape, "--input", x, "--input", s]) == 0
    assert "specialized on the --input files: values of s\n" in capsys.readouterr().out


def test_symbolic_batch_without_a_shape_names_input_shape(capsys, symbolic_batch):
    assert one_line_error(capsys, ["run", symbolic_batch, "--random-inputs", "0"]) == (
        f"fusionlang: error: model {symbolic_batch!r} has inputs whose shapes only a run knows: input 'x' dim 0 "
        "('N'); pass input_shapes={name: [dims...]} (command line: --input-shape NAME=DxD...; `fusionlang run` "
        "also takes it from --input NAME=FILE.npy)")
    assert "specialized" not in run_json(capsys, ["run", symbolic_batch, "--input-shape", "x=2x3", "--random-inputs",
                                                  "0"])


def test_shape_input_without_a_value_names_the_input_flag(capsys, tmp_path, reshape):
    x = array_file(tmp_path, "x", np.zeros((2, 3), np.float32))
    message = one_line_error(capsys, ["run", reshape, "--input", x, "--random-inputs", "0"])
    assert message.startswith("fusionlang: error: node 'Reshape#0' (Reshape): input 1 (shape) comes from graph "
                              "input 's', whose value only a run knows")
    assert message.endswith("`fusionlang run MODEL --input s=FILE.npy`")
