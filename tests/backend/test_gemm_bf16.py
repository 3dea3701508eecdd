"""bfloat16 and float16 matmul, gemm and conv on the C GEMM template (backend.gemm_half):
planned as templates, not loop nests, and within a K-based tolerance of the reference.
Where the machine has AMX, bfloat16 runs on it (backend.gemm_amx, tests/backend/test_gemm_amx.py)
unless FUSIONLANG_AMX=0: the property test draws both paths, the tests of the widening
itself turn AMX off.

Tolerance: the reference sums the float32 products in its order and rounds once to 16
bits; the template sums them in another order, then the epilogue rounds each of its
statements' values as the loop nest does. Each 16-bit rounding may land one unit apart
(the float32 sums differ by at most ``2 K 2**-24`` of ``S = sum_k |a b|``), so an element
may differ by ``(rounds + 1) * u * (S + |epilogue terms|)``, u = 2**-8 (bfloat16) or
2**-11 (float16), ``rounds`` the 16-bit roundings after the product. ``S`` is computed by
the reference on the absolute values of every operand, in float32.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusionlang
from fusionlang import reference
from fusionlang.backend import gemm_template, template
from fusionlang.ops import GraphBuilder

HALF = ["bfloat16", "float16"]
UNIT = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}


@pytest.fixture(autouse=True)
def _small_problems_use_the_template(monkeypatch):
    # the tests' shapes are tiny; in production a GEMM this small stays a loop nest
    monkeypatch.setattr(template, "MIN_MACS", 0)


@pytest.fixture
def widened(monkeypatch):
    """bfloat16 on the float32-widening path even where the machine has AMX."""
    monkeypatch.setenv("FUSIONLANG_AMX", "0")


def _as(dtype, array):
    return np.asarray(array, np.float32).astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)


class Case:
    """A complex op and its epilogue, built once in ``dtype`` and once in float32 on the
    operands' absolute values (the bound ``S`` of the tolerance)."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.arrays: dict[str, np.ndarray] = {}

    def array(self, name, shape):
        if name not in self.arrays:
            self.arrays[name] = self.rng.standard_normal(shape).astype(np.float32)
        return self.arrays[name]

    def build(self, dtype, body, absolute=False):
        """(graph, feeds, 16-bit roundings after the product): ``body(b, value)`` builds the
        graph, ``value(name, shape, constant)`` giving each operand."""
        b = GraphBuilder("half")
        feeds = {}

        def value(name, shape, constant=False):
            data = self.array(name, shape)
            data = _as(dtype, np.abs(data) if absolute else data)
            if constant:
                return b.constant(data)
            feeds[name] = data
            return b.input(name, shape, dtype)

        out, rounds = body(b, value, absolute)
        b.output(out)
        return b.build(), feeds, rounds


def _epilogue_ops(draw) -> list[str]:
    """bias, relu, residual in a drawn order; drawn once per case, outside the graph's body,
    so that the 16-bit graph and its bound (built by a second call) hold the same epilogue."""
    return draw(st.lists(st.sampled_from(["bias", "relu", "residual"]), max_size=3))


def _epilogue(ops, b, y, shape, value, absolute, channel_axis):
    """``ops`` (:func:`_epilogue_ops`) after ``y``: (value, 16-bit roundings it adds)."""
    for k, op in enumerate(ops):
        if op == "bias":
            bshape = [1] * len(shape)
            bshape[channel_axis] = shape[channel_axis]
            y = b.add(y, value(f"bias{k}", tuple(bshape), constant=True))
        elif op == "residual":
            y = b.add(y, value(f"res{k}", shape))
        elif not absolute:  # relu only shrinks |y|: the bound leaves it out
            y = b.relu(y)
    return y, len(ops)


def _check(case: Case, dtype: str, body, expect_template: bool = True, openmp: bool = False):
    graph, feeds, rounds = case.build(dtype, body)
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c", openmp=openmp)
    strategies = [k.strategy for k in compiled.kernels]
    assert ("gemm template" in strategies) == expect_template, strategies
    got, want = compiled.run(feeds), reference.run(graph, feeds)
    bound_graph, bound_feeds, _ = case.build("float32", body, absolute=True)
    bound = reference.run(bound_graph, bound_feeds)
    for (name, w), s in zip(want.items(), bound.values()):
        assert got[name].dtype == w.dtype
        error = np.abs(got[name].astype(np.float64) - w.astype(np.float64))
        allowed = (rounds + 2) * UNIT[dtype] * s.astype(np.float64) + 1e-30
        worst = np.unravel_index(np.argmax(error - allowed), error.shape)
        assert (error <= allowed).all(), f"{name} at {worst}: got {got[name][worst]}, want {w[worst]}, " \
                                         f"allowed {allowed[worst]}"
    return compiled, got


def _matmul(draw):
    m, k, n = (draw(st.integers(1, 19)) for _ in range(3))
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    a_batch = tuple(1 if draw(st.booleans()) else d for d in batch)
    b_batch = batch[draw(st.integers(0, len(batch))):]
    constant = draw(st.booleans())
    ops = _epilogue_ops(draw)

    def body(b, value, absolute):
        y = b.matmul(value("x", a_batch + (m, k)), value("w", b_batch + (k, n), constant))
        return _epilogue(ops, b, y, tuple(np.broadcast_shapes(a_batch, b_batch)) + (m, n), value, absolute, -1)

    return body


def _gemm(draw):
    m, k, n = (draw(st.integers(1, 19)) for _ in range(3))
    trans_a, trans_b = draw(st.booleans()), draw(st.booleans())
    ops = _epilogue_ops(draw)

    def body(b, value, absolute):
        a = value("a", (k, m) if trans_a else (m, k))
        w = value("w", (n, k) if trans_b else (k, n), constant=True)
        y = b.gemm(a, w, trans_a=int(trans_a), trans_b=int(trans_b))
        return _epilogue(ops, b, y, (m, n), value, absolute, 1)

    return body


def _conv(draw):
    """A 1-D or 2-D conv with every attribute drawn (not depthwise: that stays a loop nest)."""
    rank = draw(st.sampled_from([1, 2]))
    group = draw(st.integers(1, 2))
    cin, oc = group * draw(st.integers(1, 3)), group * draw(st.integers(2, 3))
    spatial = tuple(draw(st.integers(3, 8)) for _ in range(rank))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    strides = tuple(draw(st.integers(1, 2)) for _ in range(rank))
    dilations = tuple(draw(st.integers(1, 2)) for _ in range(rank))
    pads = tuple(draw(st.integers(0, 2)) for _ in range(2 * rank))
    out = tuple((n + pads[a] + pads[rank + a] - d * (k - 1) - 1) // s + 1
                for a, (n, k, s, d) in enumerate(zip(spatial, kernel, strides, dilations)))
    batch = draw(st.integers(1, 2))
    if min(out) < 1:
        kernel, dilations, out = (1,) * rank, (1,) * rank, tuple((n + pads[a] + pads[rank + a] - 1) // s + 1
                                                              for a, (n, s) in enumerate(zip(spatial, strides)))
    ops = _epilogue_ops(draw)

    def body(b, value, absolute):
        y = b.conv(value("x", (batch, cin) + spatial), value("w", (oc, cin // group) + kernel, constant=True),
                   strides=strides, dilations=dilations, pads=pads, group=group)
        return _epilogue(ops, b, y, (batch, oc) + out, value, absolute, 1)

    return body


@settings(max_examples=30, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(HALF), kind=st.sampled_from([_matmul, _gemm, _conv]),
       seed=st.integers(0, 2**16), amx=st.booleans())
def test_half_matmuls_gemms_and_convs_run_on_the_template_within_the_tolerance(data, dtype, kind, seed, amx):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FUSIONLANG_AMX", "1" if amx else "0")
        _check(Case(seed), dtype, kind(data.draw))


@pytest.mark.parametrize("dtype", HALF)
def test_a_k_long_sum_rounds_as_the_reference_within_the_k_bound(dtype):
    # K = 1000: the float32 sums of the two orders differ, the bound holds
    case = Case(3)

    def body(b, value, absolute):
        return b.matmul(value("x", (9, 1000)), value("w", (1000, 13), constant=True)), 0

    _check(case, dtype, body)


def test_an_operand_read_as_a_and_b_and_by_the_epilogue_is_widened_once(widened):
    def body(b, value, absolute):
        x = value("x", (12, 12))
        return b.add(b.matmul(x, x), x), 1

    compiled, _ = _check(Case(4), "bfloat16", body)
    assert compiled.sources.count("p0_f = (float *)fl_alloc") == 1


def test_threads_give_the_same_bits_as_one(monkeypatch, widened):
    monkeypatch.setattr(gemm_template, "PARALLEL_MIN_MACS", 0)

    def body(b, value, absolute):
        y = b.conv(value("x", (1, 16, 20, 20)), value("w", (24, 16, 3, 3), constant=True), pads=(1, 1, 1, 1))
        return (y if absolute else b.relu(y)), 0

    threaded, got = _check(Case(5), "bfloat16", body, openmp=True)
    assert "#pragma omp parallel if" in threaded.sources
    _, serial = _check(Case(5), "bfloat16", body)
    for name in got:
        np.testing.assert_array_equal(got[name].view(np.uint16), serial[name].view(np.uint16))


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("op", ["depthwise", "max_pool", "average_pool"])
def test_depthwise_convs_and_pools_run_on_their_template_widened(dtype, op):
    def body(b, value, absolute):
        x = value("x", (2, 4, 9, 9))
        if op == "depthwise":
            y = b.conv(x, value("w", (4, 1, 3, 3), constant=True), group=4, pads=(1, 0, 1, 2))
        else:
            y = getattr(b, op)(x, kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 0, 1))
        return (y if absolute else b.relu(y)), 1

    compiled, _ = _check(Case(6), dtype, body)
    kinds = [k.detail.split()[0] for k in compiled.kernels if k.strategy == "gemm template"]
    assert kinds == ["depthwise" if op == "depthwise" else "pooling"], kinds


@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_a_matmul_of_a_dtype_the_c_template_refuses_stays_a_loop_nest(dtype):
    b = GraphBuilder("refused")
    x = b.input("x", (16, 16), dtype)
    b.output(b.matmul(x, b.constant(np.ones((16, 16), dtype))))
    plan = fusionlang.fuse(b.build(), "apollo")
    assert all(template.plan_template(plan, g, dict(plan.graph.constants)) is None for g in plan.groups)
    assert template.C_ELEMENT_DTYPES == ("float32", "float16", "bfloat16")


def out_of_memory_matmul(monkeypatch, limit: int, m: int, k: int):
    """(compiled, its kernel, feeds) of an [m, k] x [k, 8] bf16 matmul built with every
    allocation above ``limit`` bytes failing."""
    monkeypatch.setenv("FUSIONLANG_COPT", f"-O2 -DFL_ALLOC_LIMIT={limit}")
    b = GraphBuilder("oom")
    x = b.input("x", (m, k), "bfloat16")
    b.output(b.matmul(x, b.constant(_as("bfloat16", np.ones((k, 8))))))
    compiled = fusionlang.compile(fusionlang.fuse(b.build(), "apollo"), "c")
    assert compiled.kernels[0].strategy == "gemm template"
    return compiled, compiled.kernels[0], {"x": _as("bfloat16", np.ones((m, k)))}


def test_a_widened_buffer_that_cannot_be_allocated_is_a_one_line_resource_error(monkeypatch, widened):
    from fusionlang.errors import ResourceError

    # the GEMM's own packing buffers fit in 128 KiB; the widened 256x256 input does not
    compiled, kernel, feeds = out_of_memory_matmul(monkeypatch, 131072, 256, 256)
    with pytest.raises(ResourceError, match=rf"^out of memory allocating 262144 bytes in kernel {kernel.name}$"):
        compiled.run(feeds)


def test_a_bf16_matmul_whose_epilogue_casts_to_float32_writes_the_float32_output_itself():
    # the accumulator array is the cast's float32 output: no 16-bit store after the GEMM
    def body(b, value, absolute):
        y = b.matmul(value("x", (10, 30)), value("w", (30, 7), constant=True))
        return (y if absolute else b.cast(b.relu(y), to="float32")), 1

    graph, feeds, _ = Case(7).build("bfloat16", body)
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c")
    assert [k.strategy for k in compiled.kernels] == ["gemm template"]
    got = compiled.run(feeds)[graph.outputs[0]]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, reference.run(graph, feeds)[graph.outputs[0]])


@pytest.mark.parametrize("dtype", HALF)
def test_exact_integer_sums_round_to_nearest_even_bit_for_bit(dtype):
    # small integers: every order of the float32 sums is exact, so the only rounding is the
    # one to 16 bits (sums past 256 for bfloat16, 2048 for float16, fall between its values)
    rng = np.random.default_rng(8)
    b = GraphBuilder("exact")
    x = b.input("x", (17, 120), dtype)
    b.output(b.matmul(x, b.constant(_as(dtype, rng.integers(0, 13, (120, 23))))))
    graph = b.build()
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c")
    assert [k.strategy for k in compiled.kernels] == ["gemm template"]
    feeds = {"x": _as(dtype, rng.integers(0, 13, (17, 120)))}
    got, want = compiled.run(feeds)[graph.outputs[0]], reference.run(graph, feeds)[graph.outputs[0]]
    assert np.abs(want.astype(np.float32)).max() > (2048 if dtype == "float16" else 256)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("dtype", HALF)
def test_subnormals_infinities_overflow_and_nan_are_stored_as_the_reference_stores_them(dtype, widened):
    # K = 2, exact sums: the stored 16-bit patterns are the reference's (NaN: in place)
    info = np.finfo(np.float16) if dtype == "float16" else ml_dtypes.finfo(ml_dtypes.bfloat16)
    specials = [float(info.smallest_subnormal), -3 * float(info.smallest_subnormal), float(info.tiny),
                float(info.max), -float(info.max), np.inf, -np.inf, np.nan, 0.0, -0.0, 1.0, 3.0]
    x = _as(dtype, np.array(specials * 2).reshape(-1, 2))
    b = GraphBuilder("specials")
    xi = b.input("x", x.shape, dtype)
    b.output(b.matmul(xi, b.constant(_as(dtype, [[1.0, 0.5, 1.0], [0.0, 2.0, 1.0]]))))
    graph = b.build()
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c")
    assert [k.strategy for k in compiled.kernels] == ["gemm template"]
    got, want = compiled.run({"x": x})[graph.outputs[0]], reference.run(graph, {"x": x})[graph.outputs[0]]
    nan = np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
    np.testing.assert_array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])
    assert np.isinf(want.astype(np.float32)).any() and (np.abs(want.astype(np.float32)) < info.tiny).any()
