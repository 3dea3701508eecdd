"""Prologue inlining: an elementwise chain into a conv, gemm, matmul or pool is recomputed
inside the consumer's reads, so the group is one loop nest (``poly.inline_producers``);
and a FeedbackCheck remembers verdicts by group structure.

The shapes are small so the emulated CUDA runs in seconds; small groups count as one nest
whatever their loops (``fusion.SMALL_GROUP``), so that allowance is switched off here and
the groups must really fuse.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import groups_plan, random_feeds

import fusionlang.backend as backend
import fusionlang.backend.feedback as feedback
import fusionlang.backend.fusion as fusion
from fusionlang import reference
from fusionlang.backend.poly import build_program
from fusionlang.backend.runtime import lower_plan
from fusionlang.backend.schedule import select_tree
from fusionlang.engine.plan import single_group_plan
from fusionlang.ops import GraphBuilder

RNG = np.random.default_rng(7)


def weights(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.fixture(autouse=True)
def no_small_group_allowance(monkeypatch):
    monkeypatch.setattr(fusion, "SMALL_GROUP", 0)


# ----- the blocks: each reads its own inputs and returns its output ---------------------


def batch_norm_relu(b, x, channels):
    y = b.mul(b.sub(x, b.constant(weights(channels, 1, 1))), b.constant(weights(channels, 1, 1)))
    return b.relu(b.add(y, b.constant(weights(channels, 1, 1))))


# ``n`` sizes the outputs: the CPU tests use sizes where loop fusion alone fails, the
# emulated CUDA (a barrier-synchronized OS thread per CUDA thread) smaller ones


def conv_padded(b, n=6):
    x = b.input(b.graph.fresh_name("x"), (1, 4, n, n))
    return b.conv(batch_norm_relu(b, x, 4), b.constant(weights(3, 4, 3, 3)), pads=[1, 1, 1, 1])


def conv_strided(b, n=7):
    x = b.input(b.graph.fresh_name("x"), (1, 4, n, n))
    return b.conv(batch_norm_relu(b, x, 4), b.constant(weights(3, 4, 3, 3)), b.constant(weights(3)),
                  pads=[1, 0, 2, 1], strides=[2, 2])


def conv_grouped(b, n=5):
    x = b.input(b.graph.fresh_name("x"), (1, 4, n, n))
    return b.conv(batch_norm_relu(b, x, 4), b.constant(weights(4, 2, 3, 3)), pads=[1, 1, 1, 1], group=2)


def gemm_elementwise_b(b, n=16):
    x = b.input(b.graph.fresh_name("x"), (16, n))
    y = b.relu(b.mul(x, b.constant(weights(n))))
    return b.gemm(b.constant(weights(n, 16)), y, b.constant(weights(n)))


def matmul_elementwise_b(b, n=16):
    x = b.input(b.graph.fresh_name("x"), (16, n))
    return b.matmul(b.constant(weights(n, 16)), b.tanh(x))


def transpose_matmul(b, n=16):
    # attention's scores: (q * s) @ transpose(k * s)
    q = b.input(b.graph.fresh_name("q"), (1, n, 16))
    k = b.input(b.graph.fresh_name("k"), (1, n, 16))
    scale = b.constant(np.float32(0.25))
    return b.matmul(b.mul(q, scale), b.transpose(b.mul(k, scale), perm=[0, 2, 1]))


def max_pool_chain(b, n=9):
    x = b.input(b.graph.fresh_name("x"), (1, 3, n, n))
    y = b.relu(b.mul(x, b.constant(weights(3, 1, 1))))
    return b.max_pool(y, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])


def average_pool_chain(b, n=9):
    x = b.input(b.graph.fresh_name("x"), (1, 3, n, n))
    y = b.sigmoid(b.add(x, b.constant(weights(3, 1, 1))))
    return b.average_pool(y, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0)


def padded_then_conv(b, n=6):
    # the pad's border (1.5) is not neutral for the conv: the inlined relu must not reach it
    x = b.input(b.graph.fresh_name("x"), (1, 3, n, n))
    y = b.pad(b.relu(b.add(x, b.constant(weights(3, 1, 1)))), pads=[0, 0, 1, 2, 0, 0, 2, 1], value=1.5)
    return b.conv(y, b.constant(weights(2, 3, 3, 3)), pads=[1, 1, 1, 1])


BLOCKS = {f.__name__: f for f in (conv_padded, conv_strided, conv_grouped, gemm_elementwise_b,
                                  matmul_elementwise_b, transpose_matmul, max_pool_chain,
                                  average_pool_chain, padded_then_conv)}
#: blocks whose statements share no loop on the CPU unless the prologue is inlined
NEEDS_INLINING_ON_CPU = {"conv_padded", "conv_strided", "conv_grouped", "gemm_elementwise_b",
                         "matmul_elementwise_b", "transpose_matmul", "padded_then_conv"}
#: sizes small enough for the emulated CUDA
TINY = {"conv_padded": 3, "conv_strided": 4, "conv_grouped": 3, "gemm_elementwise_b": 3,
        "matmul_elementwise_b": 3, "transpose_matmul": 3, "max_pool_chain": 5, "average_pool_chain": 5,
        "padded_then_conv": 2}


def one_block(name):
    b = GraphBuilder(name)
    b.output(BLOCKS[name](b))
    return b.build()


def all_blocks(sizes=None):
    """Every block in one graph, each its own group (one compile for all of them)."""
    b = GraphBuilder("blocks")
    groups = []
    for name, build in BLOCKS.items():
        first = len(b.graph.nodes)
        b.output(build(b) if sizes is None else build(b, sizes[name]))
        groups.append([n.name for n in b.graph.nodes[first:]])
    graph = b.build()
    return groups_plan(graph, groups)


def assert_matches_reference(compiled, plan):
    feeds = random_feeds(plan.graph)
    got, want = compiled.run(feeds), reference.run(plan.graph, feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5, err_msg=name)


# ----- tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_check_group_accepts_the_block(name):
    graph = one_block(name)
    names = [n.name for n in graph.nodes]
    assert backend.check_group(graph, names) is None
    plain, _, _ = select_tree(build_program(graph, names), "c")
    assert (plain.nests > 1) == (name in NEEDS_INLINING_ON_CPU)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_blocks_compile_to_one_kernel_each_and_match_the_reference(target):
    plan = all_blocks(TINY if target == "cuda-emu" else None)
    # the loop-nest path (on the C target conv and matmul groups otherwise run as the GEMM
    # template, which takes prologues as a nest of their own: tests/backend/test_template.py)
    compiled = backend.compile(plan, target, templates=False)
    assert compiled.stats.kernels == len(BLOCKS)
    assert all(k.nests == 1 for k in compiled.kernels)
    assert_matches_reference(compiled, plan)


def test_blocks_match_the_reference_through_the_gemm_template(monkeypatch):
    from fusionlang.backend import template

    monkeypatch.setattr(template, "MIN_MACS", 0)
    plan = all_blocks()
    compiled = backend.compile(plan, "c")
    assert "gemm template" in [k.strategy for k in compiled.kernels]
    assert_matches_reference(compiled, plan)


def test_inlining_is_a_fallback_on_the_cpu_and_feeds_every_thread_on_the_gpu():
    plan = all_blocks()
    names = list(BLOCKS)
    cpu, _, _ = lower_plan(plan, "c")
    gpu, _, _ = lower_plan(plan, "cuda")
    for k, group in enumerate(plan.groups):
        # on the CPU the pools fuse without recompute (shifted placement)
        assert bool(cpu[group.id].prog.inlined) == (names[k] in NEEDS_INLINING_ON_CPU), names[k]
        # on the GPU every output point gets its own thread
        assert gpu[group.id].prog.inlined, names[k]
        assert gpu[group.id].scheduled.tree.outer_depth >= 2, names[k]


def test_padding_yields_the_pad_not_the_inlined_prologue():
    b = GraphBuilder("pad_value")
    x = b.input("x", (1, 2, 5, 5))
    y = b.relu(b.add(b.sub(x, b.constant(np.full((2, 1, 1), -1.0, np.float32))), np.float32(1.0)))
    b.output(b.conv(y, b.constant(np.ones((1, 2, 3, 3), np.float32)), pads=[1, 1, 1, 1]))
    graph = b.build()
    feeds = {"x": np.zeros((1, 2, 5, 5), np.float32)}  # relu(0 + 1 + 1) = 2 inside, 0 in the padding
    got = next(iter(backend.compile(single_group_plan(graph), "c").run(feeds).values()))
    assert got[0, 0, 0, 0] == 2 * 2 * 4 and got[0, 0, 2, 2] == 2 * 2 * 9


def test_generated_cuda_compiles_with_nvrtc():
    missing = backend.nvrtc_available()
    if missing is not None:
        pytest.skip(f"NVRTC CANNOT BE LOADED, generated CUDA is NOT compiled: {missing}")
    sources = backend.cuda_sources(all_blocks())
    assert len(sources) == len(BLOCKS)
    for name, source in sources.items():
        assert ".entry" in backend.nvrtc_compile(source), name


def test_a_prologue_used_after_the_group_is_not_inlined():
    b = GraphBuilder("shared")
    x = b.input("x", (1, 4, 6, 6))
    y = batch_norm_relu(b, x, 4)
    b.output(b.conv(y, b.constant(weights(5, 4, 3, 3)), pads=[1, 1, 1, 1]), y)
    graph = b.build()
    prog = build_program(graph, [n.name for n in graph.nodes], inline=True)
    assert prog.inlined == prog.inlinable and graph.nodes[-2].name not in prog.inlined  # the relu is an output
    assert backend.check_group(graph, [n.name for n in graph.nodes]) is not None


def test_a_prologue_read_at_its_own_point_stays_a_statement():
    # the add reads relu(x) where it writes: contraction fuses that, recompute would not help
    b = GraphBuilder("own_point")
    x = b.input("x", (1, 4, 6, 6))
    y = b.relu(x)
    b.output(b.add(b.conv(y, b.constant(weights(4, 4, 3, 3)), pads=[1, 1, 1, 1]), y))
    graph = b.build()
    assert build_program(graph, [n.name for n in graph.nodes], inline=True).inlined == ()


# ----- verdicts remembered by structure ---------------------------------------------------


def two_layers(**second):
    """Two bn-relu-conv layers alike but for their weights (and the second's ``second`` attributes)."""
    b = GraphBuilder("layers")
    x = b.input("x", (1, 4, 6, 6))
    first = b.conv(batch_norm_relu(b, x, 4), b.constant(weights(4, 4, 3, 3)), pads=[1, 1, 1, 1])
    middle = b.exp(first)
    second = b.conv(batch_norm_relu(b, middle, 4), b.constant(weights(4, 4, 3, 3)), pads=[1, 1, 1, 1], **second)
    b.output(second)
    graph = b.build()
    names = [n.name for n in graph.nodes]
    cut = names.index(middle)
    return graph, names[:cut], names[cut + 1:]


def test_identical_layers_are_scheduled_once():
    graph, first, second = two_layers()
    assert feedback.group_signature(graph, first) == feedback.group_signature(graph, second)
    check = feedback.FeedbackCheck()
    assert check(graph, first) is None
    assert check(graph, second) is None
    assert check.store.search_count == 1


def test_a_different_attribute_or_wiring_is_a_different_signature():
    graph, first, second = two_layers(strides=[2, 2])
    assert feedback.group_signature(graph, first) != feedback.group_signature(graph, second)
    b = GraphBuilder("wiring")
    x, y = b.input("x", (8,)), b.input("y", (8,))
    square, product = b.mul(x, x), b.mul(x, y)
    b.output(square, product)
    graph = b.build()
    assert feedback.group_signature(graph, [square]) != feedback.group_signature(graph, [product])


def test_a_remembered_refusal_names_the_group_asked_about():
    b = GraphBuilder("refusals")
    x = b.input("x", (1, 4, 6, 6))
    outs = []
    for _ in range(2):  # a prologue used after its group cannot be inlined: refused twice
        y = batch_norm_relu(b, x, 4)
        outs += [b.conv(y, b.constant(weights(5, 4, 3, 3)), pads=[1, 1, 1, 1]), y]
    b.output(*outs)
    graph = b.build()
    names = [n.name for n in graph.nodes]
    half = len(names) // 2
    check = feedback.FeedbackCheck()  # one check remembers the first verdict by the group's structure
    first, second = check(graph, names[:half]), check(graph, names[half:])
    assert first is not None and second is not None
    assert f"{names[0]} (" in first and f"{names[half]} (" in second and f"{names[0]} (" not in second
