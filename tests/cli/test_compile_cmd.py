"""`fusionlang compile MODEL -o PATH` saves an artifact; `fusionlang run PATH` runs it with
the outputs `fusionlang run MODEL` gives, feeds from --input files or --random-inputs
(integers in the ranges the model accepts); a refused artifact, or a flag that applies to
a model, is one line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from cli_helpers import conv_bn_pool_model, run_cli
from test_cli_random_inputs import bert_like_model

import fusionlang
from fusionlang.cli import main
from fusionlang.frontend import from_onnx


@pytest.fixture(scope="module")
def compiled_model(tmp_path_factory):
    """(model path, artifact path) of the conv + bn + pool model."""
    where = tmp_path_factory.mktemp("compile")
    model = conv_bn_pool_model(where / "m.onnx")
    assert main(["--quiet", "compile", model, "-o", str(where / "m.fl")]) == 0
    return model, where / "m.fl"


def _outputs(directory) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_run_takes_the_artifact_and_gives_the_models_outputs_bit_for_bit(compiled_model, tmp_path):
    model, path = compiled_model
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    for source, out in ((model, "from_model"), (path, "from_artifact")):
        assert main(["--quiet", "run", str(source), "--input", f"x={tmp_path / 'x.npy'}",
                     "--output-dir", str(tmp_path / out)]) == 0
    assert _outputs(tmp_path / "from_artifact") == _outputs(tmp_path / "from_model")
    want = fusionlang.compile(fusionlang.fuse(from_onnx(model), "apollo"), "c").run({"x": x})
    assert np.load(tmp_path / "from_artifact" / "y.npy").tobytes() == want["y"].tobytes()


def test_random_integers_of_an_artifact_fit_the_model_as_for_the_model(tmp_path):
    model = tmp_path / "bert_like.onnx"
    onnx.save(bert_like_model(), str(model))
    assert main(["--quiet", "compile", str(model), "-o", str(tmp_path / "b.fl")]) == 0
    ranges = json.loads((tmp_path / "b.fl" / "manifest.json").read_text())["notes"]["input_ranges"]
    assert ranges == {"input_ids": [0, 3], "token_type_ids": [0, 2], "attention_mask": [0, 2]}
    for source, out in ((model, "from_model"), (tmp_path / "b.fl", "from_artifact")):
        assert main(["--quiet", "run", str(source), "--random-inputs", "7", "--output-dir", str(tmp_path / out)]) == 0
    assert _outputs(tmp_path / "from_artifact") == _outputs(tmp_path / "from_model")


def test_compile_reports_in_json(compiled_model, capsys, tmp_path):
    model, _ = compiled_model
    assert main(["--json", "compile", model, "-o", str(tmp_path / "j.fl")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["artifact"] == str(tmp_path / "j.fl") and report["kernels"] >= 1
    assert fusionlang.load(tmp_path / "j.fl")


@pytest.mark.parametrize("flag", [["--check"], ["--target", "reference"], ["--threads", "2"], ["--profile", "2"],
                                  ["--input-shape", "x=1x3x8x8"], ["--unchecked-indices"],
                                  ["--rules", "xla"], ["--strategy", "dp"]])
def test_a_flag_that_applies_to_a_model_is_refused_with_an_artifact(compiled_model, capsys, flag):
    _, path = compiled_model
    assert main(["run", str(path), "--random-inputs", "0", *flag]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{flag[0]} applies to a model, and this is an artifact" in err


def test_a_changed_artifact_is_one_line_and_exit_2(compiled_model, tmp_path):
    _, path = compiled_model
    copy = tmp_path / "changed.fl"
    copy.mkdir()
    for f in path.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    data = bytearray((copy / "model.so").read_bytes())
    data[-1] ^= 0xFF
    (copy / "model.so").write_bytes(bytes(data))
    proc = run_cli("run", copy, "--random-inputs", "0")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "model.so: its SHA-256 is not the one the manifest records" in proc.stderr


def test_an_artifact_without_its_manifest_is_a_directory_run_cannot_read(compiled_model, tmp_path, capsys):
    _, path = compiled_model
    (tmp_path / "model.so").write_bytes((path / "model.so").read_bytes())
    assert main(["run", str(tmp_path), "--random-inputs", "0"]) == 2
    assert capsys.readouterr().err == f"fusionlang: error: cannot read model {str(tmp_path)!r}: it is a directory\n"


def test_compile_onto_a_file_is_refused(compiled_model, tmp_path, capsys):
    model, _ = compiled_model
    (tmp_path / "taken").write_text("x")
    assert main(["compile", model, "-o", str(tmp_path / "taken")]) == 2
    assert "exists and is not a directory" in capsys.readouterr().err


def test_running_an_artifact_loads_none_of_the_compilers_libraries(compiled_model, tmp_path):
    _, path = compiled_model
    np.save(tmp_path / "x.npy", np.ones((1, 3, 8, 8), np.float32))
    code = ("import contextlib, io, json, sys\nfrom fusionlang.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()): status = main(['run', {str(path)!r}, "
            f"'--input', 'x={tmp_path / 'x.npy'}'])\n"
            "print(json.dumps([status, sorted(m for m in ('islpy', 'sympy', 'lark', 'networkx', 'onnx', 'ml_dtypes') "
            "if m in sys.modules)]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert json.loads(proc.stdout.splitlines()[-1]) == [0, []], proc.stderr
