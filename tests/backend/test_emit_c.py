"""The C emitter: how row reductions are printed, and that they keep NumPy's semantics."""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import layer_norm, planned_loops, softmax
from hypothesis import given
from hypothesis import strategies as st

from fusionlang import reference
from fusionlang.backend import codegen_passes, compile
from fusionlang.engine.plan import per_node_plan, single_group_plan
from fusionlang.ops import GraphBuilder

ROWS, COLS = 6, 256


def _reduction_graph(op: str):
    b = GraphBuilder(op)
    x = b.input("x", (ROWS, COLS))
    b.output(b.op(op, x, axes=[-1]))
    return b.build()


def _simd_loops(source: str) -> list[str]:
    """Each ``#pragma omp simd`` line with the loop body under it."""
    return re.findall(r"#pragma omp simd[^\n]*\n\s*for [^\n]*\n(?:[^\n]*\n)*?\s*}\n", source)


@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
def test_simd_max_min_is_a_plain_select_with_a_nan_flag(op):
    # the NaN-propagating select chain would be three times slower per element
    # (which loops take a flag: test_codegen_passes; here, how a flagged loop is printed)
    source = compile(single_group_plan(_reduction_graph(op)), "c").kernels[0].source
    loops = _simd_loops(source)
    assert loops and all("fl_maxf" not in loop and "fl_minf" not in loop for loop in loops)
    assert re.search(r"if \(s\d+_nan\) s\d+ = NAN;", source)


@pytest.mark.parametrize("op,np_op", [("reduce_max", np.max), ("reduce_min", np.min)])
def test_simd_max_min_keep_nan_at_every_position(op, np_op):
    compiled = compile(single_group_plan(_reduction_graph(op)), "c")
    for pos in range(COLS):
        x = np.linspace(-3, 3, ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS)
        x[pos % ROWS, pos] = np.nan
        got = compiled.run({"x": x})[compiled.graph.outputs[0]].reshape(ROWS)
        want = np_op(x, axis=-1)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"NaN at column {pos}")
        np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)])


@pytest.mark.parametrize("op,np_op", [("reduce_max", np.max), ("reduce_min", np.min)])
def test_simd_max_min_of_infinities_and_extremes(op, np_op):
    compiled = compile(single_group_plan(_reduction_graph(op)), "c")
    x = np.full((ROWS, COLS), -np.inf if op == "reduce_max" else np.inf, np.float32)
    x[1, 7] = np.float32(3.4e38)
    x[2, :] = np.float32(-3.4e38)
    x[3, 100] = -x[3, 100]
    x[4, 200] = np.float32(1e-45)
    x[5, :] = np.float32(-0.0)
    got = compiled.run({"x": x})[compiled.graph.outputs[0]].reshape(ROWS)
    np.testing.assert_array_equal(got, np_op(x, axis=-1))


def _row_block(kind: str, rows: int = ROWS):
    b = GraphBuilder(kind)
    x = b.input("x", (rows, COLS))
    if kind == "layer_norm":
        gamma = b.constant(np.linspace(0.5, 1.5, COLS, dtype=np.float32))
        beta = b.constant(np.linspace(-1, 1, COLS, dtype=np.float32))
        b.output(layer_norm(b, x, gamma, beta))
    else:
        b.output(softmax(b, x, log=kind == "log_softmax"))
    return b.build()


def _hard_rows() -> np.ndarray:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    x[0] *= 80                               # exp of -160..0: subnormal and zero terms
    x[1, ::3] = -np.inf                      # masked entries
    x[2] += 1e4                              # large offset, small spread
    x[3, 5] = np.nan
    x[4, 9] = np.inf
    x[5] = np.float32(-1e30)                 # a constant row
    return x


@pytest.mark.parametrize("kind", ["softmax", "log_softmax"])
@pytest.mark.parametrize("fused", [True, False])
def test_row_reductions_with_infinities_nan_and_large_magnitudes_match_reference(kind, fused):
    graph = _row_block(kind)
    plan = single_group_plan(graph) if fused else per_node_plan(graph)
    x = _hard_rows()
    got = compile(plan, "c").run({"x": x})[graph.outputs[0]]
    with np.errstate(all="ignore"):
        want = reference.run(graph, {"x": x})[graph.outputs[0]]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_fused_softmax_is_three_passes_over_a_row_with_inline_exp():
    plans = [f.plan for f in planned_loops(single_group_plan(_row_block("softmax")))]
    assert [p.pragma for p in plans].count("simd") == 3  # max, exp + sum, divide: exp once per element
    source = compile(single_group_plan(_row_block("softmax")), "c").kernels[0].source
    assert "fl_expf(" in source and "expf(" not in source.replace("fl_expf(", "")


def test_a_planned_prefetch_is_printed_after_the_first_pass():
    # (which rows, how far ahead: test_codegen_passes)
    source = compile(single_group_plan(_row_block("layer_norm", 128)), "c").kernels[0].source
    passes = [m.start() for m in re.finditer("#pragma omp simd", source)]
    assert len(passes) == 3 and passes[0] < source.index("__builtin_prefetch(&p0[") < passes[1]


def test_fused_layer_norm_matches_reference_on_large_offsets():
    graph = _row_block("layer_norm")
    x = np.random.default_rng(4).standard_normal((ROWS, COLS)).astype(np.float32) + 100
    got = compile(single_group_plan(graph), "c").run({"x": x})[graph.outputs[0]]
    want = reference.run(graph, {"x": x})[graph.outputs[0]]
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)


def _sum_graph(op: str, shape, axes, dtype="float32"):
    b = GraphBuilder(op)
    x = b.input("x", shape, dtype)
    b.output(b.op(op, x, axes=axes))
    return b.build()


def test_split_sum_loops_are_printed_as_four_interleaved_accumulators_combined_pairwise():
    # (which loops split: test_codegen_passes)
    source = compile(single_group_plan(_row_block("layer_norm")), "c").kernels[0].source
    splits = re.findall(r"reduction\(fl_add:(s\d+), \1_1, \1_2, \1_3\)\n\s*for \(int64_t c1 = 0; c1 <= 63; c1 \+= 1\)",
                        source)
    assert len(splits) == 2  # the mean and the variance
    for acc in splits:
        assert f"{acc} = (({acc} + {acc}_1) + ({acc}_2 + {acc}_3));" in source
        # (fl_add and -0.0: a sum of -0.0s stays -0.0)
        assert f"float {acc}_1 = -0.0f, {acc}_2 = -0.0f, {acc}_3 = -0.0f;" in source
    assert "(c1 + 64)" in source and "(c1 + 128)" in source and "(c1 + 192)" in source


@pytest.mark.parametrize("openmp", [False, True])
@pytest.mark.parametrize("op,dtype", [("reduce_sum", "float32"), ("reduce_sum", "float64"),
                                      ("reduce_prod", "float32"), ("reduce_mean", "float32")])
def test_split_reductions_match_reference_with_a_value_carried_in(op, dtype, openmp, monkeypatch):
    # over two axes the simd loop's accumulator arrives holding the previous rows' result;
    # with OpenMP each thread's rows get their own copies (shared even at this small size)
    monkeypatch.setattr(codegen_passes, "PARALLEL_MIN_ELEMENTS", 0)
    graph = _sum_graph(op, (3, 5, 256), [-2, -1], dtype)
    plans = [f.plan for f in planned_loops(single_group_plan(graph), openmp=openmp)]
    assert ("parallel" in [p.pragma for p in plans]) == openmp and any(p.split_streams > 1 for p in plans)
    compiled = compile(single_group_plan(graph), "c", openmp=openmp)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 5, 256)).astype(dtype)
    if op == "reduce_prod":
        x = (1 + x / 200).astype(dtype)
    x[1, 2, 100] = np.inf
    x[2, 4, 255] = np.nan
    got = compiled.run({"x": x})[graph.outputs[0]]
    want = reference.run(graph, {"x": x})[graph.outputs[0]]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@st.composite
def _long_reductions(draw):
    """A float sum, mean or product over axes that include a long last axis (some lengths
    split into four streams, some not), of the input or of an elementwise function of it."""
    cols = draw(st.sampled_from([128, 132, 256, 258, 384]))
    shape = (draw(st.integers(1, 3)), draw(st.integers(1, 3)), cols)
    axes = [2] + draw(st.lists(st.sampled_from([0, 1]), unique=True, max_size=2))
    op = draw(st.sampled_from(["reduce_sum", "reduce_mean", "reduce_prod"]))
    dtype = draw(st.sampled_from(["float32", "float64"]))
    pre = draw(st.sampled_from(["x", "square", "shift"]))
    b = GraphBuilder("long_reduction")
    x = b.input("x", shape, dtype)
    v = {"x": x, "square": lambda: b.mul(x, x), "shift": lambda: b.sub(x, b.constant(np.asarray(0.25, dtype)))}[pre]
    b.output(b.op(op, v if isinstance(v, str) else v(), axes=axes, keepdims=draw(st.sampled_from([0, 1]))))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    values = rng.standard_normal(shape) * (0.01 if op == "reduce_prod" else draw(st.sampled_from([1.0, 1e3])))
    values = values + (1.0 if op == "reduce_prod" else 0.0)
    flat = values.reshape(-1)
    for special in draw(st.lists(st.sampled_from([np.inf, -np.inf, np.nan]), max_size=2)):
        flat[draw(st.integers(0, flat.size - 1))] = special
    return b.build(), {"x": values.astype(dtype)}


@given(_long_reductions())
def test_long_reductions_split_or_not_match_reference(case):
    graph, feeds = case
    got = compile(single_group_plan(graph), "c").run(feeds)[graph.outputs[0]]
    with np.errstate(all="ignore"):
        want = reference.run(graph, feeds)[graph.outputs[0]]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.abs(want[np.isfinite(want)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * scale)


def _row_divided_by_its_sum(rows):
    b = GraphBuilder("divide")
    x = b.input("x", rows.shape)
    b.output(b.div(x, b.reduce_sum(x, axes=[1], keepdims=1)))
    return b.build(), {"x": rows}


SPECIAL_ROWS = {  # each row's sum, and so the divisor: normal, zero, inf, NaN, subnormal, near the top
    "normal": [1.5, -0.25, 3.0, 0.125], "zero": [1.0, -1.0, 2.0, -2.0], "inf": [np.inf, 1.0, 2.0, 3.0],
    "nan": [np.nan, 1.0, 2.0, 3.0], "subnormal": [1e-41, 2e-41, 0.0, 3e-41], "huge": [4e37, 4e37, 4e37, 4e37],
}


def test_on_cuda_dividing_by_a_row_scalar_multiplies_by_its_reciprocal_and_keeps_every_special_divisor_exact():
    """softmax's last pass multiplies by 1 / sum, hoisted; a divisor that is not normal, or
    whose reciprocal is not, takes the loop that divides, so specials match the reference
    exactly. (The C target keeps the division: see codegen_passes.plan_reciprocals.)"""
    rows = np.array(list(SPECIAL_ROWS.values()), np.float32)
    graph, feeds = _row_divided_by_its_sum(rows)
    compiled = compile(single_group_plan(graph), "cuda-emu")
    # the printed contract: a multiplying loop and the dividing one it falls back to
    assert re.search(r"\*fl_rcp\d+;", compiled.sources) and re.search(r"/s\d+;", compiled.sources)
    got = compiled.run(feeds)[graph.outputs[0]]
    with np.errstate(all="ignore"):
        want = reference.run(graph, feeds)[graph.outputs[0]]
    normal = list(SPECIAL_ROWS).index("normal")
    np.testing.assert_allclose(got[normal], want[normal], rtol=2e-7)
    special = [k for k in range(len(rows)) if k != normal]
    np.testing.assert_array_equal(got[special], want[special])  # NaN where NaN, inf where inf, the same values


def test_softmax_on_cuda_multiplies_by_the_reciprocal_of_the_row_sum():
    b = GraphBuilder("softmax")
    x = b.input("x", (64, 512))
    b.output(softmax(b, x))
    graph = b.build()
    assert any(f.plan.reciprocals for f in planned_loops(single_group_plan(graph), "cuda"))
    compiled = compile(single_group_plan(graph), "cuda-emu")
    feeds = {"x": np.random.default_rng(0).standard_normal((64, 512)).astype(np.float32) * 4}
    np.testing.assert_allclose(compiled.run(feeds)[graph.outputs[0]], reference.run(graph, feeds)[graph.outputs[0]],
                               rtol=1e-6, atol=1e-9)
