"""`fusionlang check`: the coverage line, the float32 verdict and `--float-exact`,
`--budget`, and def oracles, as a user sees them."""

from __future__ import annotations

import json

import pytest

from fusionlang.cli import main

FLOATS = """\
import "std/algebra.fuse"

rewrite cancel_add:
    r @ sub(add(x, y), y) where same_shape(r, x) => x

rewrite drop_double_neg:
    neg(neg(x)) => x
"""

WRONG_DEF = """\
def rms(x; epsilon=0.000001) {
    return x / sqrt(reduce_sum(x * x) {axes=[-1], keepdims=1} + epsilon)
}
oracle ([[3.0, 4.0]]) {epsilon=0.0} => [[0.8485281, 1.1313708]]
"""


@pytest.fixture
def floats_file(tmp_path):
    path = tmp_path / "floats.fuse"
    path.write_text(FLOATS)
    return str(path)


def test_each_rewrite_reports_coverage_and_a_float32_verdict(floats_file, capsys):
    assert main(["check", floats_file, "--examples", "10", "--seed", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    head = out.index(f"{floats_file}:3: rewrite cancel_add: proved equal over the reals (and "
                     + out[0].split("(and ")[1])
    assert out[head + 1].startswith("    coverage: ") and ", seed 3" in out[head + 1]
    assert " matched the pattern and guard, " in out[head + 1] and " distinct shapes, " in out[head + 1]
    assert out[head + 2].startswith("    float32: not float-exact: max error ")
    assert any(line.startswith("    float32: float-exact (") for line in out)


def test_float_exact_turns_a_changed_float32_result_into_a_failure(floats_file, capsys):
    assert main(["check", floats_file, "--examples", "10", "--float-exact"]) == 1
    out = capsys.readouterr().out
    assert f"{floats_file}:3: rewrite cancel_add: failed\n    not float-exact: max error " in out
    assert f"{floats_file}:6: rewrite drop_double_neg: proved equal over the reals" in out


def test_json_carries_coverage_and_float32(floats_file, capsys):
    assert main(["--json", "check", floats_file, "--examples", "10", "--rule", "cancel_add"]) == 0
    (check,) = json.loads(capsys.readouterr().out)["reports"][0]["checks"]
    assert check["coverage"]["satisfied"] >= 10 and check["coverage"]["seed"] == 0
    assert check["float32"]["exact"] is False and check["float32"]["error"] > 0


@pytest.mark.parametrize("value, why", [("0", "must be from 1 to 10000 rounds, got '0'"),
                                        ("-1", "must be from 1 to 10000 rounds, got '-1'"),
                                        ("nan", "must be an integer, got 'nan'"),
                                        ("2.5", "must be an integer, got '2.5'")])
def test_a_budget_that_is_not_a_positive_count_of_rounds_exits_2(floats_file, capsys, value, why):
    assert main(["check", floats_file, "--budget", value]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == f"fusionlang: error: argument --budget: the budget {why} " \
                                   "(see fusionlang check --help)"
    assert captured.out == ""


@pytest.mark.parametrize("value", ["-5", "4294967296"])
def test_a_seed_out_of_range_exits_2_in_one_line(floats_file, capsys, value):
    assert main(["check", floats_file, "--seed", value]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == f"fusionlang: error: argument --seed: the seed must be from 0 to 4294967295, " \
                                   f"got {value!r} (see fusionlang check --help)"
    assert captured.out == ""


def test_a_wrong_def_fails_at_the_def(tmp_path, capsys):
    path = tmp_path / "defs.fuse"
    path.write_text(WRONG_DEF)
    assert main(["check", str(path), "--kinds", "def"]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"{path}:1:1: def rms: failed\n    the def differs from the test vector at {path}:4:1: ")


NEVER = """\
import "std/algebra.fuse"

rewrite never: relu(x) where rank(x) > 9 => x
"""


def test_a_rule_with_no_instance_fails_at_its_pattern_unless_allowed(tmp_path, capsys):
    path = tmp_path / "never.fuse"
    path.write_text(NEVER)
    assert main(["check", str(path), "--rule", "never"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{path}:3: rewrite never: failed"
    assert out[1].startswith(f"    {path}:3:16: no drawn instance satisfied the pattern and guard: no match: guard "
                             "rank(x) > 9 failed")
    assert out[1].endswith("nothing of the rule was checked (say 'accepts uncovered' in the rule, or --allow-uncovered)")
    assert main(["check", str(path), "--rule", "never", "--allow-uncovered"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{path}:3: rewrite never: under-covered (0 instances) - {path}:3:16: ")
    assert out[0].endswith("(accepted: --allow-uncovered)")
