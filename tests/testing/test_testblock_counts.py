"""Test blocks count `groups` and `launches` apart: a horizontal pack of groups is one
launch; `kernels` counts launches, as the docs say."""

from __future__ import annotations

import pytest

from fusionlang.api import fuse
from fusionlang.testing.testblocks import run_test_blocks
from fusionlang.lang import parse_text
from fusionlang.ops import GraphBuilder

PACKED = """
import "apollo.fuse"

test packed {
    input x: f32[4, 8]
    input z: f32[4, 8]
    a = exp(x)
    b = reduce_sum(z) {axes=[1]}
    output a, b
    expect EXPECTATION
}
"""


def packed_plan():
    b = GraphBuilder()
    x, z = b.input("x", (4, 8)), b.input("z", (4, 8))
    b.output(b.exp(x))
    b.output(b.reduce_sum(z, axes=[1]))
    return fuse(b.build(), "apollo")


def run(expectation: str):
    results = run_test_blocks(parse_text(PACKED.replace("EXPECTATION", expectation), "packed.fuse"))
    (result,) = [r for r in results if r.name == "packed"]
    return result


def test_the_plan_packs_two_groups_into_one_launch():
    plan = packed_plan()
    assert (len(plan.groups), plan.launches) == (2, 1)


@pytest.mark.parametrize("expectation", ["groups == 2", "launches == 1", "kernels == 1",
                                         "groups == 2 and launches == 1 and kernels == launches"])
def test_counts(expectation):
    result = run(expectation)
    assert result.passed, result.message


@pytest.mark.parametrize("expectation", ["groups == 1", "launches == 2", "kernels == 2"])
def test_wrong_counts_fail(expectation):
    assert not run(expectation).passed
