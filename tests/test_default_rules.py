"""The rule set fuse() and compile_model() use when none is named: apollo_patterns for the
C target under the apollo strategy (attention blocks become one kernel), apollo elsewhere."""

from __future__ import annotations

import pytest

import fusionlang
from fusionlang.api import default_rules
from fusionlang.cli import main
from fusionlang.ops import GraphBuilder


def biased_attention():
    """softmax(Q K^T + bias) V with K^T a tensor: one of apollo_patterns' entries."""
    b = GraphBuilder("biased_attention")
    x = b.op("add", b.op("matmul", b.input("q", (2, 3, 9, 8)), b.input("kt", (2, 3, 8, 9))), b.input("bias", (3, 9, 9)))
    b.output(b.op("matmul", b.op("softmax", x, axis=-1), b.input("v", (2, 3, 9, 8))))
    return b.build()


def test_the_c_target_defaults_to_apollo_patterns_and_the_others_to_apollo():
    assert default_rules("c") == "apollo_patterns" and default_rules("c", "apollo") == "apollo_patterns"
    assert default_rules("cuda") == "apollo" and default_rules("c", "dp") == "apollo"


@pytest.mark.parametrize(("target", "strategy", "rules"),
                         [("c", None, "apollo_patterns"), ("cuda", None, "apollo"), ("c", "dp", "apollo")])
def test_fuse_without_rules_uses_the_targets_default(target, strategy, rules):
    graph = biased_attention()
    plan = fusionlang.fuse(graph, strategy=strategy, target=target)
    assert plan.rules == rules
    pattern_groups = [g for g in plan.groups if any("fuse pattern" in r for r in g.rules)]
    assert len(pattern_groups) == (1 if rules == "apollo_patterns" else 0)


def test_the_cli_fuses_with_the_c_default_and_says_so(capsys, tmp_path):
    import onnx
    from onnx import helper

    f = onnx.TensorProto.FLOAT
    nodes = [helper.make_node("MatMul", ["q", "kt"], ["a"]), helper.make_node("Softmax", ["a"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["o"])]
    inputs = [helper.make_tensor_value_info(n, f, shape) for n, shape in (("q", [2, 5, 4]), ("kt", [2, 4, 6]),
                                                                           ("v", [2, 6, 4]))]
    model = helper.make_model(helper.make_graph(nodes, "attention", inputs, [helper.make_tensor_value_info("o", f, [2, 5, 4])]),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    path = tmp_path / "attention.onnx"
    onnx.save(model, path)
    assert main(["fuse", str(path)]) == 0
    out = capsys.readouterr().out
    assert "rules apollo_patterns" in out and "fuse pattern scaled_qk_attention_block" in out
    assert main(["fuse", str(path), "--strategy", "dp"]) == 0  # dp takes no pattern entries
    assert "strategy dp, rules apollo\n" in capsys.readouterr().out
