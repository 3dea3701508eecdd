"""Ops today's exporters emit for transformers, in the forms ONNX's node suite leaves out:
each model is imported, fused and compiled to C, and compared with onnxruntime."""

from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import TensorProto, helper

import fusionlang.onnx_backend as backend
from fusionlang.errors import InputError, ModelError
from fusionlang.frontend import from_onnx
from onnx_cases import F32, I64, make_model, random_array, run_onnxruntime

pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")


def compiled_matches_onnxruntime(model, feeds: dict) -> list[np.ndarray]:
    got = backend.prepare(model, target="c").run(feeds)
    want = run_onnxruntime(model, feeds)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    return list(got)


def test_range_of_constants_is_folded_at_import():
    # positions = Range(0, 6, 1) + offset: exporters build position ids this way
    nodes = [helper.make_node("Range", ["start", "limit", "delta"], ["pos"], name="range"),
             helper.make_node("Add", ["pos", "offset"], ["y"]),
             helper.make_node("Range", ["fstart", "flimit", "fdelta"], ["down"], name="down")]
    consts = {"start": np.array(0), "limit": np.array(6), "delta": np.array(1),
              "fstart": np.array(2.5, np.float32), "flimit": np.array(-1.0, np.float32),
              "fdelta": np.array(-0.75, np.float32)}
    model = make_model(nodes, {"offset": ([6], I64)}, {"y": ([6], I64), "down": ([5], F32)}, 17, consts)
    graph = from_onnx(model)
    assert [n.op for n in graph.nodes] == ["add"]
    np.testing.assert_array_equal(graph.constants[graph.nodes[0].inputs[0]], np.arange(6))
    compiled_matches_onnxruntime(model, {"offset": np.arange(10, 16)})


@pytest.mark.parametrize("inputs, limit, delta, message", [
    ({"start": ([], I64)}, 6, 1, "node 'range' (Range): input 0 (start) comes from graph input 'start', whose "
                                 "value only a run knows (fusionlang compiles it as a constant): give it with "
                                 "constant_inputs={'start': array} in fusionlang.from_onnx, run the model through "
                                 "fusionlang.Specializer (as the ONNX backend does), or `fusionlang run MODEL "
                                 "--input start=FILE.npy`"),
    ({}, 6, 0, "node 'range' (Range): delta is 0: the range never ends"),
    ({}, 10**15, 1, "node 'range' (Range): Range of 1000000000000000 elements is too large to fold at import "
                    "(at most 134217728)"),
])
def test_range_refusals_name_the_node(inputs, limit, delta, message):
    consts = {"start": np.array(0), "limit": np.array(limit), "delta": np.array(delta)}
    for name in inputs:
        del consts[name]
    model = make_model([helper.make_node("Range", ["start", "limit", "delta"], ["y"], name="range")], inputs,
                       {"y": None}, 17, consts)
    with pytest.raises(ModelError, match="^" + re.escape(message) + "$"):
        from_onnx(model)


@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum_with_a_constant_axis_compiles(exclusive, reverse):
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    model = make_model([node], {"x": [3, 5, 2]}, {"y": None}, 14, {"axis": np.array(-2, np.int32)})
    compiled_matches_onnxruntime(model, {"x": random_array([3, 5, 2])})


def test_trilu_reads_k_at_run_time():
    model = make_model([helper.make_node("Trilu", ["x", "k"], ["y"], upper=0)], {"x": [2, 4, 5], "k": ([], I64)},
                       {"y": None}, 14)
    rep = backend.prepare(model, target="c")
    x = random_array([2, 4, 5])
    for k in (-2, 0, 3):
        (got,) = rep.run({"x": x, "k": np.array(k)})
        np.testing.assert_array_equal(got, run_onnxruntime(model, {"x": x, "k": np.array(k)})[0])


def test_attention_mask_and_token_type_pattern():
    """IsNaN guarding a softmax, a GatherND picking rows, GatherElements picking per token,
    and an ArgMax: the ops BERT-style exports need, fused and compiled together."""
    nodes = [helper.make_node("Softmax", ["scores"], ["p"], axis=-1),
             helper.make_node("IsNaN", ["p"], ["nan"]),
             helper.make_node("Where", ["nan", "zero", "p"], ["probs"]),
             helper.make_node("GatherND", ["probs", "rows"], ["picked"], batch_dims=1),
             helper.make_node("GatherElements", ["table", "types"], ["typed"], axis=1),
             helper.make_node("ArgMax", ["probs"], ["best"], axis=-1, keepdims=0, select_last_index=1),
             helper.make_node("IsInf", ["scores"], ["masked"], detect_positive=0)]
    model = make_model(nodes, {"scores": [2, 3, 4], "types": ([2, 3], I64)},
                       {"picked": None, "typed": None, "best": ([2, 3], I64), "masked": ([2, 3, 4], TensorProto.BOOL)},
                       17, {"zero": np.array(0, np.float32), "rows": np.array([[[2], [0]], [[1], [-1]]]),
                            "table": random_array([2, 5], seed=3)})
    scores = random_array([2, 3, 4])
    scores[0, 1, :] = -np.inf  # a fully masked row: softmax gives NaN, the guard zeroes it
    scores[1, 2, 1] = -np.inf
    compiled_matches_onnxruntime(model, {"scores": scores, "types": np.array([[0, 4, -1], [3, 3, -5]])})


def test_every_new_op_runs_as_cuda_emulated():
    """The CUDA flavor of each new op's loop (NaN and inf tests, fmod, index reads, running
    sums, arg reductions), run by the CPU emulation of CUDA's execution model."""
    nodes = [helper.make_node("Mod", ["ia", "ib"], ["imod"]),
             helper.make_node("Mod", ["x", "fb"], ["fmod"], fmod=1),
             helper.make_node("IsNaN", ["s"], ["nan"]),
             helper.make_node("IsInf", ["s"], ["inf"], detect_negative=0),
             helper.make_node("Trilu", ["x", "k"], ["upper"]),
             helper.make_node("ArgMin", ["x"], ["low"], axis=1, select_last_index=1),
             helper.make_node("GatherElements", ["x", "ge"], ["ge_out"], axis=0),
             helper.make_node("GatherND", ["x", "nd"], ["nd_out"]),
             helper.make_node("CumSum", ["x", "axis"], ["sums"], reverse=1),
             helper.make_node("Shrink", ["x"], ["shrunk"], lambd=0.5, bias=0.1),
             helper.make_node("Mish", ["x"], ["mish"])]
    bools = TensorProto.BOOL
    model = make_model(nodes, {"x": [3, 4], "s": [3, 4], "ia": ([3, 4], I64), "k": ([], I64)},
                       {"imod": ([3, 4], I64), "fmod": None, "nan": ([3, 4], bools), "inf": ([3, 4], bools),
                        "upper": None, "low": ([3, 1], I64), "ge_out": None, "nd_out": None, "sums": None,
                        "shrunk": None, "mish": None}, 18,
                       {"ib": np.array([-4, -3, 5, 7]), "fb": np.array([0.7, -0.3, 1.5, -2.0], np.float32),
                        "ge": np.array([[2, -1, 0, 1]]), "nd": np.array([[0, 3], [-1, -4]]),
                        "axis": np.array(1)})
    x = random_array([3, 4]) * 3
    specials = np.array([[np.nan, np.inf, -np.inf, 0.0], [1.0, np.nan, -1.0, np.inf], [-np.inf, 2.0, 3.0, -0.0]],
                        np.float32)
    feeds = {"x": x, "s": specials, "ia": np.arange(-6, 6).reshape(3, 4) * 5, "k": np.array(1)}
    got = backend.prepare(model, target="cuda-emu").run(feeds)
    for g, w in zip(got, run_onnxruntime(model, feeds)):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op_type, attrs, indices, message", [
    ("GatherElements", {"axis": 1}, [[0, 1, 5], [0, 0, 1]], "index 5 is out of range for axis 1 of size 5"),
    ("GatherElements", {"axis": 1}, [[0, 1, 2], [-6, 0, 1]], "index -6 is out of range for axis 1 of size 5"),
    ("GatherND", {}, [[0, 4], [2, 0]], "index 2 is out of range for axis 0 of size 2"),
    ("GatherND", {"batch_dims": 1}, [[-6], [1]], "index -6 is out of range for axis 1 of size 5"),
])
def test_compiled_index_reads_are_checked(op_type, attrs, indices, message):
    model = make_model([helper.make_node(op_type, ["x", "i"], ["y"], name="pick", **attrs)],
                       {"x": [2, 5], "i": ([2, len(indices[0])], I64)}, {"y": None}, 17)
    rep = backend.prepare(model, target="c")
    op = {"GatherElements": "gather_elements", "GatherND": "gather_nd"}[op_type]
    expected = f"node 'pick' ({op}): {message}"
    with pytest.raises(InputError, match="^" + re.escape(expected) + "$"):
        rep.run({"x": random_array([2, 5]), "i": np.array(indices)})
    good = np.zeros((2, len(indices[0])), np.int64)
    np.testing.assert_array_equal(rep.run({"x": random_array([2, 5]), "i": good})[0],
                                  run_onnxruntime(model, {"x": random_array([2, 5]), "i": good})[0])
