"""Numeric flags are checked where they are read, and every flag error is one line, exit 2."""

from __future__ import annotations

import json

import pytest
from cli_helpers import conv_bn_pool_model, one_line_error

from fusionlang.cli import main
from fusionlang.cli.flags import MAX_REPEAT, MAX_SEED, MAX_THREADS


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return conv_bn_pool_model(tmp_path_factory.mktemp("flags") / "m.onnx")


@pytest.mark.parametrize("value, reason", [
    ("-5", f"the seed must be from 0 to {MAX_SEED}, got '-5'"),
    (str(MAX_SEED + 1), f"the seed must be from 0 to {MAX_SEED}, got '{MAX_SEED + 1}'"),
    ("abc", "the seed must be an integer, got 'abc'"),
    ("1.5", "the seed must be an integer, got '1.5'"),
    ("9" * 5000, f"the seed must be an integer, got {'9' * 40!r}... (5000 characters)"),
])
def test_run_seed(capsys, model, value, reason):
    assert one_line_error(capsys, ["run", model, "--random-inputs", value]) == (
        f"fusionlang: error: argument --random-inputs: {reason} (see fusionlang run --help)")


@pytest.mark.parametrize("value, reason", [
    ("0", f"the thread count must be from 1 to {MAX_THREADS}, got '0'"),
    ("-2", f"the thread count must be from 1 to {MAX_THREADS}, got '-2'"),
    ("all", "the thread count must be an integer, got 'all'"),
])
def test_run_threads(capsys, model, value, reason):
    assert one_line_error(capsys, ["run", model, "--random-inputs", "0", "--threads", value]) == (
        f"fusionlang: error: argument --threads: {reason} (see fusionlang run --help)")


def test_run_precision_is_one_of_two(capsys, model):
    line = one_line_error(capsys, ["run", model, "--random-inputs", "0", "--target", "cuda", "--precision", "fp16"])
    assert line.startswith("fusionlang: error: argument --precision: invalid choice: 'fp16' (choose from ")
    assert "fp32" in line and "tf32" in line and line.endswith("(see fusionlang run --help)")


def test_run_on_two_threads_checks_against_the_reference(capsys, model):
    assert main(["run", model, "--random-inputs", "0", "--threads", "2", "--check"]) == 0
    assert "ok" in capsys.readouterr().out


def test_run_profile_shows_where_the_time_goes(capsys, model):
    assert main(["run", model, "--random-inputs", "0", "--profile", "3", "--check"]) == 0
    out = capsys.readouterr().out
    assert "kernel time, mean of 3 runs:" in out and "check against the reference interpreter: ok" in out
    assert "GEMM m=4 n=64 k=27" in out and "relu relu, tanh tanh" in out  # the problem and "op node" of each kernel
    assert main(["--json", "run", model, "--random-inputs", "0", "--profile", "2"]) == 0
    rows = json.loads(capsys.readouterr().out)["profile"]
    assert rows and sum(r["share"] for r in rows) == pytest.approx(1.0) and all(r["seconds"] > 0 for r in rows)


@pytest.mark.parametrize("argv, message", [
    (["--profile", "0"], f"argument --profile: the repeat count must be from 1 to {MAX_REPEAT}, got '0' "
                         "(see fusionlang run --help)"),
    (["--profile", "2", "--target", "reference"], "--profile times compiled C kernels: use it with --target c "
                                                  "(not reference)"),
])
def test_run_profile_errors(capsys, model, argv, message):
    assert one_line_error(capsys, ["run", model, "--random-inputs", "0", *argv]) == f"fusionlang: error: {message}"


@pytest.mark.parametrize("flag", ["--rtol", "--atol"])
@pytest.mark.parametrize("value, reason", [
    ("-1", "the tolerance must be a finite number >= 0, got '-1'"),
    ("nan", "the tolerance must be a finite number >= 0, got 'nan'"),
    ("inf", "the tolerance must be a finite number >= 0, got 'inf'"),
    ("1e400", "the tolerance must be a finite number >= 0, got '1e400'"),
    ("tight", "the tolerance must be a number, got 'tight'"),
])
@pytest.mark.parametrize("command", ["run", "demo"])
def test_tolerances(capsys, model, command, flag, value, reason):
    argv = ["run", model, "--random-inputs", "0", "--check"] if command == "run" else ["demo"]
    assert one_line_error(capsys, [*argv, flag, value]) == (
        f"fusionlang: error: argument {flag}: {reason} (see fusionlang {command} --help)")


@pytest.mark.parametrize("flag, value, reason", [
    ("--seed", "-1", f"the seed must be from 0 to {MAX_SEED}, got '-1'"),
    ("--repeat", "0", f"the repeat count must be from 1 to {MAX_REPEAT}, got '0'"),
    ("--repeat", str(MAX_REPEAT + 1), f"the repeat count must be from 1 to {MAX_REPEAT}, got '{MAX_REPEAT + 1}'"),
])
def test_demo_counts(capsys, flag, value, reason):
    assert one_line_error(capsys, ["demo", flag, value]) == (
        f"fusionlang: error: argument {flag}: {reason} (see fusionlang demo --help)")


def test_the_edges_of_the_ranges_are_accepted(capsys, model):
    assert main(["run", model, "--random-inputs", str(MAX_SEED), "--rtol", "0", "--atol", "0", "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("argv, message", [
    (["--bogus"], "unrecognized arguments: --bogus (see fusionlang --help)"),
    (["run"], "the following arguments are required: model (see fusionlang run --help)"),
    (["run", "m.onnx", "--target", "gpu"],
     "argument --target: invalid choice: 'gpu' (choose from 'c', 'cuda', 'reference') (see fusionlang run --help)"),
    (["nosuch"], "argument COMMAND: invalid choice: 'nosuch' (choose from 'demo', 'fuse', 'run', 'compile', 'explain', "
                 "'lint', 'check', 'campaign', 'sweep', 'cache') (see fusionlang --help)"),
    (["run", "m.onnx", "\x1b[31mred\r"], "unrecognized arguments: \\x1b[31mred\\r (see fusionlang --help)"),
    (["run", "m.onnx", "--two\nlines"], "unrecognized arguments: --two\\nlines (see fusionlang --help)"),
])
def test_argparse_errors_are_one_line(capsys, argv, message):
    assert one_line_error(capsys, argv) == f"fusionlang: error: {message}"


@pytest.mark.parametrize("shape, reason", [
    ("x=" + "9" * 5000, "a dimension is larger than 9223372036854775807"),
    ("x=1x٣", "expected NAME=DIMxDIM..., e.g. x=1x3x224x224"),
])
def test_input_shape_dimensions(capsys, model, shape, reason):
    assert one_line_error(capsys, ["fuse", model, "--input-shape", shape]) == (
        f"fusionlang: error: --input-shape {shape!r}: {reason}")


def test_help_is_exit_0(capsys):
    assert main(["run", "--help"]) == 0
    assert "--random-inputs SEED" in capsys.readouterr().out
