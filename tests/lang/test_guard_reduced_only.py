"""The reduced_only guard holds for a value that reductions alone read (apollo.fuse keeps
a squeeze-excite mean's scaling out of its conv's epilogue with it)."""

from __future__ import annotations

import pytest

from fusionlang.engine.rewrite import apply_rules
from fusionlang.lang import parse_text
from fusionlang.ops import GraphBuilder

RULE = "rewrite negate_what_is_summed: y @ relu(x) where reduced_only(y) => neg(x)\n"


def _graph(readers: tuple[str, ...], as_output: bool):
    b = GraphBuilder()
    y = b.relu(b.input("x", (4, 6)))
    for op in readers:
        b.output(b.op(op, y, axes=[1], keepdims=0) if op.startswith("reduce_") else b.op(op, y))
    if as_output:
        b.output(y)
    return b.build()


@pytest.mark.parametrize("readers,as_output,fires", [
    (("reduce_sum",), False, 1),
    (("reduce_sum", "reduce_max"), False, 1),
    (("reduce_sum", "exp"), False, 0),
    (("reduce_sum",), True, 0),
    (("exp",), False, 0),
])
def test_reduced_only_guard_by_readers(readers, as_output, fires):
    fired = apply_rules(_graph(readers, as_output), parse_text(RULE, "p.fuse"), fold=False).fired
    assert fired["negate_what_is_summed"] == fires
