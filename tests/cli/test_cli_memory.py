"""Huge declared shapes are refused before anything is allocated, naming the tensor and
its bytes; a MemoryError that still happens is one line, exit 2."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from cli_helpers import conv_bn_pool_model
from onnx import TensorProto, helper, numpy_helper

import fusionlang.cli.run
from fusionlang.cli import main
from fusionlang.ir.memory import LIMIT_VARIABLE, human_bytes, memory_limit

HUGE = [100000, 100000, 100000]
HUGE_BYTES = 100000**3 * 4


def save(path, nodes, inputs, output, inits=()):
    graph = helper.make_graph(nodes, "huge", inputs, [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
                              list(inits))
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("memory")
    huge_input = save(root / "huge_input.onnx", [helper.make_node("Relu", ["x"], ["y"], name="relu")],
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, HUGE)], "y")
    expanded = save(root / "expanded.onnx",
                    [helper.make_node("Expand", ["x", "s"], ["e"], name="expand"),
                     helper.make_node("Relu", ["e"], ["y"], name="relu")],
                    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])], "y",
                    [numpy_helper.from_array(np.array(HUGE, np.int64), "s")])
    return {"huge_input": huge_input, "expanded": expanded, "small": conv_bn_pool_model(root / "small.onnx")}


def error_line(capsys, argv) -> str:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert status == 2 and err.count("\n") == 1, err
    return err[:-1]


def limit_text() -> str:
    return f"the limit of {human_bytes(memory_limit())} (this machine's memory; {LIMIT_VARIABLE} sets another)"


@pytest.mark.parametrize("argv", [
    ["run", "{m}", "--random-inputs", "0"],
    ["run", "{m}", "--random-inputs", "0", "--target", "reference"],
    ["fuse", "{m}", "--loops"],
])
def test_a_huge_declared_input(capsys, models, argv):
    line = error_line(capsys, [a.format(m=models["huge_input"]) for a in argv])
    assert line == (f"fusionlang: error: input 'x' f32[100000,100000,100000] needs {HUGE_BYTES} bytes "
                    f"({human_bytes(HUGE_BYTES)}), more than {limit_text()}")


@pytest.mark.parametrize("argv", [["run", "{m}", "--random-inputs", "0"], ["fuse", "{m}", "--loops"]])
def test_shape_inference_to_a_huge_tensor(capsys, models, argv):
    line = error_line(capsys, [a.format(m=models["expanded"]) for a in argv])
    assert line == (f"fusionlang: error: tensor 'e' (output of node 'expand', expand) f32[100000,100000,100000] "
                    f"needs {HUGE_BYTES} bytes ({human_bytes(HUGE_BYTES)}), more than {limit_text()}")


def test_fuse_without_loops_allocates_nothing_and_works(capsys, models):
    assert main(["fuse", models["huge_input"]]) == 0


def test_the_limit_counts_every_tensor_and_the_noise(capsys, models, monkeypatch):
    from fusionlang.api import from_onnx

    graph = from_onnx(models["small"])
    tensors = sum(t.nbytes for t in graph.types.values())
    noise = sum(graph.types[v].size * 8 for v in graph.inputs)
    largest = max(graph.types.values(), key=lambda t: t.nbytes).nbytes
    monkeypatch.setenv(LIMIT_VARIABLE, str(tensors + noise))
    assert main(["run", models["small"], "--random-inputs", "0", "--quiet"]) == 0
    monkeypatch.setenv(LIMIT_VARIABLE, str(tensors + noise - 1))
    line = error_line(capsys, ["run", models["small"], "--random-inputs", "0"])
    assert line.startswith(f"fusionlang: error: the tensors of graph 'near_miss' need {tensors + noise} bytes ")
    assert f"(set by {LIMIT_VARIABLE}); the largest is " in line
    monkeypatch.setenv(LIMIT_VARIABLE, str(largest - 1))
    assert "more than the limit of" in error_line(capsys, ["run", models["small"], "--random-inputs", "0"])


def test_a_bad_limit_variable(capsys, models, monkeypatch):
    monkeypatch.setenv(LIMIT_VARIABLE, "lots")
    assert error_line(capsys, ["run", models["small"], "--random-inputs", "0"]) == (
        f"fusionlang: error: {LIMIT_VARIABLE}='lots': expected a number of bytes")


def test_a_memory_error_no_check_foresaw(capsys, models, monkeypatch):
    def exhausted(*args, **kwargs):
        raise MemoryError("Unable to allocate 3.55 PiB for an array with shape (100000, 100000, 100000)")

    monkeypatch.setattr(fusionlang.cli.run, "complete_feeds", exhausted)
    assert error_line(capsys, ["run", models["small"], "--random-inputs", "0"]) == (
        "fusionlang: error: out of memory: Unable to allocate 3.55 PiB for an array with shape (100000, 100000, 100000)")
    monkeypatch.setattr(fusionlang.cli.run, "complete_feeds",
                        lambda *a: (_ for _ in ()).throw(MemoryError()))
    assert error_line(capsys, ["run", models["small"], "--random-inputs", "0"]) == (
        "fusionlang: error: out of memory: an allocation failed")
