"""Patterns see canonical attributes: defaults that depend on shapes filled, negative
axes resolved (fusionlang.ops.canonical), so literal attribute values match however the
model wrote them; why_not shows the canonical values."""

from __future__ import annotations

import numpy as np
import pytest

from fusionlang.engine.rewrite import apply_rules, why_not
from fusionlang.lang import parse_text
from fusionlang.ops import GraphBuilder

CONV_RULE = "rewrite unit_conv: conv(x, w) {strides=[1, 1], dilations=[1, 1], pads=[0, 0, 0, 0]} => relu(x)\n"


def conv_graph(**attrs):
    b = GraphBuilder()
    x = b.input("x", (1, 3, 5, 5))
    w = b.constant(np.ones((3, 3, 1, 1), np.float32), name="w")
    b.output(b.conv(x, w, name="c", **attrs))
    return b.build()


def reduce_graph(axes, rank=3):
    b = GraphBuilder()
    x = b.input("x", (2, 3, 4)[:rank])
    b.output(b.reduce_sum(x, axes=axes, keepdims=1, name="r"))
    return b.build()


def fired(graph, text, rule):
    return apply_rules(graph, parse_text(text, "p.fuse"), fold=False).fired[rule]


def matches(graph, text, node, rule):
    return why_not(graph, node, parse_text(text, "p.fuse"), rule).matches


def test_conv_without_strides_matches_the_default_strides():
    graph = conv_graph()
    assert graph.node("c").attrs["strides"] == ()  # stored as the model wrote it
    assert fired(graph, CONV_RULE, "unit_conv") == 1


def test_conv_with_other_strides_does_not_match():
    graph = conv_graph(strides=[2, 2])
    assert fired(graph, CONV_RULE, "unit_conv") == 0
    answer = why_not(graph, "c", parse_text(CONV_RULE, "p.fuse"), "unit_conv")
    col = CONV_RULE.index("strides=") + 1
    assert str(answer) == f"p.fuse:1:{col}: attribute strides=[2, 2] of node 'c' is not [1, 1]"


def test_kernel_shape_comes_from_the_weight():
    rule = "rewrite k: conv(x, w) {kernel_shape=[1, 1]} => relu(x)\n"
    assert fired(conv_graph(), rule, "k") == 1


@pytest.mark.parametrize("pattern, written", [([-1], [2]), ([2], [-1]), ([-1], [-1]), ([2], [2]),
                                              ([0, -1], [2, 0]), ([0, 1, 2], [])])
def test_reduce_axes_match_however_written(pattern, written):
    rule = f"rewrite last: reduce_sum(x) {{axes={pattern}}} => exp(x)\n"
    assert matches(reduce_graph(written), rule, "r", "last")


@pytest.mark.parametrize("pattern, written", [([-1], [1]), ([1], [-1]), ([0], [])])
def test_other_axes_do_not_match(pattern, written):
    rule = f"rewrite last: reduce_sum(x) {{axes={pattern}}} => exp(x)\n"
    assert not matches(reduce_graph(written), rule, "r", "last")


def test_why_not_shows_the_canonical_axes():
    rule = "rewrite last: reduce_sum(x) {axes=[-1]} => exp(x)\n"
    answer = why_not(reduce_graph([1]), "r", parse_text(rule, "p.fuse"), "last")
    col = rule.index("axes=") + 1
    assert str(answer) == f"p.fuse:1:{col}: attribute axes=[1] of node 'r' is not [2]"


def test_a_bound_attribute_sees_the_canonical_value():
    rule = "rewrite same: reduce_sum(reduce_sum(x) {axes=a}) {axes=a} => reduce_sum(x) {axes=a}\n"
    b = GraphBuilder()
    x = b.input("x", (2, 3, 4))
    inner = b.reduce_sum(x, axes=[-1], keepdims=1, name="inner")
    b.output(b.reduce_sum(inner, axes=[2], keepdims=1, name="outer"))
    assert matches(b.build(), rule, "outer", "same")


def test_softmax_axis_and_transpose_perm():
    text = ("rewrite s: softmax(x) {axis=1} => exp(x)\n"
            "rewrite t: transpose(x) {perm=[1, 0]} => exp(x)\n")
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    b.output(b.softmax(x, axis=-1, name="s"))
    b.output(b.transpose(x, name="t"))
    graph = b.build()
    assert matches(graph, text, "s", "s") and matches(graph, text, "t", "t")
