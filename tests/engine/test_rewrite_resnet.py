"""Conv-BN folding on a real model: ResNet-50 from the onnx wheel's light models.

Every BatchNormalization follows a convolution with constant weights, so the
simplification rules remove all 53 of them, leaving convolutions with new constant
weights; the folded model must still reproduce the reference output shipped with it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from onnx.backend.test.runner import Runner

from fusionlang.engine.rewrite import apply_rules
from fusionlang.lang import load_rules
from fusionlang.ops.interpreter import run

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


@pytest.fixture(scope="module")
def resnet():
    from fusionlang.frontend import from_onnx

    path = LIGHT / "light_resnet50.onnx"
    model = onnx.load(path)
    initializers = {t.name for t in model.graph.initializer}
    feeds = {vi.name: Runner.generate_dummy_data(vi, seed=0, name="resnet50", random=False)
             for vi in model.graph.input if vi.name not in initializers}
    expected = numpy_helper.to_array(onnx.load_tensor(LIGHT / "light_resnet50_output_0.pb"))
    return from_onnx(path), feeds, expected


def test_conv_bn_folding_removes_every_batch_norm(resnet):
    graph, feeds, expected = resnet
    before = sum(n.op == "batch_norm" for n in graph.nodes)
    convs = sum(n.op == "conv" for n in graph.nodes)
    assert before == 53
    result = apply_rules(graph, load_rules("simplify"))
    folded = result.graph
    assert sum(n.op == "batch_norm" for n in folded.nodes) == 0
    assert sum(n.op == "conv" for n in folded.nodes) == convs
    assert sum(result.fired.values()) == before
    for node in folded.nodes:
        if node.op == "conv":
            assert all(v in folded.constants for v in node.inputs[1:] if v)
            assert any(p.startswith("rule fold_conv_bn") for p in node.provenance)
    (out,) = run(folded, feeds).values()
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-5)
