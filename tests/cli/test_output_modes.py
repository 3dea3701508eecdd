"""--json, --quiet and --no-color on every command; progress only on a terminal."""

from __future__ import annotations

import json
import re

import pytest
from cli_helpers import conv_bn_pool_model, run_cli, run_on_terminal

from fusionlang.cli import COMMANDS, build_parser, main

ANSI = re.compile(r"\x1b\[")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return conv_bn_pool_model(tmp_path_factory.mktemp("modes") / "m.onnx")


@pytest.fixture(scope="module")
def rules(tmp_path_factory):
    path = tmp_path_factory.mktemp("modes") / "ok.fuse"
    path.write_text("rewrite drop: identity(x) => x\n")
    return str(path)


def argv_for(command, model, rules):
    return {
        "fuse": ["fuse", model],
        "run": ["run", model, "--random-inputs", "0", "--check"],
        "explain": ["explain", model, "--node", "pool"],
        "lint": ["lint", rules],
        "demo": ["demo", "--repeat", "1"],
    }[command]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_takes_the_output_flags(capsys, command):
    assert main([command, "--help"]) == 0
    text = capsys.readouterr().out
    assert "--quiet" in text and "--no-color" in text and "--json" in text


def test_commands():
    assert set(COMMANDS) >= {"demo", "fuse", "run", "explain", "lint"}
    assert build_parser().parse_args(["--json", "lint", "a.fuse"]).json is True


@pytest.mark.parametrize("command", ["fuse", "run", "explain", "lint", "demo"])
@pytest.mark.parametrize("where", ["before", "after"])
def test_json_everywhere(capsys, model, rules, command, where):
    argv = argv_for(command, model, rules)
    argv = ["--json", *argv] if where == "before" else [*argv, "--json"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)  # exactly one JSON document, nothing else
    assert isinstance(data, dict) and data
    assert not ANSI.search(out + err)


@pytest.mark.parametrize("command", ["fuse", "run", "explain", "lint", "demo"])
def test_quiet_prints_nothing(capsys, model, rules, command):
    assert main([*argv_for(command, model, rules), "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and err == ""


def test_fuse_json_file_and_stdout(capsys, model, tmp_path):
    path = tmp_path / "plan.json"
    assert main(["fuse", model, "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("plan for 'near_miss': strategy apollo, rules apollo") and f"wrote {path}" in out
    written = json.loads(path.read_text())
    assert written["graph"] == "near_miss" and written["kernels_after"] == 2
    timings = ("rewrite_seconds", "partition_seconds")  # the fields that differ between runs
    for key in timings:
        del written[key]
    for argv in (["fuse", model, "--json", "-"], ["fuse", model, "--json"], ["--json", "fuse", model]):
        assert main(argv) == 0
        printed = json.loads(capsys.readouterr().out)
        for key in timings:
            del printed[key]
        assert printed == written


def test_lint_json_lists_diagnostics(capsys, tmp_path):
    bad = tmp_path / "bad.fuse"
    bad.write_text("rewrite drop: identiti(x) => x\n")
    assert main(["lint", str(bad), "--json"]) == 2
    data = json.loads(capsys.readouterr().out)
    assert data["errors"] == 1
    (diag,) = data["diagnostics"]
    assert (diag["file"], diag["line"], diag["col"], diag["severity"]) == (str(bad), 1, 15, "error")
    assert diag["message"] == "unknown op 'identiti'"


def test_off_a_terminal_no_progress_and_no_color(model):
    result = run_cli("fuse", model)
    assert result.returncode == 0
    assert result.stderr == ""
    assert not ANSI.search(result.stdout)
    assert result.stdout.startswith("plan for 'near_miss'")


def test_errors_are_one_plain_line_off_a_terminal(capsys):
    assert main(["fuse", "missing.onnx"]) == 2
    assert capsys.readouterr() == ("", "fusionlang: error: cannot read model 'missing.onnx': no such file or directory\n")


def test_progress_and_color_on_a_terminal(model):
    status, shown = run_on_terminal("fuse", model)
    assert status == 0
    for stage in ("import", "load rules", "rewrite + partition"):
        assert re.search(rf"✓ (\x1b\[0m)?{re.escape(stage)}", shown), stage
    assert "plan for 'near_miss'" in shown
    status, shown = run_on_terminal("fuse", "missing.onnx")
    assert status == 2 and "\x1b[1;31merror:\x1b[0m cannot read model 'missing.onnx'" in shown


@pytest.mark.parametrize("flag", ["--quiet", "--json", "--no-color"])
def test_terminal_output_modes(rules, flag):
    status, shown = run_on_terminal(flag, "lint", rules)
    assert status == 0
    if flag == "--no-color":
        assert "✓ lint" in shown and not re.search(r"\x1b\[[0-9;]*m", shown)
        assert "1 file(s): 0 error(s), 0 warning(s)" in shown
    else:
        assert "✓" not in shown and "━" not in shown
    if flag == "--json":
        assert json.loads(shown.replace("\r\n", "\n"))["errors"] == 0
    if flag == "--quiet":
        assert shown == ""


def test_closed_stdout_is_not_an_internal_error(rules):
    # `fusionlang --json lint x.fuse | head -0`: the reader is gone before anything is written
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "fusionlang", "--json", "lint", rules], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert err == ""
