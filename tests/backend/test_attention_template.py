"""The attention template against the reference, the loop nest it replaces and onnxruntime:
ranks 2 to 4, sequence lengths and head dims from 1 up, scale by div or mul, masks
broadcast over batch and heads, transposes folded into strides, special values, threads;
the feedback check's verdicts on the attention block; what stays a loop nest."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusionlang
from fusionlang import backend, reference
from fusionlang.backend import attention_template
from fusionlang.backend.attention_template import MAX_KEYS, plan_attention
from fusionlang.backend.ccompile import build_library, load_library
from fusionlang.backend.cexpr import C, helpers
from fusionlang.backend.feedback import check_group
from fusionlang.backend.machine import machine_for
from fusionlang.engine.plan import single_group_plan
from fusionlang.errors import ResourceError
from fusionlang.ops import GraphBuilder


def attention_graph(batch, m, n, d, e, scale="div", mask=None, mask_first=False, heads_last=False, kt_input=False,
                    merge_heads=False):
    """softmax(scale(Q K^T) + mask) V over ``batch`` leading dims; ``mask``: the mask's
    shape (broadcast to the scores'); ``mask_first``: the mask is added before scaling;
    ``heads_last``: Q and V arrive as (B, M, H, D) and are transposed in the group;
    ``kt_input``: K arrives transposed, (..., D, N), with no transpose in the group;
    ``merge_heads``: the output (B, H, M, E) is transposed and reshaped to (B, M, H * E)."""
    b = GraphBuilder("attention")
    if heads_last:
        q = b.op("transpose", b.input("q", (batch[0], m, batch[1], d)), perm=[0, 2, 1, 3])
    else:
        q = b.input("q", (*batch, m, d))
    if kt_input:
        kt = b.input("kt", (*batch, d, n))
    else:
        rank = len(batch) + 2
        kt = b.op("transpose", b.input("k", (*batch, n, d)), perm=[*range(rank - 2), rank - 1, rank - 2])
    if heads_last:
        v = b.op("transpose", b.input("v", (batch[0], n, batch[1], e)), perm=[0, 2, 1, 3])
    else:
        v = b.input("v", (*batch, n, e))
    x = b.op("matmul", q, kt)
    if mask is not None and mask_first:
        x = b.op("add", b.input("mask", mask), x)
    if scale == "div":
        x = b.op("div", x, b.input("s", (1,)))
    elif scale == "mul":
        x = b.op("mul", b.input("s", (1,)), x)
    if mask is not None and not mask_first:
        x = b.op("add", x, b.input("mask", mask))
    out = b.op("matmul", b.op("softmax", x, axis=-1), v)
    if merge_heads:
        out = b.op("reshape", b.op("transpose", out, perm=[0, 2, 1, 3]), shape=(batch[0], m, batch[1] * e))
    b.output(out)
    return b.build()


def feeds_for(graph, seed, scale=0.125):
    rng = np.random.default_rng(seed)
    feeds = {name: rng.standard_normal(graph.types[name].shape).astype(np.float32) for name in graph.inputs}
    if "s" in feeds:
        feeds["s"] = np.array([scale], np.float32)
    return feeds


def compiled(graph, **options):
    out = backend.compile(single_group_plan(graph), **options)
    assert [k.strategy for k in out.kernels] == ["attention template"]
    return out


def assert_matches_reference(graph, feeds, got):
    want = reference.run(graph, feeds)[graph.outputs[0]]
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5, equal_nan=True)


def _mask_shape(draw, batch, m, n):
    """A mask of the scores' shape with some leading dims broadcast (1 or absent)."""
    full = [*batch, m, n]
    shape = [1 if draw(st.booleans()) else s for s in full[:-2]] + full[-2:]
    return tuple(shape[draw(st.integers(0, len(batch))):])


@st.composite
def problems(draw):
    rank = draw(st.integers(2, 4))
    batch = tuple(draw(st.integers(1, 4)) for _ in range(rank - 2))
    m, n = draw(st.integers(1, 70)), draw(st.integers(1, 70))
    d, e = draw(st.integers(1, 67)), draw(st.integers(1, 67))
    mask = _mask_shape(draw, batch, m, n) if draw(st.booleans()) else None
    return dict(batch=batch, m=m, n=n, d=d, e=e, scale=draw(st.sampled_from(["div", "mul", None])), mask=mask,
                mask_first=draw(st.booleans()), heads_last=rank == 4 and draw(st.booleans()),
                kt_input=draw(st.booleans()))


@settings(max_examples=25)
@given(problem=problems(), scale=st.sampled_from([0.125, 1.0, 3.0, -0.5]), specials=st.booleans(),
       seed=st.integers(0, 2**16))
def test_the_attention_template_matches_the_reference(problem, scale, specials, seed):
    graph = attention_graph(**problem)
    feeds = feeds_for(graph, seed, scale)
    if specials:  # inf, -inf and NaN in the scores' operands and the mask, NaN in V
        rng = np.random.default_rng(seed + 1)
        for name, values in (("q", [np.inf, -np.inf, np.nan]), ("mask", [-np.inf, np.inf, np.nan]), ("v", [np.nan])):
            if name in feeds:
                flat = feeds[name].reshape(-1)
                flat[rng.integers(0, flat.size, size=max(1, flat.size // 50))] = rng.choice(values)
    assert_matches_reference(graph, feeds, compiled(graph).run(feeds)[graph.outputs[0]])


@settings(max_examples=15)
@given(n=st.integers(100, 300), e=st.sampled_from([1, 8, 15, 16, 33]),
       specials=st.booleans(), seed=st.integers(0, 2**16))
def test_long_rows_match_the_reference(n, e, specials, seed):
    # rows of several vectors, four accumulator chains each, and padding; narrow and wide V
    graph = attention_graph((2,), 19, n, 8, e, mask=(19, n))
    feeds = feeds_for(graph, seed)
    if specials:  # a fully masked row, -inf and NaN in the mask, NaN in V
        rng = np.random.default_rng(seed)
        feeds["mask"][rng.random((19, n)) < 0.05] = -np.inf
        feeds["mask"][3] = -np.inf
        feeds["mask"][5, rng.integers(0, n)] = np.nan
        feeds["v"][1, rng.integers(0, n), 0] = np.nan
    assert_matches_reference(graph, feeds, compiled(graph).run(feeds)[graph.outputs[0]])


def test_one_and_two_threads_give_equal_bits_and_match_the_loop_nest():
    # 3 heads of 37 rows: the threads' ranges of (head, row block) pairs split a head
    graph = attention_graph((3,), 37, 45, 9, 21, mask=(37, 45))
    feeds = feeds_for(graph, 5)
    feeds["mask"][3] = -np.inf  # a fully masked row
    out = graph.outputs[0]
    one = compiled(graph, threads=1).run(feeds)[out]
    two = compiled(graph, threads=2).run(feeds)[out]
    np.testing.assert_array_equal(one.view(np.uint32), two.view(np.uint32))
    loop_nest = backend.compile(fusionlang.fuse(graph, "apollo_patterns"), templates=False)
    assert "attention template" not in [k.strategy for k in loop_nest.kernels]
    np.testing.assert_allclose(one, loop_nest.run(feeds)[out], rtol=2e-4, atol=2e-5, equal_nan=True)
    assert np.isnan(one[:, 3]).all() and not np.isnan(np.delete(one, 3, axis=1)).any()


@pytest.mark.parametrize("e", [4, 24])
def test_one_head_splits_its_rows_between_threads(e):
    graph = attention_graph((), 50, 33, 5, e)
    feeds = feeds_for(graph, 6)
    out = graph.outputs[0]
    one = compiled(graph, threads=1).run(feeds)[out]
    two = compiled(graph, threads=2).run(feeds)[out]
    np.testing.assert_array_equal(one.view(np.uint32), two.view(np.uint32))
    assert_matches_reference(graph, feeds, two)


@pytest.mark.parametrize("isa", ["avx2", "generic"])
@pytest.mark.parametrize("e", [3, 40])
@pytest.mark.parametrize("n", [21, 70])  # rows of fewer and more vectors than accumulator chains
def test_narrower_vectors_and_fewer_registers_block_the_rows_their_way(monkeypatch, isa, e, n):
    monkeypatch.setattr(attention_template, "host", lambda: machine_for(isa))
    graph = attention_graph((3,), 13, n, 11, e, mask=(13, n))
    feeds = feeds_for(graph, 4)
    assert_matches_reference(graph, feeds, compiled(graph).run(feeds)[graph.outputs[0]])


@pytest.mark.parametrize("isa", ["avx512", "avx2", "generic"])
@pytest.mark.parametrize("merge_heads", [False, True])
@pytest.mark.parametrize("m, n, e", [(13, 32, 32), (16, 64, 16), (9, 48, 64), (8, 32, 20), (11, 40, 48)])
def test_k_and_v_read_in_place_and_the_product_stored_straight_match_the_reference(monkeypatch, isa, merge_heads,
                                                                                   m, n, e):
    """K^T as an input of whole-vector rows and V rows of whole vectors are read where they
    lie (no panels packed), and a head's rows of whole vectors are stored straight into the
    output (heads merged after it or not); widths that are no whole vectors at some ISA
    (n=40, e=20 at 16 floats) take the packed panels: both agree with the reference."""
    monkeypatch.setattr(attention_template, "host", lambda: machine_for(isa))
    graph = attention_graph((2, 3), m, n, 16, e, mask=(m, n), scale="mul", kt_input=True, merge_heads=merge_heads)
    layout = attention_template._layout(plan_attention(graph, [x.name for x in graph.nodes]), machine_for(isa))
    assert layout.k_in_place == (n % layout.vl == 0) and layout.v_in_place == (e % layout.vl == 0)
    feeds = feeds_for(graph, m + n + e)
    assert_matches_reference(graph, feeds, compiled(graph).run(feeds)[graph.outputs[0]])


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
@pytest.mark.parametrize("m, e", [(11, 1), (9, 5), (15, 8), (13, 9), (7, 15)])
def test_a_narrow_v_in_row_pairs_and_lane_sum_trees_matches_the_reference(monkeypatch, isa, m, e):
    """A narrow V's P.V: rows in pairs (32 registers) with an odd row left over, one or two
    passes over the output columns, the accumulators' lanes summed in trees over 1 to 16
    vectors; 16 registers take the rows one at a time."""
    monkeypatch.setattr(attention_template, "host", lambda: machine_for(isa))
    graph = attention_graph((2, 3), m, 40, 8, e, mask=(m, 40), scale="div")
    layout = attention_template._layout(plan_attention(graph, [x.name for x in graph.nodes]), machine_for(isa))
    assert layout.narrow_v and layout.pair_narrow_rows == (isa == "avx512")
    feeds = feeds_for(graph, m * e)
    assert_matches_reference(graph, feeds, compiled(graph).run(feeds)[graph.outputs[0]])


@pytest.mark.parametrize("count", [1, 2, 3, 8, 16, 24])
@pytest.mark.parametrize("vl", [4, 16])
def test_lane_sums_add_each_vectors_lanes(count, vl):
    """The tree's expressions pick each vector's sum, whatever the count against the lanes."""
    vectors = np.arange(count * vl, dtype=np.float64).reshape(count, vl) ** 1.5
    sums, statements = attention_template._lane_sums([f"a{c}" for c in range(count)], vl)
    values = {f"a{c}": vectors[c] for c in range(count)}
    for line in filter(None, (x.strip() for x in statements.split(";"))):
        name, expression = line.removeprefix(f"const fl_vf{vl} ").split(" = ", 1)
        halves = [_shuffled(part, values, vl) for part in expression.split(" + ")]
        values[name] = halves[0] + halves[1]
    got = [values[s.split("[")[0]][int(s.split("[")[1].rstrip("]"))] for s in sums]
    np.testing.assert_allclose(got, vectors.sum(axis=1))


def _shuffled(call: str, values: dict, vl: int) -> np.ndarray:
    """NumPy of one ``__builtin_shuffle(x, y, (fl_viN){...})`` of the tree's C."""
    inner = call.strip().removeprefix("__builtin_shuffle(").removesuffix(")")
    x, y, mask = inner.split(", ", 2)
    both = np.concatenate([values.get(x, np.zeros(vl)), values.get(y, np.zeros(vl))])
    return both[[int(i) for i in mask.split("{")[1].rstrip("}").split(", ")]]


def test_the_softmax_exp_keeps_every_bit_of_fl_expf_on_its_range():
    """The kernel's exp for x - max against the library's fl_expf on every 257th float32
    of [-87.34, -0] (the full range was checked once: 1,118,743,633 floats, no bit differs),
    at +0, at the flush threshold and on NaN."""
    src = ("#include <stdint.h>\n#include <string.h>\n" + helpers(C) + attention_template._exp_nonpositive_c("mine")
           + """
long differing(uint32_t first, uint32_t last, uint32_t step) {
    long bad = 0;
    for (uint64_t u = first; u <= last; u += step) {
        uint32_t bits = (uint32_t)u, a, b; float x, ya, yb;
        memcpy(&x, &bits, 4); ya = fl_expf(x); yb = mine(x);
        memcpy(&a, &ya, 4); memcpy(&b, &yb, 4);
        bad += a != b && !(x != x && ya != ya && yb != yb);
    }
    return bad;
}
""")
    lib = load_library(build_library([src]))
    lib.differing.restype = ctypes.c_long
    lib.differing.argtypes = [ctypes.c_uint32] * 3
    low = int(np.float32(attention_template.SUBNORMAL_EXP_BELOW).view(np.uint32))
    assert lib.differing(0x80000000, low, 257) == 0
    for value in (0.0, -0.0, attention_template.SUBNORMAL_EXP_BELOW, np.nan):
        bits = int(np.float32(value).view(np.uint32))
        assert lib.differing(bits, bits, 1) == 0


def test_a_workspace_that_cannot_be_allocated_is_a_one_line_resource_error(monkeypatch):
    monkeypatch.setenv("FUSIONLANG_COPT", "-O2 -DFL_ALLOC_LIMIT=4096")
    graph = attention_graph((2,), 40, 300, 8, 8)
    out = compiled(graph)
    with pytest.raises(ResourceError, match=rf"^out of memory allocating \d+ bytes in kernel {out.kernels[0].name}$"):
        out.run(feeds_for(graph, 1))


@pytest.mark.parametrize("e", [3, 20])
def test_q_and_v_with_heads_after_the_rows_fold_their_transposes(e):
    graph = attention_graph((2, 3), 5, 7, 4, e, heads_last=True, mask=(3, 1, 7), scale="mul")
    assert [n.op for n in graph.nodes].count("transpose") == 3
    feeds = feeds_for(graph, 0)
    assert_matches_reference(graph, feeds, compiled(graph).run(feeds)[graph.outputs[0]])


@pytest.mark.parametrize("e", [3, 20])
def test_heads_merged_after_the_product_are_folded_into_its_stores(e):
    graph = attention_graph((2, 3), 9, 7, 4, e, mask=(9, 7), scale="mul", merge_heads=True)
    assert graph.types[graph.outputs[0]].shape == (2, 9, 3 * e)
    feeds = feeds_for(graph, 2)
    assert_matches_reference(graph, feeds, compiled(graph).run(feeds)[graph.outputs[0]])


def test_apollo_patterns_folds_the_heads_merge_after_the_block_into_its_kernel():
    graph = attention_graph((1, 4), 12, 12, 8, 8, mask=(12, 12), scale="mul", merge_heads=True)
    out = fusionlang.compile(fusionlang.fuse(graph, "apollo_patterns"))
    assert [k.strategy for k in out.kernels] == ["attention template"]
    assert {"transpose", "reshape"} <= {graph.node(n).op for n in out.kernels[0].nodes if n in graph.index.by_name}
    feeds = feeds_for(graph, 8)
    assert_matches_reference(graph, feeds, out.run(feeds)[graph.outputs[0]])


def test_a_causal_mask_and_long_keys():
    m = n = 300
    graph = attention_graph((2,), m, n, 4, 4, mask=(m, n))
    feeds = feeds_for(graph, 9)
    feeds["mask"] = np.triu(np.full((m, n), -np.inf, np.float32), 1)
    assert_matches_reference(graph, feeds, compiled(graph).run(feeds)[graph.outputs[0]])


def _one_key_dominates(gap):
    """Scores 0 for key 0 and ``-gap`` for the other keys of every row (a mask sets them),
    V 0 at key 0 and 1 elsewhere: each output is the other keys' total probability."""
    graph = attention_graph((2,), 4, 6, 3, 2, scale=None, mask=(4, 6))
    feeds = feeds_for(graph, 3)
    feeds["q"][:] = 0.0
    feeds["mask"][:] = np.float32(-gap)
    feeds["mask"][:, 0] = 0.0
    feeds["v"][:] = 1.0
    feeds["v"][:, 0] = 0.0
    return graph, feeds


def test_probabilities_below_the_smallest_normal_float_are_zero():
    # exp(-100) is subnormal: the reference keeps 5 x 3.7e-44, the kernel flushes them
    graph, feeds = _one_key_dominates(100.0)
    got = compiled(graph).run(feeds)[graph.outputs[0]]
    want = reference.run(graph, feeds)[graph.outputs[0]]
    assert (want > 0).all() and (want < np.finfo(np.float32).tiny).all()
    assert (got == 0).all()


@pytest.mark.parametrize("gap", [87.0, 87.3, 50.0])
def test_probabilities_just_above_the_smallest_normal_float_are_kept(gap):
    graph, feeds = _one_key_dominates(gap)
    got = compiled(graph).run(feeds)[graph.outputs[0]]
    want = reference.run(graph, feeds)[graph.outputs[0]]
    assert (want >= np.finfo(np.float32).tiny).all()
    np.testing.assert_allclose(got, want, rtol=1e-5)


@settings(max_examples=25)
@given(problem=problems(), low=st.floats(-130.0, -60.0), seed=st.integers(0, 2**16))
def test_scores_far_below_the_row_max_match_the_reference(problem, low, seed):
    # Swin's shifted-window mask: -100 added to some scores, others near the subnormal edge
    problem = dict(problem, mask=problem["mask"] or (*problem["batch"], problem["m"], problem["n"]))
    graph = attention_graph(**problem)
    feeds = feeds_for(graph, seed)
    rng = np.random.default_rng(seed)
    mask = feeds["mask"]
    mask[...] = np.where(rng.random(mask.shape) < 0.4, rng.uniform(low, low + 30.0, mask.shape), mask)
    assert_matches_reference(graph, feeds, compiled(graph).run(feeds)[graph.outputs[0]])


def test_inf_in_v_is_inf_where_every_probability_is_positive():
    graph = attention_graph((2,), 5, 6, 3, 4, scale=None)
    feeds = feeds_for(graph, 2)
    feeds["v"][1, 2, 3] = np.inf
    got = compiled(graph).run(feeds)[graph.outputs[0]]
    assert np.isposinf(got[1, :, 3]).all()
    assert_matches_reference(graph, feeds, got)


def _names(graph):
    return [n.name for n in graph.nodes]


def test_what_stays_a_loop_nest():
    graph = attention_graph((2,), 8, 8, 4, 4)
    opened = fusionlang.fuse(graph, "apollo_patterns", feedback=False).graph
    assert plan_attention(opened, _names(opened)) is not None
    # the scores also leave the group (the probabilities may: the kernel writes them too)
    b = GraphBuilder("exported")
    q, k, v = (b.input(x, (8, 4)) for x in "qkv")
    scores = b.op("matmul", q, b.op("transpose", k, perm=[1, 0]))
    b.output(b.op("matmul", b.op("softmax", scores, axis=-1), v))
    b.output(scores)
    exported = b.build()
    assert plan_attention(exported, _names(exported)) is None
    # a softmax over another axis, a scale that is a tensor, keys past MAX_KEYS
    b = GraphBuilder("axis0")
    p = b.op("softmax", b.op("matmul", b.input("q", (8, 4)), b.input("kt", (4, 8))), axis=0)
    b.output(b.op("matmul", p, b.input("v", (8, 4))))
    axis0 = b.build()
    assert plan_attention(axis0, _names(axis0)) is None
    b = GraphBuilder("tensor_scale")
    x = b.op("mul", b.op("matmul", b.input("q", (8, 4)), b.input("kt", (4, 8))), b.input("s", (8, 8)))
    b.output(b.op("matmul", b.op("softmax", x, axis=-1), b.input("v", (8, 4))))
    tensor_scale = b.build()
    assert plan_attention(tensor_scale, _names(tensor_scale)) is None
    long = attention_graph((), 2, MAX_KEYS + 1, 2, 2, kt_input=True)
    assert plan_attention(long, _names(long)) is None


def test_feedback_accepts_the_block_on_c_and_cuda_refuses_it():
    graph = fusionlang.fuse(attention_graph((2,), 16, 16, 8, 8), "apollo_patterns", feedback=False).graph
    assert check_group(graph, _names(graph), "c") is None
    assert "each run as a compute template" in check_group(graph, _names(graph), "cuda")
    plan = fusionlang.fuse(attention_graph((2,), 16, 16, 8, 8), "apollo_patterns", target="cuda")
    assert len(plan.groups) > 1
    refused = [d for d in plan.decisions if d.verdict.value == "feedback refused" and d.entry is not None]
    assert [d.entry.decl.name.text for d in refused] == ["attention_block"]


def test_the_pattern_group_is_one_kernel_at_real_compile():
    graph = attention_graph((2, 4), 20, 20, 8, 8, mask=(20, 20))
    plan = fusionlang.fuse(graph, "apollo_patterns")
    out = fusionlang.compile(plan)
    assert [k.strategy for k in out.kernels] == ["attention template"]
    # the kernel list and the profile name the problem and count its flops
    assert out.kernels[0].detail == "attention m=20 n=20 d=8 e=8 x2 x4"
    assert out.kernels[0].flops == 2 * 8 * 20 * 20 * (8 + 8)
    feeds = feeds_for(graph, 3)
    assert_matches_reference(graph, feeds, out.run(feeds)[graph.outputs[0]])


def _onnx_attention(batch, m, n, d, masked: bool):
    import onnx
    from onnx import helper

    f = onnx.TensorProto.FLOAT
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["a"]), helper.make_node("Div", ["a", "s"], ["x"])]
    inputs = [helper.make_tensor_value_info(name, f, [*batch, rows, d]) for name, rows in (("q", m), ("k", n), ("v", n))]
    inputs.append(helper.make_tensor_value_info("s", f, [1]))
    if masked:
        nodes.append(helper.make_node("Add", ["x", "mask"], ["xm"]))
        inputs.append(helper.make_tensor_value_info("mask", f, [m, n]))
    nodes += [helper.make_node("Softmax", ["xm" if masked else "x"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "v"], ["o"])]
    model = helper.make_model(helper.make_graph(nodes, "attention", inputs,
                                                [helper.make_tensor_value_info("o", f, [*batch, m, d])]),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


@pytest.mark.parametrize("masked", [False, True])
def test_the_attention_template_agrees_with_onnxruntime(masked):
    ort = pytest.importorskip("onnxruntime")
    batch, m, n, d = (2, 3), 49, 49, 32
    model = _onnx_attention(batch, m, n, d, masked)
    rng = np.random.default_rng(7)
    feeds = {x: rng.standard_normal((*batch, rows, d)).astype(np.float32) for x, rows in (("q", m), ("k", n), ("v", n))}
    feeds["s"] = np.array([np.sqrt(d)], np.float32)
    if masked:
        feeds["mask"] = np.triu(np.full((m, n), -np.inf, np.float32), 1)
        feeds["mask"][5] = -np.inf  # a fully masked row
    graph = fusionlang.from_onnx(model)
    out = fusionlang.compile(fusionlang.fuse(graph, "apollo_patterns"))
    assert [k.strategy for k in out.kernels] == ["attention template"]
    got = out.run(feeds)[graph.outputs[0]]
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, equal_nan=True)
    assert np.array_equal(np.isnan(got), np.isnan(want))
