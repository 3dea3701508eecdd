"""A NaN attribute or constant (Clip's bounds, HardSigmoid's alpha, Celu's alpha,
ThresholdedRelu's threshold, Shrink's lambd, a NaN in Where or Add) gives exit 0 with
onnxruntime's values, or exit 2 and one line naming the node and the attribute: fuse and
run failed in sympy (exit 3) while the reference interpreter ran them."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from cli_helpers import run_cli
from onnx import TensorProto, helper, numpy_helper

NAN = float("nan")
#: name -> (node, constant inputs, what the run does: "refused" or "runs")
CASES = {
    "clip": (helper.make_node("Clip", ["x", "lo", "hi"], ["y"]), {"lo": np.float32(NAN), "hi": np.float32(1)},
             "refused"),
    "hard_sigmoid": (helper.make_node("HardSigmoid", ["x"], ["y"], alpha=NAN), {}, "refused"),
    "shrink": (helper.make_node("Shrink", ["x"], ["y"], lambd=NAN), {}, "refused"),
    "celu": (helper.make_node("Celu", ["x"], ["y"], alpha=NAN), {}, "runs"),
    "thresholded_relu": (helper.make_node("ThresholdedRelu", ["x"], ["y"], alpha=NAN), {}, "runs"),
    "where": (helper.make_node("Where", ["c", "x", "k"], ["y"]),
              {"c": np.array([True, False, True, False]), "k": np.float32(NAN)}, "runs"),
    "add": (helper.make_node("Add", ["x", "k"], ["y"]), {"k": np.float32(NAN)}, "runs"),
}


def save_model(path, node, constants) -> onnx.ModelProto:
    graph = helper.make_graph([node], "nan", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in constants.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, str(path))
    return model


@pytest.mark.parametrize("name", list(CASES))
def test_a_nan_attribute_runs_or_is_refused_in_one_line(tmp_path, name):
    import onnxruntime

    node, constants, outcome = CASES[name]
    model = save_model(tmp_path / "m.onnx", node, constants)
    x = np.float32([-2, 0.5, 3, NAN])
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    result = run_cli("run", tmp_path / "m.onnx", "--input", f"x={tmp_path / 'x.npy'}", "--check",
                     "--output-dir", out)
    if outcome == "refused":
        assert result.returncode == 2, result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("fusionlang: error: node ") and "is NaN" in line
        return
    assert result.returncode == 0, result.stderr
    want = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]) \
        .run(None, {"x": x})[0]
    np.testing.assert_array_equal(np.load(out / "y.npy"), want)
