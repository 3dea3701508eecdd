"""fusionlang.onnx_backend as an onnx.backend.base.Backend."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx.backend.base import Backend, BackendRep

import fusionlang.onnx_backend as backend
from fusionlang.backend import cuda_available
from fusionlang.errors import CodegenError, InputError, ModelError, UnsupportedOpError
from onnx_cases import make_model, random_array


def two_input_model():
    # output names "0" and "out/1" are not Python identifiers: namedtupledict must cope
    nodes = [helper.make_node("Add", ["a", "b"], ["0"]), helper.make_node("Mul", ["0", "w"], ["out/1"])]
    # like old exporters, the initializer is also listed as a graph input
    model = make_model(nodes, {"a": [2, 3], "w": [3], "b": [2, 3]}, {"0": None, "out/1": None}, 13,
                       {"w": np.array([1.0, 2.0, 3.0], np.float32)})
    return model


A, B = random_array([2, 3]), random_array([2, 3], 1)


def expected():
    return [A + B, (A + B) * np.array([1.0, 2.0, 3.0], np.float32)]


def test_is_an_onnx_backend():
    assert issubclass(backend.FusionlangBackend, Backend)
    assert isinstance(backend.prepare(two_input_model()), BackendRep)


@pytest.mark.parametrize("device,ok", [("CPU", True), ("CUDA", cuda_available()), ("CUDA:1", cuda_available()),
                                       ("TPU", False)])
def test_supports_cpu_and_cuda_only_with_a_device(device, ok):
    assert backend.supports_device(device) is ok


@pytest.mark.skipif(cuda_available(), reason="a CUDA device is visible")
def test_prepare_refuses_cuda_without_a_device():
    with pytest.raises(ModelError, match="cannot run on 'CUDA' here"):
        backend.prepare(two_input_model(), "CUDA")


@pytest.mark.parametrize("form", ["list", "tuple", "dict"])
def test_run_takes_positional_or_named_inputs(form):
    rep = backend.prepare(two_input_model())
    inputs = {"list": [A, B], "tuple": (A, B), "dict": {"b": B, "a": A}}[form]
    outputs = rep.run(inputs)
    assert len(outputs) == 2
    for got, want in zip(outputs, expected()):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(outputs["out/1"], expected()[1], rtol=1e-6)
    np.testing.assert_allclose(outputs["0"], expected()[0], rtol=1e-6)


def test_run_takes_a_single_array_for_a_single_input():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": [4]}, {"y": None}, 13)
    (y,) = backend.prepare(model).run(np.array([-1.0, 2.0, -3.0, 4.0], np.float32))
    np.testing.assert_array_equal(y, [0.0, 2.0, 0.0, 4.0])


def test_wrong_input_count():
    with pytest.raises(InputError, match=r"got 1 inputs, the model takes 2 \(a, b\)"):
        backend.prepare(two_input_model()).run([A])


def test_run_model():
    outputs = backend.run_model(two_input_model(), [A, B])
    np.testing.assert_allclose(outputs[1], expected()[1], rtol=1e-6)


def test_run_node():
    node = helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.5)
    (y,) = backend.run_node(node, [np.array([-2.0, 3.0], np.float32)])
    np.testing.assert_allclose(y, [-1.0, 3.0])


def test_run_node_with_legacy_opset():
    node = helper.make_node("Add", ["a", "b"], ["y"], broadcast=1, axis=0)
    a, b = np.ones((2, 3), np.float32), np.array([1.0, 2.0], np.float32)
    (y,) = backend.run_node(node, [a, b], opset_version=6)
    np.testing.assert_allclose(y, a + b[:, None])


def test_run_node_unsupported_op():
    node = helper.make_node("Unique", ["x"], ["y"])
    with pytest.raises(UnsupportedOpError, match=r"\n  Unique \(domain ai.onnx, opset 21\): 1 node"):
        backend.run_node(node, [np.ones((2, 2), np.float32)])


def test_prepare_compiles_to_c_on_the_cpu():
    rep = backend.prepare(two_input_model())
    assert (rep.target, rep.fallback) == ("c", None)
    assert np.allclose(rep.run([A, B])[0], backend.prepare(two_input_model(), target="reference").run([A, B])[0])


def test_an_uncompilable_graph_falls_back_with_a_reason(monkeypatch):
    def refuse(plan, target):
        raise CodegenError("node 'n' (thing): no loop form")

    monkeypatch.setattr(backend.fusionlang, "compile", refuse)
    with pytest.warns(UserWarning, match="reference interpreter: node 'n' \\(thing\\): no loop form"):
        rep = backend.prepare(two_input_model())
    assert rep.fallback == "node 'n' (thing): no loop form"
    assert rep.run([A, B])[0].shape == A.shape
