"""`fusionlang explain MODEL --rule NAME`: where a rewrite fired, or why it did not (the
failing guard with its column); an unknown rule is a one-line error with a did-you-mean."""

from __future__ import annotations

import json

import pytest
from cli_helpers import conv_bn_pool_model

from fusionlang.cli import main
from fusionlang.lang import load_rules

GUARDED = """\
import "std/ops.fuse"

rewrite tanh_of_relu:
    tanh(relu(x)) where rank(x) == 2
    => relu(x)
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return conv_bn_pool_model(tmp_path_factory.mktemp("explain_rule") / "near_miss.onnx")


def explain(capsys, *args):
    status = main(["explain", *map(str, args)])
    out, err = capsys.readouterr()
    return status, out, err


def test_where_a_rule_fired(capsys, model):
    status, out, err = explain(capsys, model, "--rule", "fold_conv_bn_no_bias")
    assert status == 0, err
    where = load_rules("simplify").rewrite("fold_conv_bn_no_bias").where
    assert out.splitlines() == [f"rewrite fold_conv_bn_no_bias ({where}) fired 1 time(s):", "  at bn"]


def test_why_a_rule_did_not_fire_names_the_guard_and_its_column(capsys, model, tmp_path):
    rules = tmp_path / "guarded.fuse"
    rules.write_text(GUARDED)
    status, out, err = explain(capsys, model, "--rules", rules, "--rule", "tanh_of_relu")
    assert status == 0, err
    assert out.splitlines() == [
        f"rewrite tanh_of_relu ({rules}:3) did not fire:",
        "  at 1 'tanh' node(s):",
        f"    tanh: {rules}:4:25: guard rank(x) == 2 failed: rank(x) is 4",
    ]


def test_at_one_node(capsys, model, tmp_path):
    rules = tmp_path / "guarded.fuse"
    rules.write_text(GUARDED)
    status, out, err = explain(capsys, model, "--rules", rules, "--rule", "tanh_of_relu", "--node", "tanh")
    assert status == 0, err
    assert out.splitlines() == [f"{rules}:4:25: guard rank(x) == 2 failed: rank(x) is 4"]


def test_json(capsys, model):
    status, out, err = explain(capsys, model, "--rule", "fold_conv_bn_no_bias", "--json")
    assert status == 0, err
    data = json.loads(out)
    assert data["fired_at"] == ["bn"] and data["lines"][1] == "  at bn"


@pytest.mark.parametrize("args, message", [
    (["--rule", "fold_conv_bn_nobias"],
     "fusionlang: error: rule set 'apollo_patterns' has no rewrite named 'fold_conv_bn_nobias'; did you mean "
     "'fold_conv_bn_no_bias' or 'fold_conv_shift_no_bias' or 'fold_conv_scale_no_bias'?"),
    (["--rule", "fold_conv_bn", "--node", "nope"], "fusionlang: error: no node 'nope' in the model or in the "
                                                   "rewritten graph"),
    ([], "fusionlang: error: explain needs --node NAME (a node's group) or --rule NAME (a rewrite)"),
])
def test_bad_requests_are_one_line_errors(capsys, model, args, message):
    status, out, err = explain(capsys, model, *args)
    assert status == 2
    assert err.strip() == message
