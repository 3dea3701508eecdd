"""bench/model_runtime.py's timed callables: what each one runs per call."""

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import model_runtime  # noqa: E402

from fusionlang.backend.runtime import CompiledGraph  # noqa: E402


def test_a_model_with_two_outputs_is_run_once_per_timed_call(monkeypatch):
    # the zoo's BERT has its pooler as a second output: one run per output timed it twice
    pytest.importorskip("onnxruntime")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [4, 8]) for name in ("y", "z")]
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Tanh", ["x"], ["z"])],
                              "two_outputs", [x], outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"x": np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)}
    fns, _, _ = model_runtime.competitors(model, "1", feeds=feeds, unfused=False)
    runs = []
    original = CompiledGraph.run
    monkeypatch.setattr(CompiledGraph, "run", lambda self, *a, **k: runs.append(1) or original(self, *a, **k))
    y, z = fns["fused"]()
    assert len(runs) == 1
    np.testing.assert_allclose(y, np.maximum(feeds["x"], 0))
    np.testing.assert_allclose(z, np.tanh(feeds["x"]), rtol=1e-6)
