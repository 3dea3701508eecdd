"""A decomposition that gives one value for two outputs of the node it opens is an error
naming the rule, not an internal error of the graph surgery."""

from __future__ import annotations

import re

import pytest

from fusionlang.cli import main
from fusionlang.engine.rewrite import apply_rules
from fusionlang.errors import RewriteError
from fusionlang.lang import parse_text
from fusionlang.ops import GraphBuilder

SAME_TWICE = """decompose nll_loss(x, target; ignore_index) {
    w = cast(target != ignore_index) {to=dtype(x)}
    return w, w
}
"""


def nll_graph():
    b = GraphBuilder()
    loss, weight = b.op("nll_loss", b.input("x", (3, 4), "float32"), b.input("t", (3,), "int64"))
    b.output(loss)
    b.output(weight)
    return b.build()


def test_one_value_for_two_outputs_names_the_decomposition():
    message = ("twice.fuse:1: decomposition of 'nll_loss': gives 'nll_loss_0_w_3' for two outputs of node "
               "'nll_loss_0' (nll_loss); return identity(...) of it for the second")
    with pytest.raises(RewriteError, match="^" + re.escape(message) + "$"):
        apply_rules(nll_graph(), parse_text(SAME_TWICE, "twice.fuse"))


def test_lint_reports_it_at_the_test_block(tmp_path, capsys):
    path = tmp_path / "twice.fuse"
    path.write_text(SAME_TWICE + """
test opens {
    input x: f32[3, 4]
    const t: i64[3] = [0, 1, 3]
    a, b = nll_loss(x, t) {ignore_index=1}
    output a, b
    expect equivalent
}
""")
    status = main(["lint", str(path)])
    first = capsys.readouterr().err.splitlines()[0]
    assert status == 2
    assert first == (f"{path}:6:1: error: test twice.fuse::opens failed: {path}:1: decomposition of 'nll_loss': gives 'a_b_0_w_3' "
                     "for two outputs of node 'a_b_0' (nll_loss); return identity(...) of it for the second")
