"""The conformance bench's second opinion on a wrong number (bench/onnx_conformance.py): a
case counts as ``suite_off`` only when the backend agrees with the float64 oracle and the
suite's stored answer does not."""

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from onnx import TensorProto, helper

import fusionlang.onnx_backend

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import onnx_conformance  # noqa: E402


def _exp_model():
    node = helper.make_node("Exp", ["x"], ["y"])
    graph = helper.make_graph([node], "exp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _case(expected, model=None):
    x = np.linspace(-2, 2, 5).astype(np.float32)
    return SimpleNamespace(model=model or _exp_model(), data_sets=[([x], [expected(x)])], rtol=1e-3, atol=1e-7,
                           model_dir=None)


class _Answers:
    """A backend whose answer is ``answer(x)``."""

    def __init__(self, answer):
        self.answer = answer

    def prepare(self, model, device):
        return SimpleNamespace(run=lambda inputs: [self.answer(inputs[0])])


def test_a_suite_answer_off_the_oracle_is_named_with_its_deviation():
    case = _case(lambda x: (np.exp(x) * 1.01).astype(np.float32))
    deviation = onnx_conformance.suite_deviation(fusionlang.onnx_backend, case)
    assert deviation == pytest.approx(0.01 * np.exp(2.0), rel=1e-3)


def test_a_backend_off_the_oracle_stays_wrong():
    case = _case(lambda x: (np.exp(x) * 1.01).astype(np.float32))
    assert onnx_conformance.suite_deviation(_Answers(lambda x: np.exp(x) * 1.02), case) is None


def test_no_verdict_when_the_suite_agrees_with_the_oracle():
    case = _case(lambda x: np.exp(x).astype(np.float32))
    assert onnx_conformance.suite_deviation(_Answers(lambda x: np.exp(x) * 1.02), case) is None


def test_widening_turns_float32_into_float64_and_refuses_subgraphs():
    wide = onnx_conformance.widened(_exp_model())
    assert wide.graph.input[0].type.tensor_type.elem_type == TensorProto.DOUBLE
    then = helper.make_graph([], "then", [], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5])])
    branch = helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=then)
    graph = helper.make_graph([branch], "if", [helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5])])
    with pytest.raises(ValueError, match="subgraph"):
        onnx_conformance.widened(helper.make_model(graph))
    case = _case(lambda x: (np.exp(x) * 1.01).astype(np.float32), model=helper.make_model(graph))
    assert onnx_conformance.suite_deviation(_Answers(np.exp), case) is None
