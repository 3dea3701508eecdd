"""Layer I: which loops a group's statements share, and that what is fused stays correct."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import gelu, layer_norm, random_feeds, softmax

import fusionlang.backend as backend
from fusionlang import reference
from fusionlang.backend.fusion import moved_dims
from fusionlang.backend.poly import build_program
from fusionlang.backend.runtime import lower_group
from fusionlang.backend.schedule import schedule_program
from fusionlang.engine.plan import single_group_plan
from fusionlang.ops import GraphBuilder


def compile_and_check(graph, feeds=None, rtol=1e-4, atol=1e-5, **options):
    feeds = feeds if feeds is not None else random_feeds(graph)
    compiled = backend.compile(single_group_plan(graph), **options)
    got, want = compiled.run(feeds), reference.run(graph, feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=atol, err_msg=name)
    return compiled


def storage_kinds(graph) -> dict[str, str]:
    """Where each intermediate value of a single-group plan lives."""
    plan = single_group_plan(graph)
    lowered = lower_group(plan, plan.groups[0])
    return {a.value: lowered.storage[a.id].kind for a in lowered.prog.arrays if a.value and a.role == "temp"}


def block(name, shape, build):
    b = GraphBuilder(name)
    x = b.input("x", shape)
    b.output(build(b, x))
    return b.build()


NORMALIZERS = {
    "softmax": lambda b, x: softmax(b, x),
    "log_softmax": lambda b, x: softmax(b, x, log=True),
    "layer_norm": lambda b, x: layer_norm(b, x, b.constant(np.linspace(0.5, 1.5, 48, dtype=np.float32)),
                                          b.constant(np.linspace(-1, 1, 48, dtype=np.float32))),
    "gelu": lambda b, x: gelu(b, x),
}


@pytest.mark.parametrize("name", sorted(NORMALIZERS))
def test_block_compiles_to_one_loop_nest_and_matches(name):
    graph = block(name, (16, 48), NORMALIZERS[name])
    compiled = compile_and_check(graph)
    (kernel,) = compiled.kernels
    assert kernel.nests == 1, kernel.source
    assert compiled.stats.kernels == 1
    # nothing but the input and the output is ever allocated
    arena = [b.value for b in compiled.buffers.buffers.values() if b.kind == "arena"]
    assert arena == graph.outputs
    assert compiled.stats.intermediates_never_allocated == len(graph.nodes) - 1
    # the C has exactly one outermost loop
    body = kernel.source.split("{", 1)[1]
    assert sum(1 for line in body.splitlines() if line.startswith("  for ")) == 1


def test_softmax_rows_are_reduced_in_registers():
    graph = block("softmax", (8, 32), NORMALIZERS["softmax"])
    kinds = storage_kinds(graph)
    # the row max and row sum are scalars; exp is kept for one row only (a local row buffer)
    assert sorted(kinds.values()).count("scalar") >= 3
    assert all(kind in ("scalar", "local") for kind in kinds.values())
    assert compile_and_check(graph).kernels[0].strategy == "fused(outer=1)"


def apollo_pool_graph(kernel=2, stride=2, pads=(0, 0, 0, 0), size=8):
    b = GraphBuilder("apollo_pool")
    x = b.input("x", (2, 3, size, size))
    a = b.add(x, b.constant(np.arange(3, dtype=np.float32).reshape(1, 3, 1, 1)), name="bias_add")
    b.output(b.max_pool(a, kernel_shape=[kernel, kernel], strides=[stride, stride], pads=list(pads)))
    return b.build()


def test_apollo_pool_example_fuses_with_a_shifted_schedule():
    graph = apollo_pool_graph()
    compiled = compile_and_check(graph)
    (kernel,) = compiled.kernels
    assert kernel.nests == 1
    assert "shifted" in kernel.strategy
    # the bias-add result is consumed where it is produced: a scalar, never stored
    assert storage_kinds(graph)["bias_add"] == "scalar"


@pytest.mark.parametrize("kernel,stride,pads", [(3, 2, (1, 1, 1, 1)), (3, 1, (0, 0, 0, 0)), (2, 1, (1, 0, 1, 0))])
def test_overlapping_windows_fuse_shifted_and_match(kernel, stride, pads):
    compiled = compile_and_check(apollo_pool_graph(kernel, stride, pads, size=9))
    assert compiled.kernels[0].nests == 1


def test_gpu_schedule_keeps_every_output_point_in_the_outer_band():
    graph = apollo_pool_graph()
    prog = build_program(graph, [n.name for n in graph.nodes])
    scheduled = schedule_program(prog, "cuda")
    assert "shifted" not in scheduled.tree.strategy and scheduled.nests == 1


def conv_graph(trans=False):
    b = GraphBuilder("conv_block")
    x = b.input("x", (1, 4, 9, 9))
    w = b.constant(np.random.default_rng(1).standard_normal((6, 4, 3, 3)).astype(np.float32))
    c = b.conv(x, w, b.constant(np.ones(6, np.float32)), pads=[1, 1, 1, 1], name="conv")
    r = b.relu(b.add(c, b.constant(np.float32(0.5))))
    b.output(r)
    return b.build()


def test_conv_epilogue_fuses_and_the_cpu_moves_the_row_inside_the_reduction():
    graph = conv_graph()
    compiled = compile_and_check(graph, rtol=1e-4, atol=1e-4)
    assert compiled.kernels[0].nests == 1
    prog = build_program(graph, [n.name for n in graph.nodes])
    moved = moved_dims(prog)
    assert [d.name for d in moved.values()] == ["i3"]  # ow: unit stride for x, invariant for w
    assert storage_kinds(graph)["conv"] == "scalar"


@pytest.mark.parametrize("trans_b,moves", [(0, True), (1, False)])
def test_gemm_loop_order_follows_strides(trans_b, moves):
    b = GraphBuilder("gemm")
    x = b.input("x", (3, 40))
    w = np.ones((40, 24) if not trans_b else (24, 40), np.float32)
    b.output(b.gemm(x, b.constant(w), trans_b=trans_b))
    graph = b.build()
    prog = build_program(graph, [n.name for n in graph.nodes])
    assert bool(moved_dims(prog)) == moves
    compile_and_check(graph)


def lrn_graph(shape=(1, 12, 9, 13)):
    b = GraphBuilder("lrn")
    b.output(b.op("lrn", b.input("x", shape), size=5, alpha=1e-4, beta=0.75, bias=2.0))
    return b.build()


def test_a_window_sum_across_channels_moves_the_row_inside_its_taps():
    # LRN sums 5 channels a plane apart: the contiguous row goes inside the taps (a vector
    # loop), even one nest per statement (the part before a pooling template)
    graph = lrn_graph()
    prog = build_program(graph, [n.name for n in graph.nodes])
    assert moved_dims(prog) == {}  # in a fused tree it would cost the shared outer band
    assert [d.name for d in moved_dims(prog, windows=True).values()] == ["i3"]
    # (as loop nests: the C target runs an LRN alone as the LRN template, backend.lrn_template)
    compiled = compile_and_check(graph, fuse=False, templates=False)
    assert compiled.kernels[0].strategy == "distributed, reduction outside"
    # fused, one op's statements share the plane's rows and the taps run inside each row
    fused = compile_and_check(graph, templates=False).kernels[0]
    assert (fused.strategy, fused.nests) == ("fused(outer=2)", 1)
    assert compile_and_check(graph).kernels[0].strategy == "lrn template"


def test_a_sum_along_the_contiguous_axis_keeps_its_order():
    b = GraphBuilder("rows")
    b.output(b.reduce_sum(b.input("x", (6, 40)), axes=[1]))
    graph = b.build()
    assert moved_dims(build_program(graph, [n.name for n in graph.nodes]), windows=True) == {}
    assert compile_and_check(graph, fuse=False).kernels[0].strategy == "distributed"


def test_global_reduction_then_broadcast_is_two_nests_and_reported():
    b = GraphBuilder("center")
    x = b.input("x", (256, 300))
    mean = b.reduce_mean(x, axes=[0, 1], keepdims=1)
    b.output(b.sub(x, mean))
    graph = b.build()
    reason = backend.check_group(graph, [n.name for n in graph.nodes])
    assert reason is not None and "\n" not in reason and "reduce_mean" in reason
    compiled = compile_and_check(graph, rtol=1e-4, atol=1e-4)
    assert compiled.kernels[0].nests == 2


def test_a_small_group_without_a_shared_loop_is_one_nest():
    # one softmax row: no outer loop to share, but one GPU block runs it whole
    graph = block("softmax_row", (1, 1000), NORMALIZERS["softmax"])
    assert backend.check_group(graph, [n.name for n in graph.nodes]) is None
    assert compile_and_check(graph).kernels[0].nests == 1


def test_dimensions_a_dependence_crosses_are_left_inside():
    # LRN reads neighbouring channels of the pool output: the channel loop cannot be
    # shared, the spatial ones can (found by the greedy outer band)
    b = GraphBuilder("pool_lrn")
    x = b.input("x", (1, 16, 40, 40))
    p = b.max_pool(x, kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    b.output(b.lrn(p, size=5, alpha=1e-3, beta=0.75, bias=1.0))
    graph = b.build()
    assert backend.check_group(graph, [n.name for n in graph.nodes]) is None
    # (the loop nest, not the pooling template the C target runs such a pool as)
    compiled = compile_and_check(graph, rtol=1e-4, atol=1e-5, templates=False)
    assert compiled.kernels[0].nests == 1 and compiled.kernels[0].strategy.startswith("fused(outer=2")
    compile_and_check(graph, rtol=1e-4, atol=1e-5)


def test_an_illegal_fused_schedule_is_rejected_by_isl():
    # z[i] = y[i] + y[i+1]: the outer loop both reads identify would run z before y[i+1]
    b = GraphBuilder("stencil")
    x = b.input("x", (12,))
    y = b.relu(x, name="y")
    shifted = b.pad(b.slice(y, starts=[1], ends=[12], axes=[0]), pads=[0, 1])
    b.output(b.add(y, shifted))
    graph = b.build()
    prog = build_program(graph, [n.name for n in graph.nodes])
    scheduled = schedule_program(prog, "c")
    assert scheduled.rejected and "violates a dependence" in scheduled.rejected[0]
    compile_and_check(graph)


def test_rows_indexed_by_data_still_fuse_along_the_exact_dimension():
    b = GraphBuilder("gather_rows")
    x = b.input("x", (4, 8))
    y = b.relu(x)
    b.output(b.gather(y, b.constant(np.array([7, 0, 3], np.int64)), axis=1))
    graph = b.build()
    assert backend.check_group(graph, [n.name for n in graph.nodes]) is None
    compile_and_check(graph)


def test_fusion_disabled_gives_one_nest_per_statement():
    graph = block("softmax", (8, 32), NORMALIZERS["softmax"])
    compiled = compile_and_check(graph, fuse=False)
    assert compiled.kernels[0].strategy == "distributed"
    assert compiled.kernels[0].nests > 5


class _IndexCountedList(list):
    """A list that counts the searches for an element's position."""

    searches = 0

    def index(self, *args):
        self.searches += 1
        return super().index(*args)


def test_the_outer_band_does_not_search_the_statement_list_per_statement():
    """Choosing the statement that anchors the outer band looked up each candidate's
    position with list.index: quadratic in a concat of thousands of slices."""
    from fusionlang.backend.fusion import candidate_trees

    b = GraphBuilder("long_concat")
    x = b.input("x", (4,))
    b.output(b.concat(*[b.unsqueeze(b.relu(x), axes=(0,)) for _ in range(40)], axis=0))
    graph = b.build()
    prog = build_program(graph, [n.name for n in graph.nodes])
    prog.stmts = _IndexCountedList(prog.stmts)
    assert list(candidate_trees(prog))
    assert prog.stmts.searches == 0
