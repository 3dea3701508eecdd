"""`fusionlang explain`: on planted near-misses it names the refusing rule or limit and
its line; unknown nodes are a one-line error."""

from __future__ import annotations

import json
import re

import pytest
from cli_helpers import conv_bn_pool_model

from fusionlang.cli import main

SMALL_RULES = """\
import "std/ops.fuse"

fuse elemwise -> elemwise : elemwise
fuse complex -> elemwise|broadcast : complex

strategy apollo { max_ops = 2 }
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return conv_bn_pool_model(tmp_path_factory.mktemp("explain") / "near_miss.onnx")


def explain(capsys, *args):
    status = main(["explain", *map(str, args)])
    out, err = capsys.readouterr()
    return status, out, err


def test_no_fuse_entry_for_complex_to_reduce(capsys, model):
    status, out, err = explain(capsys, model, "--node", "pool")
    assert status == 0, err
    lines = out.splitlines()
    assert re.fullmatch(r"node pool \(max_pool\) is reduce by std/ops\.fuse:\d+:1: class max_pool : reduce",
                        lines[0])
    assert "  group 1 (reduce, 1 ops), alone" in lines
    assert "    <- tanh (tanh, group 0): no fuse entry for complex -> reduce in rules 'apollo_patterns'" in lines


def test_size_limit_of_a_custom_strategy_names_its_line(capsys, model, tmp_path):
    rules = tmp_path / "small.fuse"
    rules.write_text(SMALL_RULES)
    status, out, err = explain(capsys, model, "--node", "relu", "--rules", rules)
    assert status == 0, err
    refusal = [line for line in out.splitlines() if line.startswith("    <- bn ")]
    # rule files are named as the user named them
    assert refusal == [f"    <- bn (batch_norm, group 0): {rules}:4:1: fuse complex -> broadcast|elemwise : complex "
                       f"applies, but max_ops = 2 ({rules}:6:19: strategy apollo) (2 + 2 ops)"]
    assert f"    formed by {rules}:3:1: fuse elemwise -> elemwise : elemwise" in out.splitlines()


def test_rewritten_node_names_the_rewrite_and_its_line(capsys, model):
    status, out, err = explain(capsys, model, "--node", "conv")
    assert status == 0, err
    lines = out.splitlines()
    assert "  'conv' was rewritten; it now lives in: bn" in lines
    assert re.search(r"^  rewrites: fold_conv_bn_no_bias \(simplify\.fuse:\d+\)$", out, re.M)
    assert re.search(r"^    formed by apollo\.fuse:\d+:1: fuse complex -> broadcast\|elemwise : complex$", out, re.M)


def test_unknown_node_is_a_one_line_error(capsys, model):
    status, out, err = explain(capsys, model, "--node", "no_such_node")
    assert status == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("fusionlang: error: no node named 'no_such_node'")


@pytest.mark.parametrize("where", ["before", "after"])
def test_json(capsys, model, where):
    argv = ["--json", "explain", model, "--node", "pool"] if where == "before" else \
        ["explain", model, "--node", "pool", "--json"]
    assert main([str(a) for a in argv]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["node"] == "pool" and data["category"] == "reduce" and data["group_members"] == ["pool"]
    assert data["refusals"] == [{"neighbour": "tanh", "neighbour_op": "tanh", "direction": "producer", "group": 0,
                                 "reason": "no fuse entry for complex -> reduce in rules 'apollo_patterns'"}]
    assert data["lines"][0].startswith("node pool (max_pool) is reduce by ")


def test_strategy_flag_is_used(capsys, model):
    status, out, err = explain(capsys, model, "--node", "tanh", "--strategy", "dp", "--json")
    assert status == 0, err
    data = json.loads(out)
    assert data["strategy"] == "dp"
    # the dp partitioner groups relu, tanh and pool (apollo's greedy pass puts relu with the conv)
    assert data["group_members"] == ["relu", "tanh", "pool"]
