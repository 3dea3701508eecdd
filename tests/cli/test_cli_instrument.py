"""--log LEVEL, --timings and FUSIONLANG_LOG on the command line (fusionlang.instrument)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from cli_helpers import conv_bn_pool_model

from fusionlang.cli import COMMANDS, main


pytestmark = pytest.mark.usefixtures("restore_fusionlang_logging")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return conv_bn_pool_model(tmp_path_factory.mktemp("instrument") / "m.onnx")


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_takes_log_and_timings(capsys, command):
    assert main([command, "--help"]) == 0
    text = capsys.readouterr().out
    assert "--log" in text and "--timings" in text


@pytest.mark.parametrize("where", ["before", "after"])
def test_timings_table_after_the_command(capsys, model, where):
    argv = ["run", model, "--random-inputs", "0"]
    assert main(["--timings", *argv] if where == "before" else [*argv, "--timings"]) == 0
    err = capsys.readouterr().err.splitlines()
    header = next(i for i, line in enumerate(err) if line.split() == ["stage", "pass", "calls", "wall", "cpu"])
    rows = [line.split()[:2] for line in err[header + 1:]]
    for stage, name in (["import", "read"], ["rewrite", "simplify"], ["partition", "strategy"],
                        ["codegen", "lower"], ["compile", "C"], ["run", "run"]):
        assert [stage, name] in rows, (stage, name)


def test_timings_as_one_json_line_under_json(capsys, model):
    assert main(["--json", "--timings", "fuse", model]) == 0
    out, err = capsys.readouterr()
    json.loads(out)  # stdout keeps its one document
    (line,) = err.splitlines()
    rows = json.loads(line)["timings"]
    assert {"stage", "pass", "calls", "seconds", "cpu_seconds"} == set(rows[0])
    assert any(r["pass"] == "strategy apollo" and r["calls"] >= 1 for r in rows)


def test_timings_of_a_failing_command_still_print(capsys, tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    assert main(["fuse", str(bad), "--timings"]) == 2
    err = capsys.readouterr().err
    assert "fusionlang: error: cannot read model" in err and "import  read model  " in err


def test_timings_of_a_command_without_stages(capsys, tmp_path):
    assert main(["cache", "info", "--timings"]) == 0
    assert "no pass was timed" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--log", "info", "fuse"], ["--log=info", "fuse"], ["fuse", "--log", "info"]])
def test_log_info_prints_each_stage_decision(capsys, model, argv):
    assert main([*argv, model]) == 0
    err = capsys.readouterr().err
    assert "fusionlang.import: " in err and "fusionlang.partition: apollo: " in err
    assert "fusionlang.rewrite: simplify: " not in err  # pass times are DEBUG


def test_bad_log_level_is_one_line_exit_2(capsys, model):
    assert main(["fuse", model, "--log", "loud"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("fusionlang: error: argument --log: invalid choice: 'loud'")


def run_with_environment(value, *argv):
    env = {**os.environ, "FUSIONLANG_LOG": value}
    return subprocess.run([sys.executable, "-m", "fusionlang", *argv], capture_output=True, text=True, env=env,
                          timeout=300)


def test_environment_turns_logging_on(model):
    done = run_with_environment("debug", "fuse", model, "--quiet")
    assert done.returncode == 0 and done.stdout == ""
    assert "fusionlang.rewrite: simplify: " in done.stderr and "fusionlang.partition: apollo: " in done.stderr


def test_bad_environment_level_is_one_line_exit_2(model):
    done = run_with_environment("loud", "fuse", model)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "fusionlang: error: FUSIONLANG_LOG='loud': expected one of debug, info, warning, error, off"]
