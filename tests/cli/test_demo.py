"""`fusionlang demo`: the embedded transformer block fused, compiled, run and checked."""

from __future__ import annotations

import json

import pytest

from fusionlang.cli import main


@pytest.fixture(scope="module")
def demo_json():
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["demo", "--json", "--repeat", "2"])
    return status, json.loads(out.getvalue())


def test_demo_fuses_and_matches_the_reference(demo_json):
    status, r = demo_json
    assert status == 0
    assert r["check"] == "ok"
    assert r["target"] in ("c", "cuda")
    assert r["kernels_after"] < r["kernels_before"]
    assert r["bytes_after"] < r["bytes_before"]
    assert 0 <= r["max_abs_error"] <= 1e-3
    assert r["ops_before"] == 34  # the embedded model's node count
    assert sum(len(g["nodes"]) for g in r["groups"]) == r["ops_after_rewriting"]
    assert sum(1 for g in r["groups"] if g["kind"] == "kernel") == r["kernels_after"]
    stages = ("import", "rewrite", "partition", "codegen", "compile", "run")
    assert all(r[f"{stage}_seconds"] >= 0 for stage in stages) and r["run_seconds"] > 0 and r["reference_seconds"] > 0
    assert set(r["timings"]) >= {"import", "rewrite + partition", "reference interpreter"}


def test_demo_summary(capsys):
    assert main(["--no-color", "demo", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("fusionlang demo  transformer block · rules apollo · strategy apollo · target ")
    assert any(line.split()[:1] == ["kernels"] for line in lines)
    assert any(line.startswith("global memory") for line in lines)
    stage_line = next(line for line in lines if line.startswith("time      "))
    assert [part.split()[0] for part in stage_line[10:].split(" · ")] == \
        ["import", "rewrite", "partition", "codegen", "compile", "run"]
    # the interpreter is the oracle: its time is shown, never as a speed-up
    assert any(line.startswith("oracle    reference interpreter ") for line in lines)
    assert "faster" not in out
    assert any(line.startswith("max error") and "matches the reference" in line for line in lines)
    assert any(line.startswith("groups (") for line in lines)
    assert any("apollo.fuse:" in line and "stitched" in line for line in lines)


def test_demo_exits_1_on_mismatch(capsys, demo_json):
    # with no tolerance at all, the fused program's rounding differs from the interpreter's
    assert demo_json[1]["max_abs_error"] > 0
    assert main(["demo", "--repeat", "1", "--rtol", "0", "--atol", "0", "--json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["check"] != "ok"
    assert err.startswith("fusionlang: mismatch: y: max abs error ")


def test_demo_report(tmp_path, capsys):
    path = tmp_path / "demo.html"
    assert main(["demo", "--repeat", "1", "--report", str(path), "--quiet"]) == 0
    assert capsys.readouterr().out == ""
    text = path.read_text()
    assert "fusionlang demo: transformer block" in text and "Loop nests after loop fusion" in text
