"""The matcher: DAG patterns, shared variables, attributes, commutativity declared
once, one-use checks, literals, and a fixed match order."""

from __future__ import annotations

import numpy as np
import pytest

from fusionlang.engine.match import Failure, Match, Matcher
from fusionlang.lang import parse_text
from fusionlang.ops import GraphBuilder

RULES = parse_text("""
import "std/algebra.fuse"
rewrite square: mul(x, x) => x
rewrite bias: add(m @ matmul(a, b), c) where rank(c) == 1 => m
rewrite ordered: sub(x, exp(y)) => x
rewrite keep: reduce_sum(x) {axes=a, keepdims=1, ..rest} => x
rewrite drop_zero_scale: mul(x, 0) => x
rewrite chain: relu(exp(x)) => x
rewrite chain_shared shared: exp(relu(x)) => x
rewrite three: sum(x, relu(y), exp(z)) => x
rewrite same_axes: add(reduce_max(x) {axes=a}, reduce_sum(y) {axes=a}) => x
rewrite first: max(x, y) => x
""", "m.fuse")


def node(graph, name):
    return graph.node(name)


def match(graph, rule, name):
    return Matcher(graph, RULES).match(RULES.rewrite(rule), node(graph, name))


def test_shared_variable_must_bind_the_same_value():
    b = GraphBuilder()
    x, y = b.input("x", (4,)), b.input("y", (4,))
    b.output(b.mul(x, x, name="xx"), b.mul(x, y, name="xy"))
    g = b.build()
    m = match(g, "square", "xx")
    assert isinstance(m, Match) and m.bindings.tensors["x"] == "x"
    assert match(g, "square", "xy") is None


def test_commutative_op_matches_both_orders_from_one_rule():
    b = GraphBuilder()
    a, w = b.input("a", (2, 3)), b.input("w", (3, 5))
    c = b.input("c", (5,))
    b.output(b.add(b.matmul(a, w), c, name="left"), b.add(c, b.matmul(a, w), name="right"))
    g = b.build()
    for name in ("left", "right"):
        m = match(g, "bias", name)
        assert m is not None and m.bindings.tensors["c"] == "c" and m.bindings.tensors["a"] == "a"
    assert len(RULES.rewrites) == 10  # no hidden copies of the rule


def test_non_commutative_op_keeps_operand_order():
    b = GraphBuilder()
    x = b.input("x", (4,))
    b.output(b.sub(x, b.exp(x), name="ok"), b.sub(b.exp(x), x, name="swapped"))
    g = b.build()
    assert match(g, "ordered", "ok") is not None
    assert match(g, "ordered", "swapped") is None


def test_variadic_commutative_operands_are_permuted():
    b = GraphBuilder()
    x = b.input("x", (4,))
    b.output(b.sum(b.exp(x), x, b.relu(x), name="s"))
    g = b.build()
    m = match(g, "three", "s")
    assert m is not None and m.bindings.tensors["x"] == "x" and m.bindings.tensors["y"] == "x"


def test_attributes_bind_constrain_and_rest_carries_the_others():
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    b.output(b.reduce_sum(x, axes=[1], keepdims=1, name="kept"), b.reduce_sum(x, axes=[1], keepdims=0, name="flat"))
    g = b.build()
    m = match(g, "keep", "kept")
    assert m.bindings.statics["a"] == (1,)
    assert m.bindings.rests["rest"] == {"noop_with_empty_axes": 0}
    assert match(g, "keep", "flat") is None


def test_attribute_variable_used_twice_must_agree():
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    b.output(b.add(b.reduce_max(x, axes=[1]), b.reduce_sum(x, axes=[1]), name="same"),
             b.add(b.reduce_max(x, axes=[1]), b.reduce_sum(x, axes=[0]), name="other"))
    g = b.build()
    assert match(g, "same_axes", "same") is not None
    failure = Matcher(g, RULES).explain(RULES.rewrite("same_axes"), node(g, "other"))
    assert isinstance(failure, Failure) and "differs from a=[1]" in failure.message


def test_numeric_literal_matches_a_constant_of_that_value():
    b = GraphBuilder()
    x = b.input("x", (4,))
    b.output(b.mul(x, np.zeros(4, np.float32), name="z"), b.mul(np.zeros(1, np.float32), x, name="z2"),
             b.mul(x, np.ones(4, np.float32), name="o"))
    g = b.build()
    assert match(g, "drop_zero_scale", "z") is not None and match(g, "drop_zero_scale", "z2") is not None
    failure = Matcher(g, RULES).explain(RULES.rewrite("drop_zero_scale"), node(g, "o"))
    assert "expected the constant 0, got a constant with elements [1.0, 1.0, 1.0, 1.0]" in failure.message


def test_interior_node_with_other_users_blocks_the_rewrite():
    b = GraphBuilder()
    x = b.input("x", (4,))
    e = b.exp(x, name="e")
    b.output(b.relu(e, name="r"), b.neg(e, name="other_user"))
    g = b.build()
    failure = Matcher(g, RULES).explain(RULES.rewrite("chain"), node(g, "r"))
    assert failure.message == ("node 'e' (exp) is also used by 'other_user'; rewriting would compute it twice "
                               "(mark the rule 'shared' to allow that)")
    assert str(failure.span) == "m.fuse:8:21"


def test_shared_rule_may_duplicate():
    b = GraphBuilder()
    x = b.input("x", (4,))
    r = b.relu(x, name="r")
    b.output(b.exp(r, name="e"), r)
    g = b.build()
    assert match(g, "chain_shared", "e") is not None


def test_match_order_is_deterministic():
    """Both operand orders of a commutative op match; the written order is tried first."""
    b = GraphBuilder()
    p, q = b.input("p", (3,)), b.input("q", (3,))
    b.output(b.max(p, q, name="m"))
    g = b.build()
    found = [Matcher(g, RULES).match(RULES.rewrite("first"), node(g, "m")).bindings.tensors for _ in range(3)]
    assert found == [{"x": "p", "y": "q"}] * 3
