"""`--option KEY=VALUE` on fuse, run and explain: strategy options from the command line,
typed as in a strategy block, checked against the strategy (exit 2, one line)."""

from __future__ import annotations

import json

import pytest
from cli_helpers import conv_bn_pool_model

from fusionlang.cli import main


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return conv_bn_pool_model(tmp_path_factory.mktemp("option") / "m.onnx")


def _fuse_json(capsys, model, *flags):
    assert main(["--json", "fuse", model, *flags]) == 0
    return json.loads(capsys.readouterr().out)


def test_max_ops_from_the_command_line_caps_the_groups(capsys, model):
    default = _fuse_json(capsys, model)
    capped = _fuse_json(capsys, model, "--option", "max_ops=1")
    assert max(len(g["nodes"]) for g in default["groups"]) > 1
    assert max(len(g["nodes"]) for g in capped["groups"]) == 1
    assert capped["kernels_after"] > default["kernels_after"]


def test_options_repeat_and_take_strings(capsys, model):
    plan = _fuse_json(capsys, model, "--option", "max_ops=1", "--option", "cost=cpu", "--option", "max_ops=64")
    # a later KEY wins; the string option reaches the cost model
    assert plan["kernels_after"] == _fuse_json(capsys, model)["kernels_after"]
    assert plan["device"] == "cpu"


def test_explain_judges_with_the_command_line_options(capsys, model):
    assert main(["explain", model, "--node", "relu", "--option", "max_ops=1"]) == 0
    out = capsys.readouterr().out
    assert "max_ops = 1" in out


def test_run_takes_options(capsys, model):
    status = main(["--json", "run", model, "--random-inputs", "0", "--check", "--option", "max_ops=1"])
    assert status == 0, capsys.readouterr().err


@pytest.mark.parametrize("flag,message", [
    ("max_opz=2", "fusionlang: error: unknown option 'max_opz' for strategy 'apollo'; did you mean 'max_ops'?"),
    ("max_ops=many", "fusionlang: error: option 'max_ops' of strategy 'apollo' expects an integer, got 'many'"),
    ("cost=h10", "fusionlang: error: unknown cost device 'h10'; did you mean 'h100'?"),
    ("=2", "fusionlang: error: argument --option: expected KEY=VALUE (e.g. max_ops=32), got '=2' "
           "(see fusionlang fuse --help)"),
    ("max_ops", "fusionlang: error: argument --option: expected KEY=VALUE (e.g. max_ops=32), got 'max_ops' "
                "(see fusionlang fuse --help)"),
    ("max_ops=1e999", "fusionlang: error: argument --option: option max_ops: '1e999' is not a finite number "
                      "(see fusionlang fuse --help)"),
    ("max_ops=-1", "fusionlang: error: option 'max_ops' of strategy 'apollo' must be at least 1, got -1"),
    ("max_args=0", "fusionlang: error: option 'max_args' of strategy 'apollo' must be at least 1, got 0"),
    ("horizontal_max_groups=0",
     "fusionlang: error: option 'horizontal_max_groups' of strategy 'apollo' must be at least 1, got 0"),
])
def test_bad_options_are_one_line_errors(capsys, model, flag, message):
    assert main(["fuse", model, "--option", flag]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [message]


def test_explain_names_the_option_as_the_source_of_a_limit(capsys, model, tmp_path):
    # no folding, so conv+bn and relu+tanh are two groups of 2 that a cap below 4 keeps apart
    rules = tmp_path / "capped.fuse"
    rules.write_text('import "std/ops.fuse"\nfuse elemwise -> elemwise : elemwise\n'
                     'fuse complex -> elemwise|broadcast : complex\nstrategy apollo { max_ops = 2 }\n')
    assert main(["explain", model, "--node", "relu", "--rules", str(rules)]) == 0
    assert f"max_ops = 2 ({rules}:4:19: strategy apollo)" in capsys.readouterr().out
    assert main(["explain", model, "--node", "relu", "--rules", str(rules), "--option", "max_ops=3"]) == 0
    assert "max_ops = 3 (set by an option)" in capsys.readouterr().out


@pytest.mark.parametrize("option", ["max_ops=0", "max_ops=-1"])
def test_dp_refuses_a_max_ops_below_one(capsys, model, option):
    assert main(["fuse", model, "--strategy", "dp", "--option", option]) == 2
    assert "must be at least 1" in capsys.readouterr().err


def test_lint_refuses_a_max_ops_below_one_with_its_location(capsys, tmp_path):
    rules = tmp_path / "dp0.fuse"
    rules.write_text('import "apollo.fuse"\nstrategy dp { max_ops = 0 }\n')
    assert main(["lint", str(rules)]) == 2
    assert "dp0.fuse:2:15: error: option 'max_ops' of strategy 'dp' must be at least 1, got 0" in capsys.readouterr().err


@pytest.mark.parametrize("max_args", [1, 2])
def test_dp_with_fewer_arguments_than_an_op_takes_keeps_it_alone(capsys, model, max_args):
    """A node alone is a group whatever its arguments (max_args = 1 failed with a KeyError, exit 3)."""
    assert main(["run", model, "--strategy", "dp", "--option", f"max_args={max_args}", "--random-inputs", "0",
                 "--check"]) == 0
