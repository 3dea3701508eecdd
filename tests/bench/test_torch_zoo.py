"""bench/torch_zoo.py without its exporter stack: a cached export is timed, a model that
fails is a row saying why, and the README table reads the JSON."""

import json
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import model_runtime  # noqa: E402
import torch_zoo  # noqa: E402


def never_built():
    raise AssertionError("a cached export is not rebuilt")


def broken():
    raise RuntimeError("no such config field\nsecond line")


@pytest.fixture
def zoo(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    onnx.save(model_runtime.mlp_log_softmax(batch=4, sizes=(16, 8, 4)), cache / "tiny.onnx")
    np.savez(cache / "tiny.npz", x=np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32))
    monkeypatch.setattr(torch_zoo, "ZOO", {"tiny": ("test", never_built), "broken": ("test", broken)})
    monkeypatch.setattr(torch_zoo, "cache_dir", lambda: cache)
    monkeypatch.setattr(torch_zoo, "RESULTS", tmp_path)
    return tmp_path


def test_a_run_times_the_cached_export_and_reports_the_failure_as_a_row(zoo, capsys):
    assert torch_zoo.main(["--only", "tiny,broken", "--rounds", "1"]) == 0
    result = json.loads((zoo / "model_runtime_zoo.json").read_text())
    tiny, failed = result["rows"]
    assert tiny["inputs"] == {"x": [4, 16]} and {"fused", "ort"} <= set(tiny["timing"])
    assert tiny["fused_over_ort"] == tiny["timing"]["fused"]["cpu_ms"] / tiny["timing"]["ort"]["cpu_ms"]
    assert max(tiny["max_rel_diff_from_ort"].values()) < 1e-4
    assert failed["error"] == "export: RuntimeError: no such config field"
    assert result["summary"]["timed"] == 1 and result["summary"]["failed"] == ["broken"]
    assert result["command"] == "python bench/torch_zoo.py --only tiny,broken --rounds 1"
    table = capsys.readouterr().out.splitlines()
    assert table[0] == "| model | family | fl ms 1t | fl/ORT 1t | fl/OV 1t | fl/best 1t | max diff |"
    ratio = f"{tiny['fused_over_ort']:.2f}"
    assert table[2].startswith(f"| tiny | test | {tiny['timing']['fused']['cpu_ms']:.1f} | {ratio} |")
    assert table[3] == "| broken | test | failed: export: RuntimeError: no such config field |  |  |  |  |"
    assert table[5].startswith("1t: 1 thread, CPU time: medians of 1 interleaved rounds")
    assert "1 of 2 timed; geomean fl/ORT" in table[5]


def test_markdown_joins_the_thread_settings_by_model(zoo, capsys, monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")  # main sets it for --threads all; not beyond this test
    assert torch_zoo.main(["--only", "broken", "--threads", "all"]) == 0
    capsys.readouterr()
    assert torch_zoo.main(["--markdown"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("| fl ms all | fl/ORT all | fl/OV all | fl/best all | max diff |")
    assert "1t" not in out[0]  # no one-thread JSON was written
    assert out[2].startswith("| broken | test | failed: export") and out[4].startswith("all: every core, wall time")
    assert torch_zoo.main(["--only", "tiny", "--rounds", "1"]) == 0
    capsys.readouterr()
    assert torch_zoo.main(["--markdown"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert [line.split(" | ")[0] for line in table[2:4]] == ["| tiny", "| broken"]
    assert table[2].split(" | ")[6] == "not run" and table[3].split(" | ")[2] == "not run"


def test_unknown_names_are_one_clear_error(zoo, capsys):
    with pytest.raises(SystemExit) as exc:
        torch_zoo.main(["--only", "resnet51"])
    assert exc.value.code == 2 and "--only: unknown resnet51; known: tiny, broken" in capsys.readouterr().err


def test_batch_norms_are_settled_on_the_inputs_and_left_in_eval_mode():
    import torch

    module = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Dropout(0.5))
    x = torch.randn(1, 3, 8, 8) * 50 + 7  # far from the initial statistics (mean 0, variance 1)
    torch_zoo.settle_batch_norm(torch, module, (x,))
    assert not module.training
    with torch.no_grad():
        y = module(x)
    # the running variance is the unbiased one: 35/36 of 1 over the 36 positions per channel
    assert abs(float(y.mean())) < 1e-4 and abs(float(y.var(unbiased=False)) - 35 / 36) < 1e-3


@pytest.mark.parametrize("installed", [True, False])
def test_torchvision_is_imported_before_any_builder_and_may_be_missing(zoo, monkeypatch, installed):
    # transformers and diffusers import torchvision themselves when it is installed, and that
    # import fails beside a CPU-only torch unless torch_zoo's own import came first
    calls = []

    def import_torchvision():
        calls.append("torchvision")
        if not installed:
            raise ImportError("No module named 'torchvision'")

    def builder():
        calls.append("builder")
        raise RuntimeError("stop here")

    monkeypatch.setattr(torch_zoo, "_import_torchvision", import_torchvision)
    monkeypatch.setitem(torch_zoo.ZOO, "order", ("test", builder))
    row = torch_zoo.bench_one("order", 1, "1", torch_zoo.cache_dir())
    assert calls == ["torchvision", "builder"] and row["error"] == "export: RuntimeError: stop here"
