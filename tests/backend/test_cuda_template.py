"""The CUDA GEMM template (backend.cuda_gemm, backend.cuda_template) through the whole
pipeline, run on the CPU emulator (target "cuda-emu"): its FMA variant by default, its
tensor-core variant with mma.sync emulated across the warp (FUSIONLANG_EMU_TENSOR_CORES=1).
Conv (1-D and 2-D, every attribute), matmul (batched, broadcast) and gemm (transposes,
alpha, beta, c) with random epilogues, on shapes that are not multiples of any tile; and
the tensor-core kernels of resnet50 and a BERT layer compiled by NVRTC for sm_80 and sm_90."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from light import fused_plan
from test_template import conv_case, gemm_case, matmul_case

import fusionlang
import fusionlang.backend as backend
from fusionlang import reference
from fusionlang.backend import cuda_template, template
from fusionlang.backend.cuda_gemm import TILES, CudaTile, choose_tile
from fusionlang.backend.gemm_template import GemmProblem, Operand
from fusionlang.backend.runtime import lower_plan
from fusionlang.backend.runtime_cuda import build_cuda_program
from fusionlang.engine.plan import FusionPlan, make_groups, single_group_plan
from fusionlang.ops import GraphBuilder
from fusionlang.report.render import render_report

ODD = st.sampled_from([1, 2, 3, 5, 7, 13, 16, 17, 31, 33, 40])


@pytest.fixture(autouse=True)
def _small_problems_use_the_template(monkeypatch):
    monkeypatch.setattr(template, "MIN_MACS", 0)


def _check(graph, feeds, *, rtol=2e-4, atol=2e-4):
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "cuda-emu")
    assert any(k.strategy.startswith("GEMM template") for k in compiled.kernels), \
        [k.strategy for k in compiled.kernels]
    got, want = compiled.run(feeds), reference.run(graph, feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=atol, err_msg=name)
    return compiled


@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_conv_groups_every_attribute_with_random_epilogues(data):
    case = conv_case(data.draw, groups=st.integers(1, 2), channels=st.integers(2, 5))
    if case is not None:
        _check(*case)


@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_matmul_groups_with_batches_broadcasts_and_epilogues(data):
    _check(*matmul_case(data.draw, sizes=ODD))


@settings(max_examples=8, deadline=None)
@given(m=ODD, k=ODD, n=ODD, trans_a=st.integers(0, 1), trans_b=st.integers(0, 1),
       beta=st.sampled_from([0.0, 1.0, 2.0]), c_shape=st.sampled_from(["none", "row", "full"]))
def test_gemm_groups_with_transposes_alpha_beta_and_c(m, k, n, trans_a, trans_b, beta, c_shape):
    _check(*gemm_case(m, k, n, trans_a, trans_b, 0.5, beta, c_shape))


def _bias_relu_matmul(m, k, n, seed=0):
    rng = np.random.default_rng(seed)
    b = GraphBuilder("mm")
    x = b.input("x", (m, k))
    weight = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    y = b.relu(b.add(b.matmul(x, b.constant(weight)), b.constant(bias)))
    b.output(y)
    return b.build(), {"x": rng.standard_normal((m, k)).astype(np.float32)}, weight, bias, y


@pytest.mark.parametrize("tile", [t for t, _ in TILES], ids=lambda t: f"{t.bm}x{t.bn}")
def test_every_tile_of_the_table_computes_edges_and_epilogue(tile, monkeypatch):
    """Each tile shape, on a problem that leaves a partial tile in M, N and K."""
    monkeypatch.setattr(cuda_template, "choose_tile", lambda problem: tile)
    graph, feeds, *_ = _bias_relu_matmul(tile.bm + 3, 37, tile.bn + 5)
    compiled = _check(graph, feeds)
    assert any(k.strategy.startswith(f"GEMM template {tile.label},") for k in compiled.kernels)


def _tf32(a: np.ndarray) -> np.ndarray:
    """cvt.rna.tf32.f32: keep 10 mantissa bits, rounding half away from zero."""
    bits = a.astype(np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


@pytest.mark.parametrize("tile", [TILES[0][0], TILES[-1][0]], ids=["largest", "smallest"])
def test_the_tensor_core_path_emulated_at_tf32_matches_tf32_products(tile, monkeypatch):
    """With mma.sync emulated lane by lane, precision "tf32" gives the product of the
    TF32-rounded inputs to fp32 accuracy: a fragment register read from the wrong row or
    column (the m16n8k8 layout) would be off by whole products, far beyond this tolerance."""
    monkeypatch.setenv("FUSIONLANG_EMU_TENSOR_CORES", "1")
    monkeypatch.setattr(cuda_template, "choose_tile", lambda problem: tile)
    graph, feeds, weight, bias, y = _bias_relu_matmul(tile.bm + 9, 45, tile.bn + 3, seed=4)
    compiled = fusionlang.compile(single_group_plan(graph), "cuda-emu", precision="tf32")
    assert "tf32 on tensor cores" in compiled.kernels[0].strategy
    got = compiled.run(feeds)[y]
    want = np.maximum(_tf32(feeds["x"]).astype(np.float64) @ _tf32(weight).astype(np.float64) + bias, 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    exact = np.maximum(feeds["x"].astype(np.float64) @ weight + bias, 0)
    assert np.abs(got - exact).max() > 1e-4  # TF32 really was used (else this test checks the FMA path)


def test_the_default_precision_splits_operands_into_three_tf32_passes_as_accurate_as_fp32(monkeypatch):
    monkeypatch.setenv("FUSIONLANG_EMU_TENSOR_CORES", "1")
    graph, feeds, weight, bias, y = _bias_relu_matmul(70, 300, 41, seed=5)
    compiled = fusionlang.compile(single_group_plan(graph), "cuda-emu")
    assert "fp32 on tensor cores" in compiled.kernels[0].strategy
    got = compiled.run(feeds)[y]
    exact = np.maximum(feeds["x"].astype(np.float64) @ weight + bias, 0)
    fp32 = np.maximum(feeds["x"] @ weight + bias, 0)
    assert np.abs(got - exact).max() <= 4 * max(np.abs(fp32 - exact).max(), 1e-6)
    one_pass = fusionlang.compile(single_group_plan(graph), "cuda-emu", precision="tf32").run(feeds)[y]
    assert np.abs(one_pass - exact).max() > 10 * np.abs(got - exact).max()


def test_an_unknown_precision_is_a_clear_error():
    graph, *_ = _bias_relu_matmul(8, 8, 8)
    with pytest.raises(fusionlang.FuseError, match="precision='fp16': expected one of 'fp32', 'tf32'"):
        fusionlang.compile(single_group_plan(graph), "cuda-emu", precision="fp16")


def test_depthwise_convs_stay_loop_nests_on_cuda_and_compute_the_same():
    rng = np.random.default_rng(2)
    b = GraphBuilder("dw")
    x = b.input("x", (1, 6, 7, 7))
    y = b.relu(b.conv(x, b.constant(rng.standard_normal((6, 1, 3, 3)).astype(np.float32)), pads=(1, 1, 1, 1),
                      group=6))
    b.output(y)
    graph = b.build()
    feeds = {"x": rng.standard_normal((1, 6, 7, 7)).astype(np.float32)}
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "cuda-emu")
    assert not any(k.strategy.startswith("GEMM template") for k in compiled.kernels)
    np.testing.assert_allclose(compiled.run(feeds)[y], reference.run(graph, feeds)[y], rtol=2e-4, atol=2e-4)


def test_a_prologue_and_a_concat_run_as_kernels_around_the_template():
    rng = np.random.default_rng(1)
    b = GraphBuilder("parts")
    x = b.input("x", (1, 4, 5, 5))
    other = b.input("o", (1, 2, 5, 5))
    pre = b.relu(b.mul(x, b.constant(rng.standard_normal((1, 4, 1, 1)).astype(np.float32))))
    c = b.tanh(b.conv(pre, b.constant(rng.standard_normal((3, 4, 3, 3)).astype(np.float32)), pads=(1, 1, 1, 1)))
    y = b.sigmoid(b.concat(other, c, axis=1))
    b.output(y)
    graph = b.build()
    feeds = {"x": rng.standard_normal((1, 4, 5, 5)).astype(np.float32),
             "o": rng.standard_normal((1, 2, 5, 5)).astype(np.float32)}
    compiled = fusionlang.compile(single_group_plan(graph), "cuda-emu")
    (info,) = compiled.kernels
    # the prologue's and the concat's loop nests are kernels of their own, around the template
    assert info.strategy.startswith("GEMM template") and info.launches >= 3
    np.testing.assert_allclose(compiled.run(feeds)[y], reference.run(graph, feeds)[y], rtol=2e-4, atol=2e-4)


def test_the_tile_follows_the_shape():
    def problem(m, n, k, outer=()):
        return GemmProblem(m, n, k, Operand(k, 1, 0, (0,) * len(outer)), Operand(n, 1, 0, (0,) * len(outer)),
                           Operand(n, 1, 0, (0,) * len(outer)), outer)

    big = choose_tile(problem(4096, 4096, 4096))
    assert (big.bm, big.bn) == (128, 128)
    small = choose_tile(problem(32, 49, 64))
    assert small.bm * small.bn <= 64 * 32  # one small image: small tiles, more blocks
    assert isinstance(choose_tile(problem(1, 4096, 1024)), CudaTile)


# ----- NVRTC: the tensor-core kernels of real models -----------------------------------


def _bert_plan():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import model_runtime  # the BERT layer the runtime benchmark builds

    return fusionlang.fuse(fusionlang.from_onnx(model_runtime.bert_layer()), "apollo")


@pytest.mark.skipif(backend.nvrtc_available() is not None, reason="NVRTC cannot be loaded")
@pytest.mark.parametrize("model", ["resnet50", "bert_layer"])
def test_every_conv_and_matmul_group_is_a_tensor_core_kernel_nvrtc_compiles(model, monkeypatch):
    monkeypatch.undo()  # production sizes: MIN_MACS as shipped
    plan = _bert_plan() if model == "bert_layer" else fused_plan(model)
    templates: dict = {}
    lowered, _, _ = lower_plan(plan, "cuda", templates=templates)
    contractions = [g.id for g in plan.groups if any(n.op in ("conv", "matmul", "gemm") for n in plan.nodes_of(g))]
    assert contractions and sorted(templates) == sorted(contractions)
    program = build_cuda_program(plan, lowered, True, templates)
    units = [s for s in program.sources().values() if "fl_mma_tf32(" in s]
    assert len(units) == len({program.groups[g].name for g in contractions})
    for arch in ("compute_80", "compute_90"):
        for source in units:
            ptx = backend.nvrtc_compile(source, arch)
            assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in ptx and "cp.async" in ptx
    assert "mma.sync" not in backend.nvrtc_compile(units[0], "compute_75")  # the FMA path before sm_80
    # and the whole program in one module, as CudaRuntime compiles it: each kernel defined once
    assert ".entry" in backend.nvrtc_compile(program.source, "compute_90")


def _sixteen_bit_graph(kind: str, dtype: str):
    rng = np.random.default_rng(7)
    b = GraphBuilder(f"{kind}16")
    if kind == "matmul":
        x = b.input("x", (2, 45, 70), dtype)
        y = b.matmul(x, b.constant(rng.standard_normal((70, 37)).astype(dtype)))
        y = b.relu(b.add(y, b.constant(rng.standard_normal(37).astype(dtype))))
        shape = (2, 45, 70)
    else:
        x = b.input("x", (1, 5, 11, 9), dtype)
        y = b.conv(x, b.constant(rng.standard_normal((19, 5, 3, 3)).astype(dtype)),
                   b.constant(rng.standard_normal(19).astype(dtype)), pads=(1, 1, 1, 1), strides=(2, 1))
        y = b.clip(y, min=-1.0, max=2.0)
        shape = (1, 5, 11, 9)
    b.output(y)
    return b.build(), {"x": rng.standard_normal(shape).astype(dtype)}, y


@pytest.mark.parametrize("tensor_cores", [False, True], ids=["fma", "mma"])
@pytest.mark.parametrize("kind", ["matmul", "conv"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_operands_multiply_with_fp32_accumulation_on_both_paths(dtype, kind, tensor_cores, monkeypatch):
    """m16n8k16 emulated lane by lane (16-bit pairs unpacked from each register) or FMAs on
    the widened values: products of 16-bit numbers are exact in fp32, so both give the
    reference's numbers after the one rounding to 16 bits at the store."""
    if tensor_cores:
        monkeypatch.setenv("FUSIONLANG_EMU_TENSOR_CORES", "1")
    graph, feeds, y = _sixteen_bit_graph(kind, dtype)
    compiled = fusionlang.compile(single_group_plan(graph), "cuda-emu")
    assert f"{dtype} on tensor cores, fp32 accumulation" in compiled.kernels[0].strategy
    got = compiled.run(feeds)[y].astype(np.float32)
    want = reference.run(graph, feeds)[y].astype(np.float32)
    ulp = 2.0 ** -10 if dtype == "float16" else 2.0 ** -7
    np.testing.assert_allclose(got, want, rtol=ulp, atol=ulp)  # at most one rounding step apart


@pytest.mark.skipif(backend.nvrtc_available() is not None, reason="NVRTC cannot be loaded")
@pytest.mark.parametrize("dtype, instruction", [("float16", "m16n8k16.row.col.f32.f16.f16.f32"),
                                                ("bfloat16", "m16n8k16.row.col.f32.bf16.bf16.f32")])
def test_16_bit_templates_compile_to_their_tensor_core_instructions(dtype, instruction):
    for kind in ("matmul", "conv"):
        graph, *_ = _sixteen_bit_graph(kind, dtype)
        (source,) = backend.cuda_sources(single_group_plan(graph)).values()
        for arch in ("compute_80", "compute_90"):
            assert f"mma.sync.aligned.{instruction}" in backend.nvrtc_compile(source, arch)


# ----- prologues computed while staging ----------------------------------------------------

PROLOGUE_OPS = ["scale", "shift", "relu", "clip", "sigmoid"]


def _prologue(draw, b, x, shape, channel_axis, rng):
    for op in draw(st.lists(st.sampled_from(PROLOGUE_OPS), min_size=1, max_size=3)):
        if op in ("scale", "shift"):
            pshape = [1] * len(shape)
            pshape[channel_axis] = shape[channel_axis]
            c = b.constant(rng.standard_normal(pshape).astype(np.float32))
            x = b.mul(x, c) if op == "scale" else b.add(x, c)
        elif op == "clip":
            x = b.clip(x, min=-0.5, max=1.0)
        else:
            x = getattr(b, op)(x)
    return x


def _one_launch(graph, feeds, y, **options):
    """The whole group as one kernel: the prologue staged, not a loop nest of its own."""
    compiled = fusionlang.compile(single_group_plan(graph), "cuda-emu", **options)
    (info,) = compiled.kernels
    assert info.strategy.startswith("GEMM template") and info.launches == 1
    np.testing.assert_allclose(compiled.run(feeds)[y], reference.run(graph, feeds)[y], rtol=2e-4, atol=2e-4)


@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_a_prologue_before_a_conv_is_computed_while_the_image_is_staged(data):
    """bn + relu before a conv (1-D and 2-D, strides, pads, dilations, groups): one launch,
    the padding taps staying 0 (the prologue's output is what is padded)."""
    draw = data.draw
    rank, group = draw(st.sampled_from([1, 2])), draw(st.integers(1, 2))
    cin, oc = group * draw(st.integers(1, 3)), group * draw(st.integers(2, 4))
    spatial = tuple(draw(st.integers(3, 8)) for _ in range(rank))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    pads = tuple(draw(st.integers(0, 1)) for _ in range(2 * rank))
    strides = tuple(draw(st.integers(1, 2)) for _ in range(rank))
    dilations = tuple(draw(st.integers(1, 2)) for _ in range(rank))
    if any((n + pads[a] + pads[rank + a] - d * (k - 1) - 1) < 0
           for a, (n, k, d) in enumerate(zip(spatial, kernel, dilations))):
        return
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    shape = (draw(st.integers(1, 2)), cin) + spatial
    b = GraphBuilder("staged")
    x = b.input("x", shape)
    pre = _prologue(draw, b, x, shape, 1, rng)
    w = b.constant(rng.standard_normal((oc, cin // group) + kernel).astype(np.float32))
    y = b.relu(b.conv(pre, w, pads=pads, strides=strides, dilations=dilations, group=group))
    b.output(y)
    _one_launch(b.build(), {"x": rng.standard_normal(shape).astype(np.float32)}, y)


@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_a_prologue_on_either_matmul_operand_is_computed_while_it_is_staged(data):
    draw = data.draw
    m, k, n = draw(ODD), draw(ODD), draw(ODD)
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    a_shape = tuple(1 if draw(st.booleans()) else d for d in batch) + (m, k)
    b_shape = batch[draw(st.integers(0, len(batch))):] + (k, n)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    b = GraphBuilder("staged_mm")
    x, w = b.input("x", a_shape), b.input("w", b_shape)
    if draw(st.booleans()):
        x = _prologue(draw, b, x, a_shape, len(a_shape) - 1, rng)
    else:
        w = _prologue(draw, b, w, b_shape, len(b_shape) - 1, rng)
    y = b.matmul(x, w)
    b.output(y)
    feeds = {"x": rng.standard_normal(a_shape).astype(np.float32), "w": rng.standard_normal(b_shape).astype(np.float32)}
    _one_launch(b.build(), feeds, y)


@pytest.mark.parametrize("trans_a", [0, 1])
def test_a_prologue_on_a_transposed_gemm_operand(trans_a):
    rng = np.random.default_rng(trans_a)
    shape = (37, 21) if trans_a else (21, 37)
    b = GraphBuilder("staged_gemm")
    x = b.input("a", shape)
    pre = b.sigmoid(b.mul(x, b.constant(np.float32(1.5))))
    y = b.gemm(pre, b.constant(rng.standard_normal((37, 19)).astype(np.float32)), trans_a=trans_a)
    b.output(y)
    _one_launch(b.build(), {"a": rng.standard_normal(shape).astype(np.float32)}, y)


def test_a_prologue_whose_value_leaves_the_group_still_runs_as_its_own_kernel():
    rng = np.random.default_rng(5)
    b = GraphBuilder("exported")
    x = b.input("x", (1, 3, 6, 6))
    pre = b.relu(x)
    y = b.conv(pre, b.constant(rng.standard_normal((4, 3, 3, 3)).astype(np.float32)), pads=(1, 1, 1, 1))
    b.output(pre, y)
    graph = b.build()
    compiled = fusionlang.compile(single_group_plan(graph), "cuda-emu")
    assert compiled.kernels[0].launches == 2
    feeds = {"x": rng.standard_normal((1, 3, 6, 6)).astype(np.float32)}
    want = reference.run(graph, feeds)
    for name, got in compiled.run(feeds).items():
        np.testing.assert_allclose(got, want[name], rtol=2e-4, atol=2e-4)


def test_a_16_bit_prologue_rounds_where_the_loop_nest_would(monkeypatch):
    monkeypatch.setenv("FUSIONLANG_EMU_TENSOR_CORES", "1")
    rng = np.random.default_rng(6)
    b = GraphBuilder("staged16")
    x = b.input("x", (1, 5, 7, 7), "float16")
    pre = b.relu(b.mul(x, b.constant(rng.standard_normal((1, 5, 1, 1)).astype("float16"))))
    y = b.conv(pre, b.constant(rng.standard_normal((6, 5, 3, 3)).astype("float16")), pads=(1, 1, 1, 1))
    b.output(y)
    graph = b.build()
    feeds = {"x": rng.standard_normal((1, 5, 7, 7)).astype("float16")}
    compiled = fusionlang.compile(single_group_plan(graph), "cuda-emu")
    assert compiled.kernels[0].launches == 1
    np.testing.assert_allclose(compiled.run(feeds)[y].astype(np.float32),
                               reference.run(graph, feeds)[y].astype(np.float32), rtol=2 ** -10, atol=2 ** -10)
    if backend.nvrtc_available() is None:
        (source,) = backend.cuda_sources(single_group_plan(graph)).values()
        assert "m16n8k16" in backend.nvrtc_compile(source, "compute_80")


def test_the_report_shows_each_template_tile():
    graph, feeds, *_ = _bias_relu_matmul(70, 37, 45)
    plan = single_group_plan(graph)
    compiled = fusionlang.compile(plan, "cuda-emu")
    tile = compiled.kernels[0].strategy
    assert tile.startswith("GEMM template ") and " warps of " in tile
    assert f"schedule {tile}" in render_report(plan, compiled=compiled)


def test_two_groups_sharing_a_template_kernel_define_it_once():
    """Two convs of one shape and epilogue are one template kernel; the loop nests after
    them differ, so the groups differ: the program must still define the kernel once
    (squeezenet's fire modules)."""
    rng = np.random.default_rng(8)
    b = GraphBuilder("shared")
    x = b.input("x", (1, 3, 6, 6))
    convs = [b.relu(b.conv(x, b.constant(rng.standard_normal((4, 3, 3, 3)).astype(np.float32)), pads=(1, 1, 1, 1)))
             for _ in range(2)]
    b.output(b.transpose(convs[0], perm=[0, 2, 3, 1]), b.reduce_sum(convs[1], axes=[2, 3], keepdims=1))
    graph = b.build()
    groups = [["conv_1", "relu_2", "transpose_6"], ["conv_4", "relu_5", "reduce_sum_7"]]
    plan = FusionPlan(graph, make_groups(graph, groups, [{}, {}]), strategy="test")
    compiled = fusionlang.compile(plan, "cuda-emu")
    template = next(line for line in compiled.sources.splitlines() if '__global__ void __launch_bounds__(' in line
                    and " fl_g_" in line)
    assert compiled.sources.count(template) == 1  # one definition, launched by both groups
    feeds = {"x": rng.standard_normal((1, 3, 6, 6)).astype(np.float32)}
    want = reference.run(graph, feeds)
    for name, got in compiled.run(feeds).items():
        np.testing.assert_allclose(got, want[name], rtol=2e-4, atol=2e-4)
