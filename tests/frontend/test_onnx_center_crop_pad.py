"""CenterCropPad imported as one pad (negative pads crop), compiled to C and compared with
ONNX's reference evaluator on odd differences; bad shapes and axes refused at import."""

from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import fusionlang.onnx_backend as backend
from fusionlang.errors import FuseError
from onnx_cases import make_model

pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")


def crop_pad_model(shape, sizes, **attrs):
    node = helper.make_node("CenterCropPad", ["x", "shape"], ["y"], name="center", **attrs)
    return make_model([node], {"x": list(shape)}, {"y": None}, 18, {"shape": np.array(sizes)})


@pytest.mark.parametrize("sizes, attrs", [
    ([4, 9, 2], {}),  # crop by 3 (1 before, 2 after), pad by 2, crop by 1 (at the end)
    ([8, 1], {"axes": [-1, 0]}),  # pad by 3 (1 before, 2 after) and crop to one row
    ([5, 5, 3], {}),  # unchanged
])
def test_center_crop_pad_matches_the_evaluator(sizes, attrs):
    x = np.random.default_rng(0).standard_normal((5, 7, 3)).astype(np.float32)
    model = crop_pad_model(x.shape, sizes, **attrs)
    got = backend.prepare(model, target="c").run({"x": x})[0]
    np.testing.assert_array_equal(got, ReferenceEvaluator(model).run(None, {"x": x})[0])


@pytest.mark.parametrize("sizes, attrs, message", [
    ([4, 9], {}, "shape [4, 9] should have one entry per axis of [0, 1, 2]"),
    ([4], {"axes": [3]}, "axis 3 is out of range for rank 3"),
    ([-1], {"axes": [0]}, "shape [-1] has a negative size"),
])
def test_center_crop_pad_refusals_name_the_node(sizes, attrs, message):
    with pytest.raises(FuseError, match="^" + re.escape(f"node 'center' (CenterCropPad): {message}") + "$"):
        backend.prepare(crop_pad_model((5, 7, 3), sizes, **attrs), target="c")
