"""`fusionlang explain` names the limit that cut a group, with the line that set it, even
when both halves later grew into categories the fuse table does not pair."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from fusionlang.cli import main

CAPPED = """\
import "std/ops.fuse"

fuse elemwise -> elemwise : elemwise
fuse complex -> elemwise : complex
fuse elemwise -> complex : complex

strategy apollo { max_ops = 8 }
"""


def conv_chain_conv_model(path, chain: int = 10) -> str:
    """conv -> `chain` alternating Relu/Exp -> conv."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 4, 1, 1)).astype(np.float32), name)
             for name in ("w1", "w2")]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["v0"], name="c1")]
    for k in range(chain):
        nodes.append(helper.make_node("Relu" if k % 2 == 0 else "Exp", [f"v{k}"], [f"v{k + 1}"], name=f"e{k}"))
    nodes.append(helper.make_node("Conv", [f"v{chain}", "w2"], ["y"], name="c2"))
    graph = helper.make_graph(nodes, "capped", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def test_the_cap_is_named_not_the_missing_complex_entry(tmp_path, capsys):
    model = conv_chain_conv_model(tmp_path / "capped.onnx")
    rules = tmp_path / "capped.fuse"
    rules.write_text(CAPPED)
    assert main(["explain", model, "--rules", str(rules), "--node", "e7"]) == 0
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if line.startswith("    <- e6 ")]
    assert line == (f"    <- e6 (relu, group 0): {rules}:4:1: fuse complex -> elemwise : complex applies, "
                    f"but max_ops = 8 ({rules}:7:19: strategy apollo) (8 + 1 ops)")
    assert "no fuse entry for complex -> complex" not in out
