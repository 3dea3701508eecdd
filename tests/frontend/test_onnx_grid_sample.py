"""GridSample imported as grid_coordinates -> grid_taps -> gather_taps, and AffineGrid as a
matmul with a constant grid, compiled to C and compared with ONNX's reference evaluator:
every mode and padding mode, both corner conventions, 2-d and 3-d, grids reaching past the
borders; bad modes and shapes refused."""

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


def grid_sample_model(x_shape, grid_shape, opset: int = 20, **attrs):
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], name="sample", **attrs)
    return make_model([node], {"x": list(x_shape), "grid": list(grid_shape)}, {"y": None}, opset)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample_matches_the_evaluator(mode, padding_mode, align_corners):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    grid = rng.uniform(-2.5, 2.5, (2, 3, 2, 2)).astype(np.float32)  # past the borders, more than a span
    model = grid_sample_model(x.shape, grid.shape, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    got = backend.prepare(model, target="c").run({"x": x, "grid": grid})[0]
    want = ReferenceEvaluator(model).run(None, {"x": x, "grid": grid})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_volumetric_grid_sample(mode):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 3, 4, 2)).astype(np.float32)
    grid = rng.uniform(-1.2, 1.2, (1, 2, 3, 2, 3)).astype(np.float32)
    model = grid_sample_model(x.shape, grid.shape, mode=mode, padding_mode="border")
    got = backend.prepare(model, target="c").run({"x": x, "grid": grid})[0]
    np.testing.assert_allclose(got, ReferenceEvaluator(model).run(None, {"x": x, "grid": grid})[0], rtol=1e-5,
                               atol=1e-5)


def test_opset_16_mode_names():
    rng = np.random.default_rng(2)
    x, grid = rng.standard_normal((1, 1, 3, 3)).astype(np.float32), rng.uniform(-1, 1, (1, 2, 2, 2)).astype(np.float32)
    old = backend.prepare(grid_sample_model(x.shape, grid.shape, 16, mode="bicubic"), target="c")
    new = backend.prepare(grid_sample_model(x.shape, grid.shape, 20, mode="cubic"), target="c")
    np.testing.assert_array_equal(old.run({"x": x, "grid": grid})[0], new.run({"x": x, "grid": grid})[0])


@pytest.mark.parametrize("attrs, message", [
    ({"mode": "area"}, "mode='area' should be one of nearest, linear, cubic"),
    ({"padding_mode": "wrap"}, "padding_mode='wrap' should be one of zeros, border, reflection"),
])
def test_grid_sample_bad_modes_are_refused(attrs, message):
    with pytest.raises(FuseError, match=re.escape(f"(grid_coordinates): {message}")):
        backend.prepare(grid_sample_model((1, 1, 3, 3), (1, 2, 2, 2), **attrs), target="c")


def test_grid_of_the_wrong_rank_is_refused():
    with pytest.raises(FuseError, match=re.escape("(grid_coordinates): grid must be [N, spatial..., 2] for 2 sizes, "
                                                  "got f32[1,2,2,3]")):
        backend.prepare(grid_sample_model((1, 1, 3, 3), (1, 2, 2, 3)), target="c")


def affine_grid_model(theta_shape, size, **attrs):
    node = helper.make_node("AffineGrid", ["theta", "size"], ["grid"], name="affine", **attrs)
    return make_model([node], {"theta": list(theta_shape)}, {"grid": None}, 20, {"size": np.array(size)})


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # the evaluator's step over one cell
@pytest.mark.parametrize("size", [[2, 3, 4, 5], [1, 2, 3, 1, 4], [2, 1, 1, 3]])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_affine_grid_matches_the_evaluator(size, align_corners):
    rank = len(size) - 2
    theta = np.random.default_rng(3).standard_normal((size[0], rank, rank + 1)).astype(np.float32)
    model = affine_grid_model(theta.shape, size, align_corners=align_corners)
    got = backend.prepare(model, target="c").run({"theta": theta})[0]
    np.testing.assert_allclose(got, ReferenceEvaluator(model).run(None, {"theta": theta})[0], rtol=1e-5, atol=1e-5)


def test_affine_grid_with_a_theta_of_the_wrong_shape_is_refused():
    with pytest.raises(FuseError, match="^" + re.escape("node 'affine' (AffineGrid): theta must be [N, 2, 3] for size "
                                                        "[2, 3, 4, 5], got f32[2,3,4]") + "$"):
        backend.prepare(affine_grid_model((2, 3, 4), [2, 3, 4, 5]), target="c")
