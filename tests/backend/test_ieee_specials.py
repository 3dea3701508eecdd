"""Generated code gives the reference's IEEE special values (see also
test_special_values.py, which draws them over every op): NaN through sign, pow at -inf,
literal zeros that must not be simplified away, and means that do not overflow."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fusionlang
from fusionlang import reference
from fusionlang.engine.plan import per_node_plan
from fusionlang.ops import GraphBuilder

M = float(np.finfo(np.float32).max)
SPECIAL = np.float32([np.nan, np.inf, -np.inf, 0.0, -0.0, M, -M, 1e-45, -2.5, 7.0])


def compiled_and_reference(graph, feeds, plan=None):
    plan = plan or per_node_plan(graph, lambda n: "kernel")
    with np.errstate(all="ignore"):
        want = reference.run(graph, feeds)
    return fusionlang.compile(plan, target="c").run(feeds), want


def assert_same(got, want):
    for name in want:
        np.testing.assert_array_equal(np.isnan(got[name]), np.isnan(want[name]), err_msg=name)
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, equal_nan=True, err_msg=name)


def unary_graph(op, **attrs):
    b = GraphBuilder(op)
    b.output(b.op(op, b.input("x", SPECIAL.shape, "float32"), **attrs))
    return b.build()


def test_sign_of_nan_is_nan():
    graph = unary_graph("sign")
    got, want = compiled_and_reference(graph, {"x": SPECIAL})
    assert np.isnan(got["sign_0"][0]) and np.isnan(want["sign_0"][0])
    assert_same(got, want)


def test_pow_at_minus_infinity_and_minus_zero_follows_ieee_in_c_and_the_reference():
    b = GraphBuilder("pow")
    x = b.input("x", SPECIAL.shape, "float32")
    b.output(b.pow(x, b.constant(np.float32(0.5))), b.pow(x, b.input("y", SPECIAL.shape, "float32")))
    graph = b.build()
    feeds = {"x": SPECIAL, "y": np.full(SPECIAL.shape, 0.5, np.float32)}
    got, want = compiled_and_reference(graph, feeds)
    for name in want:  # pow(-inf, 0.5) is +inf (IEEE 754, C's powf, ONNX Runtime), not sqrt's NaN
        assert want[name][2] == np.inf and got[name][2] == np.inf
        # pow(-0, 0.5) is +0 (math.pow is C's), where NumPy's and C's sqrt give -0
        assert math.copysign(1, math.pow(-0.0, 0.5)) == 1
        assert not np.signbit(want[name][4]) and not np.signbit(got[name][4])
    assert_same(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("exponent", [0.25, -0.25, 0.75, -0.75, 1.5, -1.5])
def test_quarter_powers_printed_with_square_roots_match_pow(exponent, dtype):
    # x ** 0.75 (LRN's beta) prints as square roots, not pow: pow's values must stay,
    # zeros' signs included (1 / pow(-0, -0.25) is +inf, not sqrt's -inf)
    big = np.finfo(dtype)
    sweep = np.logspace(np.log10(big.smallest_subnormal), np.log10(big.max) - 0.01, 200)
    x = np.concatenate([SPECIAL, sweep, [2.2e-26, 1.0, 16.0, big.max]]).astype(dtype)
    b = GraphBuilder("roots")
    b.output(b.pow(b.input("x", x.shape, dtype), b.constant(np.array(exponent, dtype))))
    graph = b.build()
    compiled = fusionlang.compile(per_node_plan(graph, lambda n: "kernel"), target="c")
    body = [line for line in compiled.sources.splitlines() if "p1[" in line]
    assert body and not any("pow" in line for line in body) and all("sqrt" in line for line in body)
    with np.errstate(all="ignore"):
        want = reference.run(graph, {"x": x})
    got = compiled.run({"x": x})
    for name in want:
        assert_same(got, want)
        zeros = want[name] == 0
        np.testing.assert_array_equal(np.signbit(got[name][zeros]), np.signbit(want[name][zeros]))
        assert got[name][2] == want[name][2]  # at -inf


def test_literal_zeros_are_not_simplified_away():
    b = GraphBuilder("zeros")
    x = b.input("x", SPECIAL.shape, "float32")
    zero = b.constant(np.float32(0.0))
    b.output(b.mul(x, zero), b.div(x, zero), b.div(zero, x), b.add(x, b.constant(np.float32(np.inf))))
    graph = b.build()
    got, want = compiled_and_reference(graph, {"x": SPECIAL})
    assert np.isnan(got["mul_1"][1])  # inf * 0 is NaN, not sympy's 0
    assert_same(got, want)


@pytest.mark.parametrize("rules", [None, "apollo"])
def test_means_of_the_largest_floats_stay_finite(rules):
    b = GraphBuilder("means")
    x = b.input("x", (3, 4), "float32")
    b.output(b.reduce_mean(x, axes=[1]), b.reduce_mean(x), b.mean(x, b.neg(x), x))
    graph = b.build()
    plan = fusionlang.fuse(graph, rules) if rules else None
    feeds = {"x": np.float32([[M, M, M, M], [M, -M, 1, 2], [3e38, 3e38, 7, -1]])}
    got, want = compiled_and_reference(graph, feeds, plan)
    assert np.isfinite(want["reduce_mean_0"]).all() and np.isfinite(got["reduce_mean_0"]).all()
    assert got["reduce_mean_0"][0, 0] == np.float32(M)  # the scaling is exact: a row of M averages to M
    assert_same(got, want)


@pytest.mark.parametrize("rules", [None, "apollo"])
def test_the_mean_over_an_empty_axis_is_nan(rules):
    b = GraphBuilder("empty_mean")
    b.output(b.reduce_mean(b.input("x", (3, 0), "float32"), axes=[1], keepdims=0))
    graph = b.build()
    plan = fusionlang.fuse(graph, rules) if rules else None
    feeds = {"x": np.zeros((3, 0), np.float32)}
    with np.errstate(all="raise"):  # the reference defines it, without NumPy's warning
        want = reference.run(graph, feeds)
    got, _ = compiled_and_reference(graph, feeds, plan)
    assert np.isnan(want["reduce_mean_0"]).all() and np.isnan(got["reduce_mean_0"]).all()


def test_norms_near_the_largest_float_agree_with_the_reference():
    b = GraphBuilder("norms")
    x = b.input("x", (4, 4), "float32")
    ones, zeros = b.constant(np.ones(4, np.float32)), b.constant(np.zeros(4, np.float32))
    b.output(b.layer_norm(x, ones, zeros, axis=-1), b.instance_norm(b.reshape(x, shape=[1, 4, 4]), ones, zeros))
    graph = b.build()
    # rows whose deviations square past the largest float, one whose deviation itself
    # overflows, one that is fine
    feeds = {"x": np.float32([[M, -M, M, -M], [3e38, 1, 2, 3], [M, -M, -M, -M], [1, 2, 3, 5]])}
    got, want = compiled_and_reference(graph, feeds, fusionlang.fuse(graph, "apollo"))
    assert np.isnan(want["layer_norm_2"][2]).any() and (want["layer_norm_2"][:2] == 0).all()
    assert_same(got, want)
