"""`fusionlang fuse MODEL --save-onnx OUT.onnx`: the fused model is written, valid and runnable,
the summary counts its functions, and a path that cannot be written is one line, exit 2,
before any work."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from cli_helpers import conv_bn_pool_model, one_line_error

from fusionlang.cli import main

GPT2 = Path(__file__).resolve().parents[1] / "data" / "exports" / "gpt2_opset23.onnx"


def outputs(path, feeds) -> list[np.ndarray]:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def test_save_onnx_writes_a_valid_model_computing_the_original_outputs(tmp_path, capsys):
    model = conv_bn_pool_model(tmp_path / "m.onnx")
    out = tmp_path / "fused.onnx"
    assert main(["fuse", model, "--save-onnx", str(out)]) == 0
    stdout = capsys.readouterr().out
    fused = onnx.load(out)
    onnx.checker.check_model(fused, full_check=True)
    assert f"wrote {out}: {len(fused.functions)} functions for" in stdout
    feeds = {"x": np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)}
    np.testing.assert_allclose(outputs(out, feeds)[0], outputs(model, feeds)[0], rtol=1e-6, atol=1e-6)


def test_the_notes_on_split_nodes_are_counted_and_listed_with_verbose(tmp_path, capsys):
    out = tmp_path / "fused.onnx"
    assert main(["fuse", str(GPT2), "--save-onnx", str(out)]) == 0
    assert "notes on groups whose function differs from the plan (see --verbose)" in capsys.readouterr().out
    assert main(["fuse", str(GPT2), "--save-onnx", str(out), "--verbose"]) == 0
    assert "  note: ONNX node 'node_scaled_dot_product_attention" in capsys.readouterr().out


@pytest.mark.parametrize("where, reason", [
    (lambda root: root / "missing" / "out.onnx", "no such directory"),
    (lambda root: root, "it is a directory"),
])
def test_a_path_that_cannot_be_written_is_one_line_exit_2_before_the_work(tmp_path, capsys, where, reason):
    model = conv_bn_pool_model(tmp_path / "m.onnx")
    target = where(tmp_path)
    error = one_line_error(capsys, ["fuse", model, "--save-onnx", str(target)])
    assert error.startswith(f"fusionlang: error: cannot write {str(target)!r}: {reason}")


def test_a_write_that_fails_is_one_line_exit_2(tmp_path, capsys):
    model = conv_bn_pool_model(tmp_path / "m.onnx")
    error = one_line_error(capsys, ["fuse", model, "--save-onnx", "/dev/full"])
    assert error == "fusionlang: error: cannot write '/dev/full': no space left on device"


def test_with_json_on_stdout_the_model_is_still_written_and_stdout_is_only_the_plan(tmp_path, capsys):
    model = conv_bn_pool_model(tmp_path / "m.onnx")
    out = tmp_path / "fused.onnx"
    assert main(["--json", "fuse", model, "--save-onnx", str(out)]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert len(onnx.load(out).functions) == plan["kernels_after"]
