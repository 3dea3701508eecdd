"""TopK and OneHot imported, compiled to C and compared with ONNX's reference evaluator:
ties (lower index first), NaN, k equal to the axis, k and depth fed as graph inputs (the
backend specializes on their values), indices outside the depth; bad k and depth refused."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import fusionlang.onnx_backend as backend
from fusionlang.errors import FuseError
from onnx_cases import F32, I64, make_model

pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")


def compiled_matches_the_evaluator(model, feeds: dict) -> list[np.ndarray]:
    got = backend.prepare(model, target="c").run(feeds)
    want = ReferenceEvaluator(model).run(None, feeds)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    return list(got)


def top_k_model(shape, k: int, k_as_input: bool = False, dtype=F32, **attrs):
    node = helper.make_node("TopK", ["x", "k"], ["values", "indices"], name="top", **attrs)
    inputs = {"x": (list(shape), dtype)}
    if k_as_input:
        inputs["k"] = ([1], I64)
    return make_model([node], inputs, {"values": None, "indices": None}, 11,
                      None if k_as_input else {"k": np.array([k])})


TIES = np.array([[3.0, 1.0, 3.0, np.nan, -2.0, 1.0], [0.0, 0.0, 5.0, -1.0, 5.0, np.nan]], np.float32)


@pytest.mark.parametrize("k", [0, 1, 3, 6])
@pytest.mark.parametrize("largest", [0, 1])
def test_top_k_orders_ties_by_index_and_nan_as_largest(k, largest):
    compiled_matches_the_evaluator(top_k_model(TIES.shape, k, largest=largest), {"x": TIES})


def test_top_k_along_a_negative_axis_of_integers():
    x = np.random.default_rng(0).integers(-3, 3, (3, 5, 4))
    values, indices = compiled_matches_the_evaluator(top_k_model(x.shape, 4, dtype=I64, axis=-2), {"x": x})
    np.testing.assert_array_equal(np.take_along_axis(x, indices, axis=-2), values)


def test_top_k_with_k_as_a_graph_input_is_specialized_on_its_value():
    x = np.random.default_rng(1).standard_normal((2, 7)).astype(np.float32)
    model = top_k_model(x.shape, 0, k_as_input=True)
    rep = backend.prepare(model, target="c")
    for k in (2, 5, 2):
        got = rep.run({"x": x, "k": np.array([k])})
        want = ReferenceEvaluator(model).run(None, {"x": x, "k": np.array([k])})
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_top_k_random_lines(data):
    n = data.draw(st.integers(1, 9))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = rng.integers(-2, 3, (2, n)).astype(np.float32)  # few values: ties
    model = top_k_model(x.shape, data.draw(st.integers(0, n)), largest=data.draw(st.integers(0, 1)))
    compiled_matches_the_evaluator(model, {"x": x})


def test_top_k_larger_than_the_axis_is_refused():
    with pytest.raises(FuseError, match=re.escape("(sorted_indices): k=7 must be in [0, 6] (the length of axis 1)")):
        backend.prepare(top_k_model(TIES.shape, 7), target="c")


def one_hot_model(index_shape, depth, index_type=I64, depth_as_input: bool = False, **attrs):
    node = helper.make_node("OneHot", ["i", "depth", "values"], ["y"], name="hot", **attrs)
    inputs = {"i": (list(index_shape), index_type)}
    consts = {"values": np.array([-1.0, 2.0], np.float32)}
    if depth_as_input:
        inputs["depth"] = ([], I64)
    else:
        consts["depth"] = np.array(depth)
    return make_model([node], inputs, {"y": None}, 11, consts)


@pytest.mark.parametrize("axis", [-1, 0, 1, -3])
def test_one_hot_wraps_negative_indices_and_leaves_others_off(axis):
    indices = np.array([[0, -1, 3], [5, -5, -6]])  # 5 and -6 are outside [-5, 5): off everywhere
    compiled_matches_the_evaluator(one_hot_model(indices.shape, 5, axis=axis), {"i": indices})


def test_one_hot_casts_float_indices_to_integers():
    indices = np.array([1.7, -0.5, -2.2, 2.0], np.float32)  # truncated: 1, 0, -2, 2
    got = backend.prepare(one_hot_model(indices.shape, 3, index_type=F32), target="c").run({"i": indices})[0]
    np.testing.assert_array_equal(got.argmax(axis=-1), [1, 0, 1, 2])


def test_one_hot_with_depth_as_a_graph_input():
    indices = np.array([0, 2, -1])
    model = one_hot_model(indices.shape, 0, depth_as_input=True)
    rep = backend.prepare(model, target="c")
    for depth in (3, 4):
        got = rep.run({"i": indices, "depth": np.array(depth)})[0]
        np.testing.assert_array_equal(got, ReferenceEvaluator(model).run(None, {"i": indices,
                                                                                 "depth": np.array(depth)})[0])


@pytest.mark.parametrize("depth, message", [
    (0, "node 'hot' (one_hot): depth=0 must be >= 1"),
    (2.5, "node 'hot' (OneHot): depth must be a whole number, got 2.5"),
])
def test_one_hot_bad_depth_is_refused(depth, message):
    node = helper.make_node("OneHot", ["i", "depth", "values"], ["y"], name="hot")
    model = make_model([node], {"i": ([3], I64)}, {"y": None}, 11,
                       {"depth": np.array(depth, np.float32 if depth % 1 else np.int64),
                        "values": np.array([0.0, 1.0], np.float32)})
    with pytest.raises(FuseError, match=re.escape(message)):
        backend.prepare(model, target="c")


def test_top_k_of_bool_is_refused():
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], name="top")
    model = make_model([node], {"x": ([4], TensorProto.BOOL)}, {"v": None, "i": None}, 11, {"k": np.array([2])})
    with pytest.raises(FuseError, match=re.escape("node 'top/sort_position_0' (sort_position): sorting needs a "
                                                  "numeric input, got bool")):
        backend.prepare(model, target="c")
