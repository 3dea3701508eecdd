"""Col2Im imported, compiled to C and compared with ONNX's reference evaluator in 1, 2 and
3 dimensions, with strides, dilations and pads (onnxruntime 1.32 differs from the
evaluator on 1-d inputs: the evaluator is the oracle here)."""

from __future__ import annotations

from math import prod

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import fusionlang.onnx_backend as backend
from onnx_cases import make_model

pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")


@pytest.mark.parametrize("image, block, attrs", [
    ((7,), (3,), {"dilations": [2]}),
    ((6,), (2,), {"strides": [3], "pads": [1, 2]}),
    ((4, 5), (2, 2), {"strides": [2, 1], "pads": [1, 0, 1, 1], "dilations": [1, 2]}),
    ((3, 4, 2), (2, 1, 2), {"strides": [1, 2, 1]}),
])
def test_col2im_matches_the_evaluator(image, block, attrs):
    rank = len(image)
    pads, strides, dilations = (attrs.get(k, d) for k, d in (("pads", [0] * 2 * rank), ("strides", [1] * rank),
                                                              ("dilations", [1] * rank)))
    placements = [(image[k] + pads[k] + pads[rank + k] - dilations[k] * (block[k] - 1) - 1) // strides[k] + 1
                  for k in range(rank)]
    x = np.random.default_rng(0).standard_normal((2, 3 * prod(block), prod(placements))).astype(np.float32)
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"], **attrs)
    model = make_model([node], {"x": list(x.shape)}, {"y": None}, 18,
                       {"image": np.array(image), "block": np.array(block)})
    got = backend.prepare(model, target="c").run({"x": x})[0]
    np.testing.assert_allclose(got, ReferenceEvaluator(model).run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)
