"""`run --random-inputs SEED` draws integers the model accepts, and `--check` scales its
tolerance with each output."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from fusionlang.cli import main
from fusionlang.cli.common import compare
from fusionlang.cli.feeds import read_feeds
from fusionlang.frontend import from_onnx

VOCAB, TYPES, SEQ = 3, 2, 16


def bert_like_model() -> onnx.ModelProto:
    """Token and type embeddings, and an int64 attention mask turned into an additive bias."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((VOCAB, 4)).astype(np.float32), "words"),
             numpy_helper.from_array(rng.standard_normal((TYPES, 4)).astype(np.float32), "types"),
             numpy_helper.from_array(np.array(1.0, np.float32), "one"),
             numpy_helper.from_array(np.array(-10000.0, np.float32), "big"),
             numpy_helper.from_array(np.array([2]), "axes")]
    nodes = [helper.make_node("Gather", ["words", "input_ids"], ["w"]),
             helper.make_node("Gather", ["types", "token_type_ids"], ["t"]),
             helper.make_node("Add", ["w", "t"], ["e"]),
             helper.make_node("Unsqueeze", ["attention_mask", "axes"], ["m3"]),
             helper.make_node("Cast", ["m3"], ["mf"], to=TensorProto.FLOAT),
             helper.make_node("Sub", ["one", "mf"], ["inv"]),
             helper.make_node("Mul", ["inv", "big"], ["bias"]),
             helper.make_node("Add", ["e", "bias"], ["y"])]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, [2, SEQ])
              for n in ("input_ids", "token_type_ids", "attention_mask")]
    graph = helper.make_graph(nodes, "bert_like", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                                           [2, SEQ, 4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_random_integers_fit_the_model():
    feeds = read_feeds(from_onnx(bert_like_model()), None, 0)
    assert feeds["input_ids"].min() >= 0 and feeds["input_ids"].max() < VOCAB
    assert set(np.unique(feeds["token_type_ids"])) == set(range(TYPES))
    assert set(np.unique(feeds["attention_mask"])) == {0, 1}


def test_run_random_inputs_check_works_on_a_bert_like_model(tmp_path, capsys):
    path = tmp_path / "bert_like.onnx"
    onnx.save(bert_like_model(), str(path))
    assert main(["run", str(path), "--random-inputs", "0", "--check"]) == 0
    assert "check against the reference interpreter: ok" in capsys.readouterr().out


def test_check_tolerance_follows_the_output_magnitude():
    want = np.array([1e-6, -2e-6, 3e-6], np.float32)
    assert compare({"y": want * 2}, {"y": want}, 1e-3, 1e-4) == [
        "y: max abs error 3e-06 exceeds rtol=0.001 + atol=0.0001 x max |reference| 3e-06"]
    assert compare({"y": want * (1 + 1e-5)}, {"y": want}, 1e-3, 1e-4) == []
    large = want * 1e6
    assert compare({"y": large + 1e-4}, {"y": large}, 1e-3, 1e-4) == []


def test_check_compares_integers_exactly():
    want = np.arange(6) * 100_000
    assert compare({"y": want + np.eye(1, 6, 2, dtype=int)[0]}, {"y": want}, 1e-3, 1e-4) == [
        "y: 1 of 6 values differ from the reference"]
