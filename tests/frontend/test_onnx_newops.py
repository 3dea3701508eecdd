"""CausalConvWithState, LinearAttention and BitCast: forms the ONNX node cases leave out,
compiled to C and compared with ONNX's reference implementation; and the forms import
refuses, each with its one-line error."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import fusionlang.onnx_backend as backend
from fusionlang.cli import main
from fusionlang.errors import ModelError, ShapeError, UnsupportedOpError
from fusionlang.frontend import from_onnx
from onnx_cases import compiled_matches_reference
from onnx_cases import make_model, random_array

pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")

F16, F64, I16, I32, I64, U64 = (TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.INT16, TensorProto.INT32,
                                TensorProto.INT64, TensorProto.UINT64)


def refused(model, kind, message, tmp_path, capsys):
    with pytest.raises(kind, match="^" + re.escape(message) + "$"):
        from_onnx(model)
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    assert main(["fuse", str(path)]) == 2
    assert capsys.readouterr().err == f"fusionlang: error: {message}\n"


def random_feeds(model) -> dict:
    feeds = {}
    for k, info in enumerate(model.graph.input):
        shape = [d.dim_value for d in info.type.tensor_type.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(info.type.tensor_type.elem_type)
        feeds[info.name] = random_array(shape, seed=k, dtype=np.float32).astype(dtype)
    return feeds


# ----- CausalConvWithState --------------------------------------------------------------
def conv_model(inputs: dict, outputs: list[str], **attrs):
    names = ["x", "w", "bias", "past"]
    used = [n if n in inputs else "" for n in names]
    while not used[-1]:
        used.pop()
    node = helper.make_node("CausalConvWithState", used, outputs, name="conv", **attrs)
    return make_model([node], inputs, {o: None for o in outputs if o}, 27)


def test_causal_conv_of_doubles_with_bias_past_state_and_silu():
    model = conv_model({"x": ([2, 3, 5], F64), "w": ([3, 1, 4], F64), "bias": ([3], F64),
                        "past": ([2, 3, 3], F64)}, ["y", "state"], activation="silu")
    compiled_matches_reference(model, random_feeds(model))


def test_causal_conv_state_longer_than_the_input_keeps_the_older_past():
    # k - 1 = 4 carried positions, 2 new ones: the next state is 2 old and 2 new positions
    model = conv_model({"x": [1, 2, 2], "w": [2, 1, 5], "past": [1, 2, 4]}, ["y", "state"])
    compiled_matches_reference(model, random_feeds(model))


BAD_CONV = [
    ({"x": [1, 2, 3], "w": [2, 1, 2]}, {"activation": "gelu"}, ModelError,
     "node 'conv' (CausalConvWithState): activation='gelu' should be one of none, silu, swish"),
    ({"x": [1, 2, 3], "w": [3, 1, 2]}, {}, ShapeError,
     "node 'conv' (CausalConvWithState): input f32[1,2,3] should be (batch, channels, length) and weight "
     "f32[3,1,2] (channels, 1, k)"),
    ({"x": [1, 2, 3], "w": [2, 1, 3], "past": [1, 2, 1]}, {}, ShapeError,
     "node 'conv' (CausalConvWithState): past_state f32[1,2,1] should be [1, 2, 2]"),
]


@pytest.mark.parametrize("inputs, attrs, kind, message", BAD_CONV)
def test_causal_conv_forms_refused(inputs, attrs, kind, message, tmp_path, capsys):
    refused(conv_model(inputs, ["y"], **attrs), kind, message, tmp_path, capsys)


# ----- LinearAttention -------------------------------------------------------------------
def linear_model(inputs: dict, outputs: list[str], **attrs):
    names = ["q", "k", "v", "past", "decay", "beta"]
    used = [n if n in inputs else "" for n in names]
    while not used[-1]:
        used.pop()
    node = helper.make_node("LinearAttention", used, outputs, name="la", **attrs)
    return make_model([node], inputs, {o: None for o in outputs if o}, 27)


def small_decay(feeds: dict) -> dict:
    # decay is a log factor: negative, so the state shrinks as in a real model
    if "decay" in feeds:
        feeds["decay"] = -np.abs(feeds["decay"])
    return feeds


def test_gated_delta_gqa_with_per_key_decay_and_shared_beta():
    model = linear_model({"q": [2, 3, 4 * 3], "k": [2, 3, 2 * 3], "v": [2, 3, 2 * 5], "past": [2, 2, 3, 5],
                          "decay": [2, 3, 2 * 3], "beta": [2, 3, 1]}, ["y", "state"],
                         q_num_heads=4, kv_num_heads=2, update_rule="gated_delta")
    compiled_matches_reference(model, small_decay(random_feeds(model)), rtol=1e-4, atol=1e-5)


def test_delta_on_doubles_runs_in_float32_and_returns_doubles():
    model = linear_model({"q": ([1, 4, 2 * 4], F64), "k": ([1, 4, 2 * 4], F64), "v": ([1, 4, 2 * 2], F64),
                          "beta": ([1, 4, 2], F64)}, ["y", "state"],
                         q_num_heads=2, kv_num_heads=2, update_rule="delta", scale=0.5)
    compiled_matches_reference(model, random_feeds(model), rtol=1e-5, atol=1e-6)


BAD_LINEAR = [
    ({"q": [1, 2, 4], "k": [1, 2, 4], "v": [1, 2, 4]}, {"q_num_heads": 1, "kv_num_heads": 1}, ModelError,
     "node 'la' (LinearAttention): update_rule='gated_delta' requires the decay input"),
    ({"q": [1, 2, 4], "k": [1, 2, 4], "v": [1, 2, 4], "beta": [1, 2, 1]},
     {"q_num_heads": 1, "kv_num_heads": 1, "update_rule": "linear"}, ModelError,
     "node 'la' (LinearAttention): update_rule='linear' forbids the beta input"),
    ({"q": [1, 2, 6], "k": [1, 2, 4], "v": [1, 2, 4]}, {"q_num_heads": 3, "kv_num_heads": 2, "update_rule": "linear"},
     ModelError, "node 'la' (LinearAttention): q_num_heads=3 should be a positive multiple of kv_num_heads=2"),
    ({"q": [1, 2, 8], "k": [1, 2, 6], "v": [1, 2, 4]}, {"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "linear"},
     ShapeError, "node 'la' (LinearAttention): query f32[1,2,8], key f32[1,2,6] and value f32[1,2,4] do not split "
     "into 2 query and 2 key/value heads of one key size"),
    ({"q": [1, 2, 4], "k": [1, 2, 4], "v": [1, 2, 4], "decay": [1, 2, 3]},
     {"q_num_heads": 1, "kv_num_heads": 1, "update_rule": "gated"}, ShapeError,
     "node 'la' (LinearAttention): decay f32[1,2,3] should be (1, 2, one of [1, 4])"),
    ({"q": [1, 300, 4], "k": [1, 300, 4], "v": [1, 300, 4]},
     {"q_num_heads": 1, "kv_num_heads": 1, "update_rule": "linear"}, UnsupportedOpError,
     "node 'la': LinearAttention (domain ai.onnx, opset 27) is not supported in this form: a sequence of 300 "
     "tokens (at most 256 are unrolled)"),
]


@pytest.mark.parametrize("inputs, attrs, kind, message", BAD_LINEAR)
def test_linear_attention_forms_refused(inputs, attrs, kind, message, tmp_path, capsys):
    refused(linear_model(inputs, ["y"], **attrs), kind, message, tmp_path, capsys)


# ----- BitCast ---------------------------------------------------------------------------
def test_bitcast_fused_between_arithmetic_keeps_every_bit():
    # float32 sum -> its bits as int32 -> masked to the exponent field: one fused kernel
    nodes = [helper.make_node("Add", ["x", "y"], ["s"]),
             helper.make_node("BitCast", ["s"], ["bits"], to=I32),
             helper.make_node("BitwiseAnd", ["bits", "mask"], ["exponent"])]
    model = make_model(nodes, {"x": [3, 4], "y": [3, 4]}, {"exponent": ([3, 4], I32)}, 26,
                       {"mask": np.array(0x7F800000, np.int32)})
    compiled_matches_reference(model, random_feeds(model))


@pytest.mark.parametrize("source, target", [(F16, I16), (I16, F16), (I64, F64), (F64, U64), (U64, I64)])
def test_bitcast_round_trips_every_pattern_of_the_width(source, target):
    dtype = helper.tensor_dtype_to_np_dtype(source)
    bits = np.random.default_rng(0).integers(0, 256, size=24 * dtype.itemsize, dtype=np.uint8)
    x = bits.view(dtype).reshape(4, 6)  # NaN payloads and subnormals included
    nodes = [helper.make_node("BitCast", ["x"], ["y"], to=target),
             helper.make_node("BitCast", ["y"], ["z"], to=source)]
    model = make_model(nodes, {"x": ([4, 6], source)}, {"y": ([4, 6], target), "z": ([4, 6], source)}, 26)
    got = backend.prepare(model, target="c").run({"x": x})
    want = ReferenceEvaluator(model).run(None, {"x": x})
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        assert g.tobytes() == w.tobytes()


def test_bitcast_without_a_target_dtype_is_refused(tmp_path, capsys):
    model = make_model([helper.make_node("BitCast", ["x"], ["y"], name="bc")], {"x": [2]}, {"y": None}, 26)
    refused(model, ModelError, "node 'bc' (BitCast): needs the 'to' attribute (the target dtype)", tmp_path, capsys)


def test_bitcast_between_widths_is_refused(tmp_path, capsys):
    node = helper.make_node("BitCast", ["x"], ["y"], name="bc", to=I64)
    model = make_model([node], {"x": [2]}, {"y": None}, 26)
    refused(model, ShapeError, "node 'bc' (bitcast): float32 (32 bits) and int64 (64 bits) "
            "differ in width", tmp_path, capsys)


# ----- FlexAttention (ai.onnx.preview) -----------------------------------------------------
def flex_model(inputs: dict, domain: str = "ai.onnx.preview", **attrs):
    node = helper.make_node("FlexAttention", ["Q", "K", "V"], ["Y"], name="flex", domain=domain, **attrs)
    model = make_model([node], inputs, {"Y": None}, 26)
    model.opset_import.append(helper.make_opsetid("ai.onnx.preview", 1))
    return model


def test_flex_attention_gqa_with_softmax_in_double():
    model = flex_model({"Q": [2, 4, 3, 8], "K": [2, 2, 5, 8], "V": [2, 2, 5, 6]}, scale=0.4,
                       softmax_precision=TensorProto.DOUBLE)
    compiled_matches_reference(model, random_feeds(model))


def mod_graph(nodes, name="mod", outputs=("t",), initializers=None):
    return helper.make_graph(nodes, name, [helper.make_tensor_value_info("s", TensorProto.FLOAT, None)],
                             [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                             initializer=initializers or [])


def test_flex_attention_applies_score_and_prob_mods_whose_names_clash_with_the_model():
    # the bodies call their values Q and K, like the model's inputs: inlined, they get fresh names
    score_mod = mod_graph([helper.make_node("Mul", ["s", "Q"], ["K"]), helper.make_node("Neg", ["K"], ["t"])],
                          initializers=[helper.make_tensor("Q", TensorProto.FLOAT, [], [0.5])])
    prob_mod = mod_graph([helper.make_node("Sqrt", ["s"], ["t"])], name="prob")
    model = flex_model({"Q": [1, 2, 3, 4], "K": [1, 1, 5, 4], "V": [1, 1, 5, 4]}, score_mod=score_mod,
                       prob_mod=prob_mod)
    compiled_matches_reference(model, random_feeds(model))


def test_flex_attention_with_a_mod_graph_of_an_unknown_op_is_refused(tmp_path, capsys):
    body = mod_graph([helper.make_node("Frobnicate", ["s"], ["t"])])
    model = flex_model({"Q": [1, 1, 2, 4], "K": [1, 1, 2, 4], "V": [1, 1, 2, 4]}, score_mod=body)
    refused(model, UnsupportedOpError, "node 'flex' (FlexAttention): its graph 'mod' uses Frobnicate, which "
            "fusionlang does not import", tmp_path, capsys)


def test_flex_attention_with_a_mod_graph_of_two_outputs_is_refused(tmp_path, capsys):
    body = mod_graph([helper.make_node("Neg", ["s"], ["t"]), helper.make_node("Abs", ["s"], ["u"])],
                     outputs=("t", "u"))
    model = flex_model({"Q": [1, 1, 2, 4], "K": [1, 1, 2, 4], "V": [1, 1, 2, 4]}, prob_mod=body)
    refused(model, ModelError, "node 'flex' (FlexAttention): prob_mod should have one output, has 2", tmp_path,
            capsys)


def test_flex_attention_of_3d_inputs_is_refused(tmp_path, capsys):
    model = flex_model({"Q": [1, 2, 8], "K": [1, 2, 8], "V": [1, 2, 8]})
    refused(model, ShapeError, "node 'flex' (FlexAttention): Q f32[1,2,8], K f32[1,2,8] and V f32[1,2,8] should all "
            "be 4-D (batch, heads, sequence, size)", tmp_path, capsys)


def test_flex_attention_is_only_converted_in_its_own_domain():
    model = flex_model({"Q": [1, 1, 2, 4], "K": [1, 1, 2, 4], "V": [1, 1, 2, 4]}, domain="")
    with pytest.raises(UnsupportedOpError, match="FlexAttention"):
        from_onnx(model)
