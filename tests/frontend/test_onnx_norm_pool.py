"""GroupNormalization (per-group and per-channel scale), MeanVarianceNormalization,
LpNormalization and LpPool imported, compiled to C, and compared with onnxruntime."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import helper

import fusionlang.onnx_backend as backend
from fusionlang.cli import main
from fusionlang.errors import ShapeError
from fusionlang.frontend import from_onnx
from onnx_cases import make_model, random_array, run_onnxruntime

pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")


def compiled_and_onnxruntime(model: onnx.ModelProto, feeds: dict, tol: float = 1e-5) -> np.ndarray:
    got = backend.prepare(model, target="c").run(feeds)[0]
    want = run_onnxruntime(model, feeds)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    return got


@pytest.mark.parametrize("opset, groups", [(18, 2), (18, 4), (21, 2), (21, 1)])
def test_group_norm_matches_onnxruntime(opset, groups):
    params = groups if opset < 21 else 4  # scale and bias per group before opset 21, per channel since
    node = helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"], num_groups=groups, epsilon=1e-3)
    inits = {"scale": random_array((params,), seed=1) + 1, "bias": random_array((params,), seed=2)}
    model = make_model([node], {"x": [2, 4, 3, 5]}, {"y": None}, opset, inits)
    compiled_and_onnxruntime(model, {"x": random_array((2, 4, 3, 5))}, tol=1e-4)


def test_group_norm_groups_must_divide_the_channels(tmp_path, capsys):
    node = helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"], name="gn", num_groups=3)
    inits = {"scale": np.ones(3, np.float32), "bias": np.zeros(3, np.float32)}
    model = make_model([node], {"x": [2, 4, 5]}, {"y": None}, 18, inits)
    message = "node 'gn' (GroupNormalization): num_groups=3 must be positive and divide the channels of f32[2,4,5]"
    with pytest.raises(ShapeError, match="^" + re.escape(message) + "$"):
        from_onnx(model)
    path = tmp_path / "gn.onnx"
    onnx.save(model, str(path))
    assert main(["fuse", str(path)]) == 2
    assert capsys.readouterr().err == f"fusionlang: error: {message}\n"


def test_group_norm_18_needs_a_scale_per_group():
    node = helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"], name="gn", num_groups=2)
    inits = {"scale": np.ones(4, np.float32), "bias": np.zeros(4, np.float32)}
    model = make_model([node], {"x": [2, 4, 5]}, {"y": None}, 18, inits)
    message = "node 'gn' (GroupNormalization): scale and bias should have shape [2] (one per group), got f32[4]"
    with pytest.raises(ShapeError, match="^" + re.escape(message) + "$"):
        from_onnx(model)


@pytest.mark.parametrize("axes", [None, [1], [0, -1]])
def test_mean_variance_norm_matches_onnxruntime(axes):
    attrs = {} if axes is None else {"axes": axes}
    node = helper.make_node("MeanVarianceNormalization", ["x"], ["y"], **attrs)
    model = make_model([node], {"x": [2, 3, 4, 5]}, {"y": None}, 13)
    compiled_and_onnxruntime(model, {"x": random_array((2, 3, 4, 5)) * 3 + 1}, tol=1e-4)


@pytest.mark.parametrize("axis, p", [(1, 1), (-1, 2), (0, 2)])
def test_lp_norm_matches_onnxruntime_and_gives_0_for_a_zero_norm(axis, p):
    x = random_array((3, 4, 5))
    x[1] = 0  # a zero slice along each axis
    x[:, 2] = 0
    x[..., 3] = 0
    node = helper.make_node("LpNormalization", ["x"], ["y"], axis=axis, p=p)
    model = make_model([node], {"x": [3, 4, 5]}, {"y": None}, 13)
    got = compiled_and_onnxruntime(model, {"x": x})
    assert not np.isnan(got).any()


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [3, 3]},
    {"kernel_shape": [2, 3], "p": 1, "strides": [2, 1], "pads": [1, 0, 1, 2]},
    {"kernel_shape": [3, 2], "p": 3, "dilations": [2, 1]},
    {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]},
    {"kernel_shape": [2], "p": 2},
])
def test_lp_pool_matches_onnxruntime(attrs):
    shape = (2, 3, 7) if len(attrs["kernel_shape"]) == 1 else (2, 3, 7, 6)
    node = helper.make_node("LpPool", ["x"], ["y"], **attrs)
    model = make_model([node], {"x": list(shape)}, {"y": None}, 18)
    compiled_and_onnxruntime(model, {"x": random_array(shape)}, tol=1e-5)
