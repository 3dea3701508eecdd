"""Attention, RMSNormalization, RotaryEmbedding and SwiGLU: converter forms the ONNX node
cases leave out, compiled to C and compared with ONNX's reference implementation; and the
forms import refuses, each with its one-line error."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from fusionlang.cli import main
from fusionlang.errors import ModelError, ShapeError
from fusionlang.frontend import from_onnx
from onnx_cases import compiled_matches_reference
from onnx_cases import I64, make_model, random_array

pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")

F64, BOOL = TensorProto.DOUBLE, TensorProto.BOOL


def attention_model(inputs: dict, outputs: list[str], opset: int = 23, **attrs):
    names = ["Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen"]
    used = [n if n in inputs else "" for n in names]
    while not used[-1]:
        used.pop()
    node = helper.make_node("Attention", used, outputs, name="att", **attrs)
    return make_model([node], inputs, {o: None for o in outputs if o}, opset)


def feeds_for(model) -> dict:
    feeds = {}
    for k, info in enumerate(model.graph.input):
        shape = [d.dim_value for d in info.type.tensor_type.shape.dim]
        kind = info.type.tensor_type.elem_type
        if kind == BOOL:
            feeds[info.name] = np.random.default_rng(k).random(shape) < 0.7
        elif kind == I64:
            feeds[info.name] = np.array([3, 5], np.int64)[:shape[0]]
        else:
            feeds[info.name] = random_array(shape, seed=k, dtype=np.float64 if kind == F64 else np.float32)
    return feeds


# ----- Attention ------------------------------------------------------------------------
def test_3d_gqa_with_past_softmax_in_double_and_every_output():
    # softmax_precision double for float32 inputs: the core runs in float64, then casts back
    model = attention_model({"Q": [2, 3, 16], "K": [2, 5, 8], "V": [2, 5, 6], "attn_mask": [3, 9],
                             "past_key": [2, 2, 4, 4], "past_value": [2, 2, 4, 3]},
                            ["Y", "present_key", "present_value", "qk"],
                            q_num_heads=4, kv_num_heads=2, softmax_precision=11, qk_matmul_output_mode=2,
                            softcap=1.5, scale=0.3)
    compiled_matches_reference(model, feeds_for(model))


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_each_qk_output_mode_without_a_mask(mode):
    model = attention_model({"Q": [1, 2, 3, 4], "K": [1, 2, 5, 4], "V": [1, 2, 5, 4]}, ["Y", "", "", "qk"],
                            qk_matmul_output_mode=mode, softcap=2.0)
    compiled_matches_reference(model, feeds_for(model))


def test_a_short_bool_mask_masks_the_keys_it_does_not_cover():
    model = attention_model({"Q": [2, 2, 3, 4], "K": [2, 2, 6, 4], "V": [2, 2, 6, 4],
                             "attn_mask": ([2, 1, 3, 4], BOOL)}, ["Y", "", "", "qk"], qk_matmul_output_mode=3)
    compiled_matches_reference(model, feeds_for(model))


def test_present_outputs_without_a_past_are_k_and_v():
    model = attention_model({"Q": [1, 4, 8], "K": [1, 3, 8], "V": [1, 3, 8]}, ["Y", "present_key", "present_value"],
                            q_num_heads=2, kv_num_heads=2, is_causal=1)
    compiled_matches_reference(model, feeds_for(model))


@pytest.mark.parametrize("window", [{"left_window_size": 1, "right_window_size": 1},
                                    {"right_window_size": 0, "is_causal": 1}, {"left_window_size": 2}])
def test_a_sliding_window_offset_by_nonpad_lengths_known_only_at_run_time(window):
    model = attention_model({"Q": [2, 2, 3, 4], "K": [2, 2, 6, 4], "V": [2, 2, 6, 4],
                             "nonpad_kv_seqlen": ([2], I64)}, ["Y"], opset=25, **window)
    compiled_matches_reference(model, feeds_for(model))


def refused(model, kind, message, tmp_path, capsys):
    with pytest.raises(kind, match="^" + re.escape(message) + "$"):
        from_onnx(model)
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    assert main(["fuse", str(path)]) == 2
    assert capsys.readouterr().err == f"fusionlang: error: {message}\n"


BAD_ATTENTION = [
    ({"Q": [1, 3, 8], "K": [1, 3, 8], "V": [1, 3, 8]}, {}, ShapeError,
     "node 'att' (Attention): 3-D input 0 of shape [1, 3, 8] needs q_num_heads and kv_num_heads dividing its "
     "hidden size, got 0"),
    ({"Q": [1, 4, 2, 8], "K": [1, 3, 2, 8], "V": [1, 3, 2, 8]}, {}, ShapeError,
     "node 'att' (Attention): 4 query heads cannot share 3 key/value heads evenly"),
    ({"Q": [1, 2, 2, 8], "K": [1, 2, 2, 8], "V": [1, 2, 2, 8]}, {"qk_matmul_output_mode": 5}, ModelError,
     "node 'att' (Attention): qk_matmul_output_mode=5 should be 0, 1, 2 or 3"),
    ({"Q": [1, 2, 2, 8], "K": [1, 2, 2, 8], "V": [1, 2, 2, 8], "past_key": [1, 2, 1, 8]}, {}, ModelError,
     "node 'att' (Attention): past_key and past_value must be given together"),
    ({"Q": [1, 2, 2, 8], "K": [1, 2, 2, 8], "V": [1, 2, 2, 8], "attn_mask": [2, 3]}, {}, ShapeError,
     "node 'att' (Attention): attn_mask f32[2,3] should have at most 2 keys on its last axis"),
    ({"Q": [1, 2, 8], "K": [1, 2, 8], "V": [1, 2, 8, 1]}, {}, ShapeError,
     "node 'att' (Attention): Q f32[1,2,8], K f32[1,2,8] and V f32[1,2,8,1] should all be 3-D or all 4-D"),
]


@pytest.mark.parametrize("inputs,attrs,kind,message", BAD_ATTENTION)
def test_attention_forms_refused(inputs, attrs, kind, message, tmp_path, capsys):
    refused(attention_model(inputs, ["Y"], **attrs), kind, message, tmp_path, capsys)


def test_nonpad_lengths_with_a_past_cache_are_refused(tmp_path, capsys):
    node = helper.make_node("Attention", ["Q", "K", "V", "", "pk", "pv", "n"], ["Y"], name="att")
    model = make_model([node], {"Q": [1, 2, 2, 8], "K": [1, 2, 2, 8], "V": [1, 2, 2, 8], "pk": [1, 2, 1, 8],
                                "pv": [1, 2, 1, 8], "n": ([1], I64)}, {"Y": None}, 24)
    refused(model, ModelError, "node 'att' (Attention): nonpad_kv_seqlen cannot be combined with past_key and "
            "past_value", tmp_path, capsys)


# ----- RMSNormalization, RotaryEmbedding, SwiGLU -------------------------------------------
def test_rms_norm_of_doubles_is_computed_in_the_float_stash_type():
    node = helper.make_node("RMSNormalization", ["x", "w"], ["y"], axis=-2, epsilon=1e-3)
    model = make_model([node], {"x": ([2, 3, 4], F64), "w": ([3, 4], F64)}, {"y": None}, 23)
    graph = from_onnx(model)
    assert [n.attrs["to"] for n in graph.nodes if n.op == "cast"] == ["float32", "float64"]
    compiled_matches_reference(model, feeds_for(model))


@pytest.mark.parametrize("interleaved", [0, 1])
def test_3d_rotary_embedding_of_part_of_each_head_without_position_ids(interleaved):
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin"], ["y"], num_heads=2, rotary_embedding_dim=4,
                            interleaved=interleaved)
    model = make_model([node], {"x": [2, 3, 12], "cos": [2, 3, 2], "sin": [2, 3, 2]}, {"y": None}, 23)
    compiled_matches_reference(model, feeds_for(model))


def test_an_odd_rotary_dim_is_refused(tmp_path, capsys):
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin"], ["y"], rotary_embedding_dim=3, name="rope")
    model = make_model([node], {"x": [1, 2, 3, 8], "cos": [1, 3, 2], "sin": [1, 3, 2]}, {"y": None}, 23)
    refused(model, ModelError, "node 'rope' (RotaryEmbedding): rotary_embedding_dim=3 should be even and at most "
            "the head size 8", tmp_path, capsys)


def test_swiglu_with_alpha():
    node = helper.make_node("SwiGLU", ["a", "b"], ["y"], alpha=1.7)
    model = make_model([node], {"a": [3, 5], "b": [3, 5]}, {"y": None}, 28)
    compiled_matches_reference(model, feeds_for(model))


def test_swiglu_of_two_shapes_is_refused(tmp_path, capsys):
    node = helper.make_node("SwiGLU", ["a", "b"], ["y"], name="glu")
    model = make_model([node], {"a": [3, 5], "b": [1, 5]}, {"y": None}, 28)
    refused(model, ShapeError, "node 'glu' (SwiGLU): a f32[3,5] and b f32[1,5] must have one shape and dtype",
            tmp_path, capsys)


def test_inputs_of_rank_5_are_refused(tmp_path, capsys):
    model = attention_model({"Q": [1, 1, 2, 2, 8], "K": [1, 1, 2, 2, 8], "V": [1, 1, 2, 2, 8]}, ["Y"])
    refused(model, ShapeError, "node 'att' (Attention): Q f32[1,1,2,2,8], K f32[1,1,2,2,8] and V f32[1,1,2,2,8] "
            "should all be 3-D or all 4-D", tmp_path, capsys)
