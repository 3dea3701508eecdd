"""The C template folds a matmul's batch into M when every batch element multiplies the
same B (a weight: B's batch strides 0) and A's and C's rows run on over the batch: one GEMM
of m * batch rows, B packed once (``plan_matmul``). Folded matmuls with every epilogue kind
(reading the batch and row coordinates back from the folded row) against the reference
interpreter, one and two threads alike, and the fold planned for a shared B only."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers import check_one_and_two_threads

import fusionlang
from fusionlang import reference
from fusionlang.backend import gemm_template, template
from fusionlang.backend.gemm_template import GemmProblem, Operand, plan_matmul
from fusionlang.ops import GraphBuilder


@pytest.fixture(autouse=True)
def _small_problems_use_the_template(monkeypatch):
    # the tests' shapes are tiny; in production a GEMM this small stays a loop nest
    monkeypatch.setattr(template, "MIN_MACS", 0)
    monkeypatch.setattr(gemm_template, "PARALLEL_MIN_MACS", 0)  # two threads share even these


def _problems(graph) -> list[GemmProblem]:
    plan = fusionlang.fuse(graph, "apollo")
    return [tg.problem for g in plan.groups
            if (tg := template.plan_template(plan, g, dict(graph.constants))) is not None]


#: epilogues over C [*batch, m, n]: a bias by column, one by batch element and row (read
#: through the folded row's coordinates), a residual, activations
EPILOGUES = ["bias", "row_bias", "batch_bias", "residual", "relu", "tanh"]


@st.composite
def shared_weight_matmul(draw):
    """x [*batch, m, k] . w [k, n] (a constant or an input, 2-D or [1, k, n]) with random
    epilogues; (graph, feeds, batch)."""
    batch = draw(st.sampled_from([(2,), (3,), (2, 3), (1, 3)]))
    m, n, k = draw(st.integers(1, 13)), draw(st.integers(9, 70)), draw(st.integers(9, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    b = GraphBuilder("fold")
    feeds = {"x": rng.standard_normal(batch + (m, k)).astype(np.float32)}
    x = b.input("x", batch + (m, k))
    w_shape = draw(st.sampled_from([(k, n), (1, k, n)]))
    if draw(st.booleans()):
        w = b.constant(rng.standard_normal(w_shape).astype(np.float32))
    else:
        feeds["w"] = rng.standard_normal(w_shape).astype(np.float32)
        w = b.input("w", w_shape)
    y = b.op("matmul", x, w)
    shape = batch + (m, n)
    shapes = {"bias": (n,), "row_bias": (m, 1), "batch_bias": batch + (m, 1), "residual": shape}
    for op in draw(st.lists(st.sampled_from(EPILOGUES), max_size=3)):
        if op in shapes:
            y = b.op("add", y, b.constant(rng.standard_normal(shapes[op]).astype(np.float32)))
        else:
            y = b.op(op, y)
    b.output(y)
    return b.build(), feeds, batch


@settings(max_examples=25, deadline=None)
@given(case=shared_weight_matmul())
def test_folded_matmuls_match_the_reference_on_one_and_two_threads(case):
    graph, feeds, batch = case
    (problem,) = _problems(graph)
    m = feeds["x"].shape[-2]
    assert problem.outer == () and problem.m == m * int(np.prod(batch))
    check_one_and_two_threads(graph, feeds)


def _matmul(x_shape, w_shape):
    b = GraphBuilder("mm")
    b.output(b.op("matmul", b.input("x", x_shape), b.input("w", w_shape)))
    return b.build()


@pytest.mark.parametrize("x_shape,w_shape,rows", [
    ((4, 64, 32), (32, 80), 256),          # Llama's LM head: one weight for the batch
    ((2, 3, 5, 32), (1, 32, 80), 30),      # two batch dims, B broadcast over both
    ((1, 7, 7, 32), (32, 80), 49),         # ConvNeXt's channels-last Linear: a batch of 1 first
    ((4, 64, 32), (4, 32, 80), None),      # a B per batch element: batched, as before
    ((1, 64, 32), (3, 32, 80), None),      # A broadcast: its rows do not run on
])
def test_the_batch_folds_into_m_only_when_every_element_shares_b(x_shape, w_shape, rows):
    (problem,) = _problems(_matmul(x_shape, w_shape))
    if rows is None:
        assert problem.outer != () and problem.m == x_shape[-2]
    else:
        assert problem.outer == () and problem.m == rows


def test_a_folded_matmul_is_one_gemm_over_the_batch():
    rng = np.random.default_rng(4)
    graph = _matmul((4, 16, 32), (32, 80))
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c", profile=True)
    (kernel,) = compiled.kernels
    assert kernel.detail == "GEMM m=64 n=80 k=32"
    feeds = {"x": rng.standard_normal((4, 16, 32)).astype(np.float32),
             "w": rng.standard_normal((32, 80)).astype(np.float32)}
    np.testing.assert_allclose(compiled.run(feeds)[graph.outputs[0]], reference.run(graph, feeds)[graph.outputs[0]],
                               rtol=2e-4, atol=2e-4)


def test_plan_matmul_keeps_strided_rows_batched():
    # C's rows with a gap between batch elements (a slice of a wider output) do not run on
    problem = GemmProblem(8, 16, 4, Operand(4, 1, 0, (32,)), Operand(16, 1, 0, (0,)), Operand(16, 1, 0, (160,)), (3,))
    assert plan_matmul(problem) is problem
    run_on = GemmProblem(8, 16, 4, Operand(4, 1, 0, (32,)), Operand(16, 1, 0, (0,)), Operand(16, 1, 0, (128,)), (3,))
    assert plan_matmul(run_on) == GemmProblem(24, 16, 4, Operand(4, 1), Operand(16, 1), Operand(16, 1))
