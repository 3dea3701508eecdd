"""The standard ops declare their own commutativity: a rule file that imports nothing
still matches `sigmoid(x) * x` with the pattern `mul(x, sigmoid(x))`."""

from __future__ import annotations

import pytest

from fusionlang.engine.rewrite import apply_rules
from fusionlang.lang import parse_text
from fusionlang.ops import GraphBuilder
from fusionlang.ops.registry import REGISTRY

NO_IMPORTS = """
rewrite to_silu:
    mul(x, sigmoid(x))
    => silu(x)
"""


@pytest.mark.parametrize("op", ["add", "mul", "max", "min", "sum", "mean", "equal", "and", "or", "xor"])
def test_the_op_declares_it(op):
    assert REGISTRY.get(op).commutative
    assert parse_text("").is_commutative(op)


@pytest.mark.parametrize("op", ["sub", "div", "pow", "less", "matmul"])
def test_ops_that_are_not_commutative_do_not(op):
    assert not parse_text("").is_commutative(op)


def test_swapped_operands_match_without_importing_algebra():
    rules = parse_text(NO_IMPORTS, "silu.fuse")
    b = GraphBuilder()
    x = b.input("x", (8,))
    b.output(b.mul(b.sigmoid(x), x, name="m"))
    result = apply_rules(b.build(), rules)
    assert result.fired["to_silu"] == 1
    assert [n.op for n in result.graph.nodes] == ["silu"]


def test_lint_sees_a_loop_through_swapped_operands_without_imports():
    from fusionlang.errors import RuleError

    with pytest.raises(RuleError) as err:
        parse_text("rewrite swap: mul(x, exp(y)) => mul(exp(y), relu(x))\n", "swap.fuse")
    assert "swap.fuse:1:9: error: rewrite 'swap' can loop" in str(err.value)
