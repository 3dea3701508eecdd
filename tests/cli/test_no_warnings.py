"""No Python warning reaches a user's terminal from lint, check, fuse or run: IEEE special
values (log(0) = -inf, 1/0 = inf, 0/0 = NaN) are results, in the reference interpreter
as in the generated code, and NumPy's RuntimeWarnings about them were printed with
site-packages paths on every lint of a policy importing apollo.fuse."""

from __future__ import annotations

import numpy as np
import onnx
from cli_helpers import run_cli
from onnx import TensorProto, helper


def log_reciprocal_model(path) -> str:
    """y = log(x) + 1/x: at x = 0 both parts divide by zero in NumPy."""
    nodes = [helper.make_node("Log", ["x"], ["l"]), helper.make_node("Reciprocal", ["x"], ["r"]),
             helper.make_node("Add", ["l", "r"], ["y"])]
    graph = helper.make_graph(nodes, "specials", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def assert_silent(result) -> None:
    assert result.returncode in (0, 1), result.stderr
    assert "Warning" not in result.stderr, result.stderr


def test_lint_of_the_shipped_policies_prints_no_warning():
    assert_silent(run_cli("lint", "apollo", "tvm", "xla", "dnnfusion"))


def test_check_of_the_shipped_policies_prints_no_warning():
    assert_silent(run_cli("check", "apollo", "tvm", "xla", "dnnfusion", "--examples", "10", "--budget", "2"))


def test_check_of_rules_evaluated_at_special_values_prints_no_warning(tmp_path):
    rules = tmp_path / "specials.fuse"
    rules.write_text('import "apollo.fuse"\n\nrewrite log_of_exp:\n    log(exp(x))\n    => x\n')
    assert_silent(run_cli("check", rules, "--examples", "5", "--kinds", "rewrite,def"))


def test_run_and_fuse_on_zeros_print_no_warning(tmp_path):
    model = log_reciprocal_model(tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.float32([0, 1, -1, np.inf]))
    assert_silent(run_cli("fuse", model))
    for target in ("c", "reference"):
        assert_silent(run_cli("run", model, "--input", f"x={tmp_path / 'x.npy'}", "--check", "--target", target))
