"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: imported as the compound op
nll_loss (opened by std/loss.fuse), compiled to C, compared with onnxruntime."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import helper

import fusionlang.onnx_backend as backend
from fusionlang.cli import main
from fusionlang.errors import ModelError, ShapeError
from fusionlang.frontend import from_onnx
from onnx_cases import I64, make_model, random_array, run_onnxruntime

pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")

N, C, D = 3, 5, 4


def loss_model(op_type: str, reduction: str, weighted: bool, ignore_index: int | None, log_prob: bool = False):
    attrs = {"reduction": reduction} | ({"ignore_index": ignore_index} if ignore_index is not None else {})
    inputs = ["x", "t"] + (["w"] if weighted else [])
    outputs = {"y": None} | ({"p": None} if log_prob else {})
    node = helper.make_node(op_type, inputs, list(outputs), name="loss", **attrs)
    feeds = {"x": [N, C, D], "t": ([N, D], I64)} | ({"w": [C]} if weighted else {})
    return make_model([node], feeds, outputs, 13)


def loss_feeds(weighted: bool, ignore_index: int | None) -> dict:
    rng = np.random.default_rng(1)
    target = rng.integers(0, C, (N, D))
    if ignore_index is not None:
        target[0, 1] = target[2, 3] = ignore_index  # some targets ignored, not all
    feeds = {"x": random_array([N, C, D]), "t": target}
    if weighted:
        feeds["w"] = rng.uniform(0.5, 1.5, C).astype(np.float32)
    return feeds


def compiled_matches_onnxruntime(model, feeds):
    got = backend.prepare(model, target="c").run(feeds)
    want = run_onnxruntime(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op_type", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [None, 2, -1])
def test_losses_compile_and_match_onnxruntime(op_type, reduction, weighted, ignore_index):
    model = loss_model(op_type, reduction, weighted, ignore_index)
    compiled_matches_onnxruntime(model, loss_feeds(weighted, ignore_index))


def test_softmax_cross_entropy_gives_its_log_prob_output():
    model = loss_model("SoftmaxCrossEntropyLoss", "mean", True, 0, log_prob=True)
    compiled_matches_onnxruntime(model, loss_feeds(True, 0))


def test_softmax_cross_entropy_imports_as_log_softmax_then_nll_loss():
    # both compound: the C compiles above went through their decompositions
    graph = from_onnx(loss_model("SoftmaxCrossEntropyLoss", "mean", True, 1))
    assert [n.op for n in graph.nodes if n.op in ("log_softmax", "nll_loss")] == ["log_softmax", "nll_loss"]


def test_an_unknown_reduction_is_a_model_error(tmp_path, capsys):
    model = loss_model("NegativeLogLikelihoodLoss", "max", False, None)
    message = "node 'loss' (NegativeLogLikelihoodLoss): reduction='max' should be 'none', 'sum' or 'mean'"
    with pytest.raises(ModelError, match="^" + re.escape(message) + "$"):
        from_onnx(model)
    path = tmp_path / "loss.onnx"
    onnx.save(model, str(path))
    assert main(["fuse", str(path)]) == 2
    assert capsys.readouterr().err == f"fusionlang: error: {message}\n"


def test_a_target_of_the_wrong_shape_is_refused():
    node = helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], name="loss")
    model = make_model([node], {"x": [N, C, D], "t": ([N, D + 1], I64)}, {"y": None}, 13)
    expected = ("node 'loss' (NegativeLogLikelihoodLoss): node 'loss/nll_loss_0' (nll_loss): "
                "target i64[3,5] should have shape [3, 4] for input f32[3,5,4]")
    with pytest.raises(ShapeError, match="^" + re.escape(expected) + "$"):
        from_onnx(model)
