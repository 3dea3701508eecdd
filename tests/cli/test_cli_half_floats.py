"""`fusionlang run` on float16 and bfloat16 models: --check with tolerances that fit 16-bit
results, bfloat16 outputs written as float32 .npy (the format has no bfloat16), and a
bfloat16 input file NumPy wrote as raw records refused in one line."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from cli_helpers import one_line_error
from onnx import TensorProto, helper

from fusionlang.cli import main

ELEM = {"float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}


def swish_softmax_model(path, dtype: str) -> str:
    """y = softmax(x * sigmoid(x)): sigmoid and softmax decompose into steps that round to
    16 bits one by one, where the reference rounds each op once."""
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["s", "x"], ["m"]),
             helper.make_node("Softmax", ["m"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "swish_softmax", [helper.make_tensor_value_info("x", ELEM[dtype], [4, 64])],
                              [helper.make_tensor_value_info("y", ELEM[dtype], [4, 64])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_check_uses_a_16_bit_tolerance_by_default(tmp_path, capsys, dtype):
    model = swish_softmax_model(tmp_path / "m.onnx", dtype)
    assert main(["run", model, "--random-inputs", "0", "--check", "-q"]) == 0, capsys.readouterr().err


def test_bfloat16_outputs_are_written_as_exact_float32(tmp_path, capsys):
    model = swish_softmax_model(tmp_path / "m.onnx", "bfloat16")
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    assert main(["run", model, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", str(out), "-q"]) == 0
    y = np.load(out / "y.npy", allow_pickle=False)
    assert y.dtype == np.float32
    assert np.array_equal(y.astype(ml_dtypes.bfloat16).astype(np.float32), y)  # bfloat16 values, exactly
    assert np.allclose(y.sum(axis=-1), 1.0, atol=0.05)


def test_raw_bfloat16_records_are_refused_in_one_line(tmp_path, capsys):
    model = swish_softmax_model(tmp_path / "m.onnx", "bfloat16")
    np.save(tmp_path / "x.npy", np.ones((4, 64), ml_dtypes.bfloat16))  # loads back as void |V2
    message = one_line_error(capsys, ["run", model, "--input", f"x={tmp_path / 'x.npy'}"])
    assert "input 'x': expected dtype bfloat16, got |V2; pass bfloat16 values as float32" in message
