"""RNN, GRU and LSTM unrolled over the sequence, in the forms ONNX's node suite leaves out:
each model is imported, fused and compiled to C, and compared with ONNX's reference
evaluator, or with onnxruntime where the reference ignores an attribute (clip,
activations, input_forget, sequence_lens)."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import fusionlang.onnx_backend as backend
from fusionlang.cli import main
from fusionlang.errors import ModelError, ShapeError, UnsupportedOpError
from fusionlang.frontend import from_onnx
from onnx_cases import make_model, random_array, run_onnxruntime

pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
STEPS, BATCH, INPUT, HIDDEN = 3, 2, 4, 5


def recurrent_model(op: str, directions: int = 1, layout: int = 0, initial: bool = False, peepholes: bool = False,
                    lens: np.ndarray | None = None, steps: int = STEPS, **attrs) -> tuple[onnx.ModelProto, dict]:
    """One ``op`` node with weights as initializers; returns the model and its feeds
    (X, plus initial_h/initial_c when ``initial``). Every output is a graph output."""
    gates = GATES[op]
    consts = {"W": random_array((directions, gates * HIDDEN, INPUT), 1) * 0.5,
              "R": random_array((directions, gates * HIDDEN, HIDDEN), 2) * 0.5,
              "B": random_array((directions, 2 * gates * HIDDEN), 3) * 0.5}
    x_shape = [steps, BATCH, INPUT] if layout == 0 else [BATCH, steps, INPUT]
    state_shape = [directions, BATCH, HIDDEN] if layout == 0 else [BATCH, directions, HIDDEN]
    feeds = {"X": random_array(x_shape, 4)}
    names = ["X", "W", "R", "B", "", "", ""]
    if lens is not None:
        consts["lens"], names[4] = lens.astype(np.int32), "lens"
    states = ["initial_h"] + (["initial_c"] if op == "LSTM" else [])
    if initial:
        for k, name in enumerate(states):
            feeds[name], names[5 + k] = random_array(state_shape, 5 + k), name
    if peepholes:
        consts["P"] = random_array((directions, 3 * HIDDEN), 7) * 0.5
        names.append("P")
    while not names[-1]:
        names.pop()
    direction = {1: attrs.pop("direction", "forward"), 2: "bidirectional"}[directions]
    outputs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, names, outputs, name="cell", hidden_size=HIDDEN, direction=direction,
                            layout=layout, **attrs)
    y_shape = [steps, directions, BATCH, HIDDEN] if layout == 0 else [BATCH, steps, directions, HIDDEN]
    model = make_model([node], {k: list(v.shape) for k, v in feeds.items()},
                       {"Y": y_shape, **{name: state_shape for name in outputs[1:]}}, 14, consts)
    return model, feeds


def assert_compiled_matches(model: onnx.ModelProto, feeds: dict, want: list[np.ndarray]) -> None:
    got = backend.prepare(model, target="c").run(feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op, form", [
    ("RNN", {"directions": 2, "initial": True}),
    ("GRU", {"directions": 2, "initial": True}),
    ("GRU", {"directions": 2, "initial": True, "linear_before_reset": 1}),
    ("LSTM", {"directions": 2, "initial": True, "peepholes": True}),
    ("RNN", {"layout": 1, "initial": True}),
    ("GRU", {"layout": 1, "directions": 2, "initial": True}),
    ("LSTM", {"layout": 1, "directions": 2, "initial": True, "peepholes": True}),
    ("LSTM", {"layout": 1, "direction": "reverse"}),
])
def test_forms_match_the_reference_evaluator(op, form):
    model, feeds = recurrent_model(op, **form)
    assert_compiled_matches(model, feeds, ReferenceEvaluator(model).run(None, feeds))


@pytest.mark.parametrize("op, form", [
    ("RNN", {"clip": 0.3}),
    ("GRU", {"directions": 2, "clip": 0.5, "initial": True}),
    ("LSTM", {"clip": 0.4, "peepholes": True, "initial": True}),
    # alpha and beta go, in order, to the activations that take them
    ("RNN", {"directions": 2, "activations": ["LeakyRelu", "ScaledTanh"], "activation_alpha": [0.2, 0.7],
             "activation_beta": [1.5]}),
    ("GRU", {"activations": ["HardSigmoid", "Affine"], "activation_alpha": [0.3, 0.8],
             "activation_beta": [0.4, 0.1]}),
    ("LSTM", {"activations": ["Sigmoid", "Softsign", "Elu"], "activation_alpha": [0.5]}),
    ("RNN", {"activations": ["Relu"]}),
    ("GRU", {"activations": ["Sigmoid", "Softplus"], "linear_before_reset": 1}),
    ("RNN", {"activations": ["ThresholdedRelu"], "activation_alpha": [0.1]}),
    ("LSTM", {"input_forget": 1, "initial": True}),
    ("LSTM", {"clip": 0.4, "initial": True}),
    # entries shorter than the sequence: their last steps keep the state and write zeros
    ("RNN", {"directions": 2, "initial": True, "lens": np.array([3, 1])}),
    ("GRU", {"direction": "reverse", "initial": True, "lens": np.array([2, 3])}),
    ("LSTM", {"directions": 2, "initial": True, "peepholes": True, "lens": np.array([1, 2])}),
    # length 0: Y_h and Y_c are zeros, not the initial states
    ("RNN", {"initial": True, "lens": np.array([0, 2])}),
    ("GRU", {"directions": 2, "initial": True, "lens": np.array([3, 0])}),
    ("LSTM", {"direction": "reverse", "initial": True, "lens": np.array([0, 1])}),
])
def test_forms_match_onnxruntime(op, form):
    model, feeds = recurrent_model(op, **form)
    assert_compiled_matches(model, feeds, run_onnxruntime(model, feeds))


def test_sequence_lens_fed_at_run_time_masks_each_step():
    model, feeds = recurrent_model("GRU", directions=2, initial=True, lens=np.array([3, 2]))
    # lens as a graph input instead of an initializer
    model.graph.initializer.remove(next(t for t in model.graph.initializer if t.name == "lens"))
    model.graph.input.append(helper.make_tensor_value_info("lens", TensorProto.INT32, [BATCH]))
    for lens in (np.array([3, 2], np.int32), np.array([1, 3], np.int32)):
        feeds["lens"] = lens
        assert_compiled_matches(model, feeds, run_onnxruntime(model, feeds))


def test_the_recurrence_is_unrolled_into_existing_ops():
    model, _ = recurrent_model("LSTM", directions=2, initial=True, peepholes=True)
    ops = [node.op for node in from_onnx(model).nodes]
    assert {"sigmoid", "tanh"} <= set(ops)
    # per direction: one gemm projects every step's input, then one per step for H R^T
    assert ops.count("gemm") == 2 * (1 + STEPS)


@pytest.mark.parametrize("op, form, error, message", [
    ("RNN", {"activations": ["Gelu"]}, UnsupportedOpError,
     "node 'cell': RNN (domain ai.onnx, opset 14) is not supported in this form: activation 'Gelu' (known: "
     "affine, elu, hardsigmoid, leakyrelu, relu, scaledtanh, sigmoid, softplus, softsign, tanh, thresholdedrelu)"),
    ("GRU", {"activations": ["Sigmoid"]}, ModelError,
     "node 'cell' (GRU): activations lists 1 functions, expected 2 per direction for 1 direction(s)"),
    ("LSTM", {"direction": "sideways"}, ModelError,
     "node 'cell' (LSTM): direction='sideways' should be forward, reverse or bidirectional"),
    ("RNN", {"layout": 2}, ModelError, "node 'cell' (RNN): layout=2 should be 0 or 1"),
    ("GRU", {"steps": 0}, UnsupportedOpError,
     "node 'cell': GRU (domain ai.onnx, opset 14) is not supported in this form: X with a sequence length of 0"),
    ("GRU", {"lens": np.array([4, 1])}, ModelError,
     "node 'cell' (GRU): sequence_lens [4, 1] should lie in [0, 3]"),
    ("LSTM", {"hidden_size": 7}, ShapeError,
     "node 'cell' (LSTM): hidden_size=7 differs from R's last axis 5"),
])
def test_bad_forms_are_refused_with_one_line(op, form, error, message, tmp_path, capsys):
    hidden = form.pop("hidden_size", None)
    model, _ = recurrent_model(op, **form)
    if hidden is not None:
        attr = next(a for a in model.graph.node[0].attribute if a.name == "hidden_size")
        attr.i = hidden
    assert_refused(model, error, message, tmp_path, capsys)


def replace_initializer(model: onnx.ModelProto, name: str, array: np.ndarray) -> None:
    old = next(t for t in model.graph.initializer if t.name == name)
    model.graph.initializer.remove(old)
    model.graph.initializer.append(numpy_helper.from_array(array, name))


@pytest.mark.parametrize("op, form, name, array, message", [
    ("GRU", {}, "B", np.zeros((1, 29), np.float32), "node 'cell' (GRU): B f32[1,29] should be [1, 30]"),
    ("LSTM", {"lens": np.array([3, 3])}, "lens", np.array([3.0, 3.0], np.float32),
     "node 'cell' (LSTM): sequence_lens f32[2] should be int32[2]"),
    ("RNN", {}, "W", np.zeros((1, 5, 3), np.float32),
     "node 'cell' (RNN): W f32[1,5,3] and R f32[1,5,5] should be [1, 5, 4] and [1, 5, 5]"),
    ("RNN", {}, "initial_h", np.zeros((1, 3, 5), np.float32),
     "node 'cell' (RNN): input 5 f32[1,3,5] should be [1, 2, 5]"),
])
def test_inputs_of_the_wrong_shape_are_refused_with_one_line(op, form, name, array, message, tmp_path, capsys):
    model, _ = recurrent_model(op, **form)
    if name == "initial_h":  # as an initializer in the last input slot
        model.graph.node[0].input.extend(["", name] if len(model.graph.node[0].input) == 4 else [name])
        model.graph.initializer.append(numpy_helper.from_array(array, name))
    else:
        replace_initializer(model, name, array)
    assert_refused(model, ShapeError, message, tmp_path, capsys)


def assert_refused(model: onnx.ModelProto, error, message: str, tmp_path, capsys) -> None:
    """from_onnx raises ``error`` with ``message``; the CLI prints it on one line and exits 2."""
    with pytest.raises(error, match="^" + re.escape(message) + "$"):
        from_onnx(model)
    path = tmp_path / "cell.onnx"
    onnx.save(model, str(path))
    assert main(["fuse", str(path)]) == 2
    assert capsys.readouterr().err == f"fusionlang: error: {message}\n"
