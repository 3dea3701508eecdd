"""The LRN template against the reference, onnxruntime and the loop nest it replaces: every
attribute, ranks 2 to 5, planes shorter and longer than a tile, batches, special values,
threads; the part before a pooling template; what stays a loop nest."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusionlang
from fusionlang import backend, reference
from fusionlang.backend import lrn_template
from fusionlang.engine.plan import single_group_plan
from fusionlang.ops import GraphBuilder


def lrn_graph(shape, size=5, alpha=1e-4, beta=0.75, bias=2.0, dtype="float32"):
    b = GraphBuilder("lrn")
    b.output(b.op("lrn", b.input("x", shape, dtype), size=size, alpha=alpha, beta=beta, bias=bias))
    return b.build()


def _strategies(compiled) -> list[str]:
    return [k.strategy for k in compiled.kernels]


def _both(graph, feeds, **options):
    """(outputs of the LRN template, of the loop nest, the template's compiled graph)."""
    plan = single_group_plan(graph)
    template = backend.compile(plan, **options)
    assert _strategies(template) == ["lrn template"]
    loop_nest = backend.compile(plan, templates=False, **options)
    assert _strategies(loop_nest) != ["lrn template"]
    return template.run(feeds), loop_nest.run(feeds), template


@settings(max_examples=30)
@given(shape=st.sampled_from([(2, 7), (1, 3, 40), (2, 6, 9, 13), (1, 12, 23, 17), (1, 4, 2, 3, 45), (1, 1, 300)]),
       size=st.integers(1, 7), alpha=st.sampled_from([1e-4, 2e-5, 0.3]), beta=st.sampled_from([0.75, 0.5, 1.0, 0.3]),
       bias=st.sampled_from([1.0, 2.0, 0.5]), seed=st.integers(0, 2**16))
def test_the_lrn_template_is_the_loop_nest_and_matches_the_reference(shape, size, alpha, beta, bias, seed):
    graph = lrn_graph(shape, size, alpha, beta, bias)
    x = (np.random.default_rng(seed).standard_normal(shape) * 3).astype(np.float32)
    got, loop_nest, _ = _both(graph, {"x": x})
    out = graph.outputs[0]
    if beta in (0.75, 1.0):  # square roots and a division: correctly rounded, vector or not
        np.testing.assert_array_equal(got[out], loop_nest[out])
    else:  # powf: libmvec's vector powf and the scalar one may differ in the last place,
        # and the two kernels vectorize different elements
        np.testing.assert_array_max_ulp(got[out], loop_nest[out], maxulp=2)
    np.testing.assert_allclose(got[out], reference.run(graph, {"x": x})[out], rtol=2e-5, atol=1e-6)


def test_planes_over_several_tiles_and_special_values_match_the_loop_nest():
    shape = (2, 5, 3 * lrn_template.TILE // 7, 7)  # a plane of 3 tiles less a few floats
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    x[0, 1, 0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    x[1, 4, -1, -3:] = [3.4e38, -1e-45, np.nan]
    graph = lrn_graph(shape)
    got, loop_nest, compiled = _both(graph, {"x": x})
    out = graph.outputs[0]
    np.testing.assert_array_equal(got[out], loop_nest[out])  # NaNs in the same places, -0.0 kept
    assert np.signbit(got[out][0, 1, 0, 3])
    with np.errstate(all="ignore"):
        want = reference.run(graph, {"x": x})[out]
    np.testing.assert_allclose(got[out], want, rtol=2e-5, atol=1e-6, equal_nan=True)
    assert compiled.sources.count("fl_lrn_") == 3  # the routine, its declaration and its call


def test_threads_share_the_channels_and_give_the_same_result():
    shape = (2, 9, 31, 29)
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    graph = lrn_graph(shape)
    got, loop_nest, compiled = _both(graph, {"x": x}, openmp=True)
    np.testing.assert_array_equal(got[graph.outputs[0]], loop_nest[graph.outputs[0]])
    assert "#pragma omp parallel for collapse(2)" in compiled.sources


def test_lrns_of_one_formula_share_one_routine():
    b = GraphBuilder("two_lrns")
    x = b.input("x", (1, 16, 56, 56))
    first = b.op("lrn", x, size=5, alpha=1e-4, beta=0.75, bias=2.0)
    pooled = b.max_pool(first, kernel_shape=[3, 3], strides=[2, 2])
    b.output(b.op("lrn", pooled, size=5, alpha=1e-4, beta=0.75, bias=2.0))
    graph = b.build()
    plan = fusionlang.fuse(graph, "apollo")
    assert [[graph.node(n).op for n in g.nodes] for g in plan.groups] == [["lrn", "max_pool"], ["lrn"]]
    compiled = fusionlang.compile(plan, "c")
    # the first before its pooling template, the second a group of its own
    assert [k.strategy for k in compiled.kernels] == ["gemm template", "lrn template"]
    assert compiled.sources.count("void fl_lrn_") == 1 + 2  # one definition, a declaration per caller
    feeds = {"x": np.random.default_rng(1).standard_normal((1, 16, 56, 56)).astype(np.float32)}
    np.testing.assert_allclose(compiled.run(feeds)[graph.outputs[0]], reference.run(graph, feeds)[graph.outputs[0]],
                               rtol=2e-5, atol=1e-6)


def test_the_lrn_before_a_pooling_template_runs_as_the_lrn_template():
    # zfnet512's and alexnet's LRN + max pool group: the LRN part needs no isl schedule
    b = GraphBuilder("lrn_pool")
    x = b.input("x", (1, 16, 27, 27))
    b.output(b.max_pool(b.op("lrn", x, size=5, alpha=1e-4, beta=0.75, bias=2.0), kernel_shape=[3, 3],
                        strides=[2, 2]))
    graph = b.build()
    plan = fusionlang.fuse(graph, "apollo")
    assert len(plan.groups) == 1
    compiled = fusionlang.compile(plan, "c")
    assert "lrn as the LRN template" in compiled.sources and "pooling template" in compiled.sources
    feeds = {"x": np.random.default_rng(2).standard_normal((1, 16, 27, 27)).astype(np.float32)}
    np.testing.assert_allclose(compiled.run(feeds)[graph.outputs[0]], reference.run(graph, feeds)[graph.outputs[0]],
                               rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_an_lrn_of_another_dtype_stays_a_loop_nest(dtype):
    graph = lrn_graph((1, 6, 5, 5), dtype=dtype)
    assert lrn_template.plan_lrn(graph, [graph.nodes[0].name], graph.constants) is None
    compiled = backend.compile(single_group_plan(graph))
    assert _strategies(compiled) != ["lrn template"]
    feeds = {"x": np.random.default_rng(4).standard_normal((1, 6, 5, 5)).astype(dtype)}
    np.testing.assert_allclose(compiled.run(feeds)[graph.outputs[0]], reference.run(graph, feeds)[graph.outputs[0]],
                               rtol=2e-3, atol=1e-3)


def test_an_lrn_with_more_in_its_part_stays_a_loop_nest():
    b = GraphBuilder("lrn_relu")
    x = b.input("x", (1, 6, 5, 5))
    b.output(b.relu(b.op("lrn", x, size=3, alpha=1e-4, beta=0.75, bias=2.0)))
    graph = b.build()
    assert lrn_template.plan_lrn(graph, [n.name for n in graph.nodes], graph.constants) is None


@pytest.mark.parametrize("size, beta", [(5, 0.75), (3, 0.5)])
def test_the_lrn_template_agrees_with_onnxruntime(size, beta):
    ort = pytest.importorskip("onnxruntime")
    import onnx
    from onnx import helper

    shape = (2, 10, 17, 19)
    node = helper.make_node("LRN", ["x"], ["y"], size=size, alpha=2e-4, beta=beta, bias=1.5)
    model = helper.make_model(
        helper.make_graph([node], "lrn", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, shape)]),
        opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 10
    x = (np.random.default_rng(size).standard_normal(shape) * 20).astype(np.float32)
    graph = fusionlang.from_onnx(model)
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c")
    assert _strategies(compiled) == ["lrn template"]
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(compiled.run({"x": x})[graph.outputs[0]], want, rtol=1e-5, atol=1e-6)
