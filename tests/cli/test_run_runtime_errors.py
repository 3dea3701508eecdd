"""`run` when the compiled code cannot go on: a gathered index out of range, or a heap
buffer it cannot allocate, exits 2 with one line; `--unchecked-indices` compiles without
the index check."""

from __future__ import annotations

import re

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from fusionlang.cli import main


def gather_model(path) -> str:
    table = numpy_helper.from_array(np.arange(15, dtype=np.float32).reshape(5, 3), "table")
    node = helper.make_node("Gather", ["table", "ids"], ["rows"], name="embed", axis=0)
    graph = helper.make_graph([node], "embedding", [helper.make_tensor_value_info("ids", TensorProto.INT64, [4])],
                              [helper.make_tensor_value_info("rows", TensorProto.FLOAT, [4, 3])], [table])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return str(path)


def test_a_bad_index_exits_2_with_one_line(tmp_path, capsys):
    model = gather_model(tmp_path / "m.onnx")
    np.save(tmp_path / "ids.npy", np.array([0, 1, 9, 2], np.int64))
    assert main(["run", model, "--input", f"ids={tmp_path / 'ids.npy'}"]) == 2
    out, err = capsys.readouterr()
    assert err == "fusionlang: error: node 'embed' (gather): index 9 is out of range for axis 0 of size 5\n"


def test_unchecked_indices_still_gather_good_ones(tmp_path, capsys):
    model = gather_model(tmp_path / "m.onnx")
    np.save(tmp_path / "ids.npy", np.array([0, -1, 4, 2], np.int64))
    argv = ["run", model, "--input", f"ids={tmp_path / 'ids.npy'}", "--check", "--unchecked-indices"]
    assert main(argv) == 0
    assert "check against the reference interpreter: ok" in capsys.readouterr().out


def softmax_model(path, width: int) -> str:
    """Per row, the largest of softmax(x) * x: the softmax row is a local buffer of its kernel
    (an output row cannot hold it, the output is one number per row)."""
    nodes = [helper.make_node("Softmax", ["x"], ["p"], name="softmax", axis=-1),
             helper.make_node("Mul", ["p", "x"], ["px"], name="weigh"),
             helper.make_node("ReduceMax", ["px"], ["y"], name="largest", axes=[-1], keepdims=1)]
    graph = helper.make_graph(nodes, "long_rows", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_out_of_memory_exits_2_with_one_line(tmp_path, capsys, monkeypatch):
    # rows longer than the stack limit keep their buffers on the heap; the test hook makes
    # every heap allocation above 4 KiB fail (see emit_c.ALLOC_C)
    from fusionlang.backend.emit_c import STACK_LIMIT

    width = STACK_LIMIT // 4 + 4096
    monkeypatch.setenv("FUSIONLANG_COPT", "-O2 -DFL_ALLOC_LIMIT=4096")
    assert main(["run", softmax_model(tmp_path / "m.onnx", width), "--random-inputs", "0"]) == 2
    out, err = capsys.readouterr()
    assert re.fullmatch(rf"fusionlang: error: out of memory allocating {width * 4} bytes in kernel fl_k_[0-9a-f]+\n",
                        err), err
