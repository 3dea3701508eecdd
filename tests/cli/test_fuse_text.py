"""`fusionlang fuse` text output lists the rewrites that fired and the compound ops
opened, each with where it is written and how often."""

from __future__ import annotations

import pytest
from cli_helpers import conv_bn_pool_model

from fusionlang.cli import main
from fusionlang.lang import load_rules

TANH_OPENED = """\
import "apollo.fuse"

decompose tanh(x) {
    return 2 * sigmoid(2 * x) - 1
}
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return conv_bn_pool_model(tmp_path_factory.mktemp("fuse_text") / "near_miss.onnx")


def fuse(capsys, *args):
    status = main(["fuse", *map(str, args)])
    out, err = capsys.readouterr()
    assert status == 0, err
    return out.splitlines()


def test_the_rewrites_that_fired_with_their_lines(capsys, model):
    lines = fuse(capsys, model)
    where = load_rules("simplify").rewrite("fold_conv_bn_no_bias").where
    k = lines.index("  rewrites fired 1:")
    assert lines[k + 1] == f"    fold_conv_bn_no_bias ({where}) x1"


def test_compound_ops_opened_are_listed_after_them(capsys, model, tmp_path):
    rules = tmp_path / "tanh.fuse"
    rules.write_text(TANH_OPENED)
    lines = fuse(capsys, model, "--rules", rules)
    sigmoid = load_rules("decompose").decompositions["sigmoid"][0].where
    k = lines.index("  compound ops opened 2:")
    assert lines[k + 1:k + 3] == [f"    decompose sigmoid ({sigmoid}) x1", f"    decompose tanh ({rules}:3) x1"]
    assert lines.index("  rewrites fired 1:") < k


def test_none_fired(capsys, model, tmp_path):
    rules = tmp_path / "plain.fuse"
    rules.write_text('import "std/ops.fuse"\nfuse complex -> elemwise : complex\nstrategy apollo { max_ops = 8 }\n')
    assert "  rewrites fired: none" in fuse(capsys, model, "--rules", rules)
