"""The rewrite order as data through the CLI: `fuse --show-rewrites` lists the rules in the
order they first fired with their priority, and `explain --rule R --node N` answers as the
run went (never "matches" for a node another rule rewrote first)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fusionlang.cli import main

# a T5-style norm weight of ones in front of a projection
RULES = """
import "apollo.fuse"
rewrite fold_norm_weight_into_projection priority {priority}:
    matmul(mul(x, g), w)
    where const(g, w) and rank(g) == 1 and rank(w) == 2
    => matmul(x, reshape(g) {{shape=[-1, 1]}} * w)
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    inits = [numpy_helper.from_array(np.ones(8, np.float32), "g"),
             numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 3)).astype(np.float32), "w")]
    nodes = [helper.make_node("Mul", ["x", "g"], ["scaled"], name="scaled"),
             helper.make_node("MatMul", ["scaled", "w"], ["proj"], name="proj"),
             helper.make_node("Relu", ["proj"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "t5_norm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])], inits)
    path = tmp_path_factory.mktemp("order") / "t5_norm.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def rules_file(tmp_path, priority: int) -> str:
    path = tmp_path / f"t5_{priority}.fuse"
    path.write_text(RULES.format(priority=priority))
    return str(path)


def cli(capsys, *args) -> tuple[int, list[str]]:
    status = main(list(args))
    return status, capsys.readouterr().out.splitlines()


def test_fuse_shows_the_rules_in_firing_order_with_their_priority(capsys, model, tmp_path):
    rules = rules_file(tmp_path, 10)
    status, lines = cli(capsys, "fuse", model, "--rules", rules, "--show-rewrites")
    assert status == 0
    start = lines.index("  rewrite order (higher priorities run as earlier phases):")
    assert lines[start + 1] == f"    1. fold_norm_weight_into_projection ({rules}:3, priority 10) x1 from step 1"


def test_explain_names_the_rule_that_rewrote_the_node_first(capsys, model, tmp_path):
    rules = rules_file(tmp_path, 0)
    status, lines = cli(capsys, "explain", model, "--rules", rules, "--rule", "fold_norm_weight_into_projection",
                        "--node", "proj")
    assert status == 0
    assert len(lines) == 1 and "matches node 'proj' in the model, but mul_one (simplify.fuse:" in lines[0]
    assert "priority 0) rewrote node 'scaled' first, at step 1" in lines[0]


def test_explain_says_where_the_prioritised_rule_fired(capsys, model, tmp_path):
    rules = rules_file(tmp_path, 10)
    status, lines = cli(capsys, "explain", model, "--rules", rules, "--rule", "fold_norm_weight_into_projection",
                        "--node", "proj")
    assert status == 0
    assert lines == [f"{rules}:3:1: rule 'fold_norm_weight_into_projection' (priority 10) rewrote node 'proj' at "
                     "step 1"]


def test_explain_never_says_matches_for_a_node_the_run_removed(capsys, model, tmp_path):
    # the recognizer took `scaled` into its match; the model alone would say mul_one matches it
    rules = rules_file(tmp_path, 10)
    status, lines = cli(capsys, "explain", model, "--rules", rules, "--rule", "mul_one", "--node", "scaled")
    assert status == 0
    assert len(lines) == 1 and "rule 'mul_one' (priority 0) matches node 'scaled' in the model, but " \
                                "fold_norm_weight_into_projection" in lines[0]
    assert "priority 10) rewrote node 'proj' first, at step 1" in lines[0]
