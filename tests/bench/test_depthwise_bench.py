"""bench/depthwise.py measures what it says: each block is one fusionlang kernel (the
depthwise template with the normalisation and the clip folded in) that agrees with
onnxruntime, and its FLOP count is the taps'."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import depthwise  # noqa: E402


def test_a_block_is_one_depthwise_kernel_that_agrees_with_onnxruntime():
    row = depthwise.bench("mnv2_14_c576_k3s2", 1, rounds=1)
    assert row["strategies"] == ["gemm template"]  # the template group; its kind is depthwise
    assert row["max_abs_diff"] < 1e-4
    assert row["flops"] == 2 * 576 * 7 * 7 * 9
    assert row["fl_over_ort"] > 0


def test_its_table_reports_every_shape_at_each_batch(tmp_path, capsys):
    out = tmp_path / "depthwise.json"
    assert depthwise.main(["--rounds", "1", "--only", "mnv2_7_c960_k3s1", "--batches", "1,2", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines[1:3]] == [["mnv2_7_c960_k3s1", "1"], ["mnv2_7_c960_k3s1", "2"]]
    assert '"load_average_start"' in out.read_text()
