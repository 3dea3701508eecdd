"""The trigonometric, rounding and bitwise ops fused into one kernel, compiled to C and to
CUDA (emulated), against the reference, on special values (NaN, inf, domain edges, ties)."""

from __future__ import annotations

import numpy as np
import pytest

import fusionlang.backend as backend
from fusionlang import reference
from fusionlang.engine.plan import single_group_plan
from fusionlang.ops import GraphBuilder

SPECIAL = np.array([-np.inf, -2, -1, -0.5, -0.0, 0.0, 0.5, 1, 1.5, 2.5, 3, 90, np.inf, np.nan, 1e-7, -1e-7],
                   np.float32)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_trig_and_round_in_one_kernel(target):
    b = GraphBuilder("trig")
    x = b.input("x", SPECIAL.shape)
    outs = [getattr(b, op)(x) for op in ("tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
                                         "round")]
    b.output(*outs)
    graph = b.build()
    feeds = {"x": SPECIAL}
    compiled = backend.compile(single_group_plan(graph), target)
    assert compiled.stats.kernels == 1
    got = compiled.run(feeds)
    with np.errstate(all="ignore"):
        want = reference.run(graph, feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6, equal_nan=True, err_msg=name)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64"])
def test_bitwise_ops_keep_every_bit(target, dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(info.bits)
    a = rng.integers(info.min, info.max, (3, 8), dtype=dtype, endpoint=True)
    a[0, :4] = [info.min, info.max, 0, -1 if info.min < 0 else 1]
    c = rng.integers(info.min, info.max, (8,), dtype=dtype, endpoint=True)
    b = GraphBuilder("bits")
    x, y = b.input("a", a.shape, dtype), b.input("c", c.shape, dtype)
    b.output(b.bitwise_and(x, y), b.bitwise_or(x, y), b.bitwise_xor(x, y), b.bitwise_not(x))
    graph = b.build()
    got = backend.compile(single_group_plan(graph), target).run({"a": a, "c": c})
    want = [a & c, a | c, a ^ c, ~a]
    for name, w in zip(graph.outputs, want):
        assert got[name].dtype == w.dtype
        np.testing.assert_array_equal(got[name], w, err_msg=name)
