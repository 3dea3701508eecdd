"""bench/torch_runtime.py on a small model: the gate, the JSON and the README table."""

import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import torch_runtime  # noqa: E402


def test_a_run_gates_times_and_writes_the_json_the_table_reads(tmp_path, capsys):
    output = tmp_path / "torch_runtime.json"
    assert torch_runtime.main(["--size", "test", "--only", "llama", "--competitors", "eager,fusionlang",
                               "--rounds", "1", "--output", str(output)]) == 0
    run = json.loads(output.read_text())["runs"]["1"]
    assert [(r["model"], r["step"]) for r in run["rows"]] == [("llama", "inference"), ("llama", "training")]
    for row in run["rows"]:
        assert set(row["timing"]) == {"eager", "fusionlang"}  # both passed the gate
        assert row["notes"]["fusionlang_fallbacks"] == [] and row["notes"]["fusionlang_pieces"] >= 1
        assert row["fl_over_eager"] == row["timing"]["fusionlang"]["cpu_ms"] / row["timing"]["eager"]["cpu_ms"]
    capsys.readouterr()
    assert torch_runtime.main(["--markdown", "--output", str(output)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("| threads | model | step |") and len(table) == 4
    assert table[3].startswith("| 1 | llama | training |")


def test_the_gate_refuses_a_gradient_off_by_more_than_the_tolerance():
    want = [torch.tensor(1.0), torch.tensor([1.0, 2.0]), torch.tensor([4.0])]
    assert torch_runtime.gate([t.clone() for t in want], want) is None
    off = [want[0], torch.tensor([1.0, 2.01]), want[2]]  # 5e-3 relative
    assert torch_runtime.gate(off, want) == "value 1: largest difference 0.01"
    assert torch_runtime.gate([want[0], None, want[2]], want) == "value 1: a gradient is missing"


def test_unknown_names_are_one_clear_error(capsys):
    with pytest.raises(SystemExit) as exc:
        torch_runtime.main(["--only", "resnet51"])
    assert exc.value.code == 2 and "--only: unknown resnet51; known: resnet18" in capsys.readouterr().err
