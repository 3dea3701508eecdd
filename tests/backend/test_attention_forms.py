"""The attention kernel on the forms torch's exports take: the scale on Q and/or K before
the product (computed outside the block, K^T arriving as a tensor), one or two additive
biases/masks, Swin's shifted-window mask added with the windows' dim split off and merged
back; and whole UNet- and Swin-like blocks compiled with the rules the C target uses by
default, each softmax(QK^T)V becoming one attention kernel."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusionlang
from fusionlang import reference
from fusionlang.backend.attention_template import plan_attention
from fusionlang.ops import GraphBuilder


def export_form_graph(batch, m, n, d, e, *, q_scale=False, k_scale=False, kt_input=False, bias=None, mask=None,
                      window=False, nan_guard=False, row_guard=False):
    """softmax((s Q)(s K)^T + bias [+ mask]) V over ``batch`` = (windows, heads) or any
    leading dims. ``bias``/``mask``: the shapes of the additive terms; with ``window`` the
    mask is added to the scores reshaped to (1, windows, heads, m, n), as Swin does; with
    ``nan_guard`` NaN probabilities become 0 before the product (torch's SDPA export); with
    ``row_guard`` a row of scores that are all -inf gives 0s (torch's SDPA decomposition in
    core ATen, what torch.compile hands over)."""
    b = GraphBuilder("exported_attention")
    q = b.input("q", (*batch, m, d))
    if q_scale:
        q = b.op("mul", q, b.input("sq", (1,)))
    if kt_input:
        kt = b.input("kt", (*batch, d, n))
    else:
        rank = len(batch) + 2
        kt = b.op("transpose", b.input("k", (*batch, n, d)), perm=[*range(rank - 2), rank - 1, rank - 2])
    if k_scale:
        kt = b.op("mul", kt, b.input("sk", (1,)))
    x = b.op("matmul", q, kt)
    if bias is not None:
        x = b.op("add", x, b.input("bias", bias))
    if mask is not None and window:
        x = b.op("reshape", x, shape=(1, *batch, m, n))
        x = b.op("add", x, b.input("mask", mask))
        x = b.op("reshape", x, shape=(*batch, m, n))
    elif mask is not None:
        x = b.op("add", x, b.input("mask", mask))
    p = b.op("softmax", x, axis=-1)
    if nan_guard:
        p = b.op("where", b.op("is_nan", p), b.constant(np.array(0.0, np.float32)), p)
    if row_guard:
        p = b.op("where", all_minus_inf(b, x), b.constant(np.zeros(b.graph.types[x].shape, np.float32)), p)
    b.output(b.op("matmul", p, b.input("v", (*batch, n, e))))
    return b.build()


def all_minus_inf(b, scores):
    """As torch's decomposition tests a row: not(reduce_max(not(scores == -inf)) > 0)."""
    live = b.op("cast", b.op("not", b.op("equal", scores, b.constant(np.array(-np.inf, np.float32)))), to="float32")
    top = b.op("reduce_max", live, axes=[-1], keepdims=1)
    return b.op("not", b.op("greater", top, b.constant(np.array(0.0, np.float32))))


def random_feeds(graph, seed, specials=False):
    rng = np.random.default_rng(seed)
    feeds = {name: rng.standard_normal(graph.types[name].shape).astype(np.float32) for name in graph.inputs}
    for name in ("sq", "sk"):
        if name in feeds:
            feeds[name] = np.array([rng.choice([0.125, 0.35, 1.0, -0.5])], np.float32)
    if specials:  # -inf masks (a fully masked row among them), inf and NaN in Q, NaN in V
        for name, values in (("mask", [-np.inf]), ("bias", [-np.inf, -100.0]), ("q", [np.inf, np.nan]), ("v", [np.nan])):
            if name in feeds:
                flat = feeds[name].reshape(-1)
                flat[rng.integers(0, flat.size, size=max(1, flat.size // 40))] = rng.choice(values)
        if "mask" in feeds:
            feeds["mask"][..., 0, :] = -np.inf
    return feeds


def assert_matches_reference(graph, feeds, got):
    want = reference.run(graph, feeds)[graph.outputs[0]]
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5, equal_nan=True)


def strategies_of(compiled):
    return [k.strategy for k in compiled.kernels]


def _broadcast_shape(draw, full):
    """``full`` with some leading dims 1 or absent (a term broadcast over windows/heads)."""
    shape = [1 if draw(st.booleans()) else s for s in full[:-2]] + list(full[-2:])
    return tuple(shape[draw(st.integers(0, len(full) - 2)):])


@st.composite
def export_forms(draw):
    windows, heads = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    m, n = draw(st.integers(1, 53)), draw(st.integers(1, 53))
    d, e = draw(st.integers(1, 40)), draw(st.integers(1, 40))
    terms = draw(st.sampled_from(["none", "bias", "two", "window"]))
    bias = _broadcast_shape(draw, (windows, heads, m, n)) if terms != "none" else None
    mask = None
    if terms == "two":
        mask = _broadcast_shape(draw, (windows, heads, m, n))
    elif terms == "window":
        mask = (1, windows, 1, m, n)
    guard = draw(st.sampled_from(["none", "nan", "row"])) if terms in ("none", "bias") else "none"
    return dict(batch=(windows, heads), m=m, n=n, d=d, e=e, q_scale=draw(st.booleans()), k_scale=draw(st.booleans()),
                kt_input=draw(st.booleans()), bias=bias, mask=mask, window=terms == "window",
                nan_guard=guard == "nan" and bias is not None, row_guard=guard == "row")


@settings(max_examples=12, deadline=None)
@given(form=export_forms(), specials=st.booleans(), seed=st.integers(0, 2**16))
def test_the_exported_forms_run_as_the_attention_kernel_and_match_the_reference(form, specials, seed):
    graph = export_form_graph(**form)
    out = fusionlang.compile(fusionlang.fuse(graph, "apollo_patterns"))
    assert strategies_of(out).count("attention template") == 1
    feeds = random_feeds(graph, seed, specials)
    assert_matches_reference(graph, feeds, out.run(feeds)[graph.outputs[0]])


def test_a_swin_window_mask_over_several_heads_and_windows():
    graph = export_form_graph((4, 3), 49, 49, 32, 32, q_scale=True, bias=(1, 3, 49, 49), mask=(1, 4, 1, 49, 49),
                              window=True)
    out = fusionlang.compile(fusionlang.fuse(graph, "apollo_patterns"))
    assert strategies_of(out).count("attention template") == 1
    feeds = random_feeds(graph, 3)
    feeds["mask"] = np.where(np.random.default_rng(4).random((1, 4, 1, 49, 49)) < 0.3, -100.0, 0.0).astype(np.float32)
    assert_matches_reference(graph, feeds, out.run(feeds)[graph.outputs[0]])


@pytest.mark.parametrize("e", [16, 8])  # 8: a narrow V, whose P.V also reads the row's padding
def test_a_nan_guard_after_the_softmax_makes_fully_masked_rows_zeros(e):
    graph = export_form_graph((1, 4), 33, 40, 16, e, q_scale=True, k_scale=True, kt_input=True, bias=(1, 1, 33, 40),
                              nan_guard=True)
    out = fusionlang.compile(fusionlang.fuse(graph, "apollo_patterns"))
    assert strategies_of(out) == ["attention template"]
    feeds = random_feeds(graph, 6)
    feeds["bias"] = np.triu(np.full((1, 1, 33, 40), -np.inf, np.float32), 1)
    feeds["bias"][..., 7, :] = -np.inf  # a fully masked row: 0s, not NaN
    got = out.run(feeds)[graph.outputs[0]]
    assert (got[:, :, 7] == 0).all() and not np.isnan(got).any()
    assert_matches_reference(graph, feeds, got)


@pytest.mark.parametrize("masked", [False, True], ids=["through_q", "causal_mask"])
@pytest.mark.parametrize("n, e", [(40, 16), (150, 5)], ids=["short_rows", "long_rows_narrow_v"])
def test_a_row_guard_on_the_scores_makes_fully_masked_rows_zeros_and_keeps_other_nans(masked, n, e):
    # long rows take the softmax in separate passes with the padding at -inf, which a
    # narrow V's P.V reads: a fully masked row must zero it too
    bias = (1, 1, 33, n) if masked else None
    graph = export_form_graph((1, 4), 33, n, 16, e, q_scale=True, k_scale=True, kt_input=True, bias=bias,
                              row_guard=True)
    out = fusionlang.compile(fusionlang.fuse(graph, "apollo_patterns"))
    assert strategies_of(out) == ["attention template"]
    feeds = random_feeds(graph, 6)
    if bias is None:  # through Q: the scores of row 7 are -inf throughout, those of row 9 NaN
        feeds["kt"][:] = np.abs(feeds["kt"]) + 0.5
        feeds["sq"][:] = feeds["sk"][:] = 1.0
        feeds["q"][..., 7, :] = feeds["q"][..., 9, :] = -np.inf
        feeds["q"][..., 9, 0] = np.nan
    else:  # a causal mask, row 7 fully masked, row 9 all -inf but one NaN
        feeds["bias"] = np.triu(np.full(bias, -np.inf, np.float32), 1)
        feeds["bias"][..., 7, :] = -np.inf
        feeds["bias"][..., 9, :] = -np.inf
        feeds["bias"][..., 9, 3] = np.nan
    got = out.run(feeds)[graph.outputs[0]]
    assert (got[:, :, 7] == 0).all() and np.isnan(got[:, :, 9]).all()
    assert not np.isnan(np.delete(got, 9, axis=2)).any()
    assert_matches_reference(graph, feeds, got)


def training_form_graph(batch, m, n, d, e, mask_shape):
    """A training forward's attention (torch_backend.attention_math under autograd): the
    scores masked_fill'ed with -inf where a bool mask says, the probabilities an output
    too (the backward reads them)."""
    b = GraphBuilder("training_attention")
    x = b.op("matmul", b.input("q", (*batch, m, d)), b.input("kt", (*batch, d, n)))
    x = b.op("where", b.input("masked", mask_shape, "bool"), b.constant(np.array(-np.inf, np.float32)), x)
    p = b.op("softmax", x, axis=-1)
    b.output(b.op("matmul", p, b.input("v", (*batch, n, e))), p)
    return b.build()


@pytest.mark.parametrize("mask_shape", [(9, 12), (2, 1, 9, 12), (3, 1, 1)])
def test_a_masked_fill_before_the_softmax_and_the_saved_probabilities_run_in_the_kernel(mask_shape):
    graph = training_form_graph((2, 3), 9, 12, 8, 5, mask_shape)
    out = fusionlang.compile(fusionlang.fuse(graph, "apollo_patterns"))
    assert strategies_of(out) == ["attention template"]
    feeds = random_feeds(graph, 2)
    causal = np.triu(np.ones((9, 12), bool), 1)
    feeds["masked"] = causal if mask_shape == causal.shape else np.random.default_rng(3).random(mask_shape) < 0.4
    if mask_shape[-2] == 9:  # a fully masked row: NaN without a guard, as torch's softmax gives
        feeds["masked"][..., -1, :] = True
    got, want = out.run(feeds), reference.run(graph, feeds)
    for name in graph.outputs:
        assert np.array_equal(np.isnan(got[name]), np.isnan(want[name]))
        np.testing.assert_allclose(got[name], want[name], rtol=2e-4, atol=2e-5, equal_nan=True)


def test_reshapes_that_regroup_the_batch_dims_around_a_mask_stay_a_loop_nest():
    # (4, 3) heads merged to (12,) before a per-(window, head) mask: no stride of the
    # kernel's (window, head) index reaches the mask's flat dim, so the kernel refuses it
    b = GraphBuilder("merged")
    x = b.op("matmul", b.input("q", (4, 3, 5, 2)), b.input("kt", (4, 3, 2, 6)))
    x = b.op("reshape", b.op("add", b.op("reshape", x, shape=(12, 5, 6)), b.input("mask", (12, 5, 6))),
             shape=(4, 3, 5, 6))
    b.output(b.op("matmul", b.op("softmax", x, axis=-1), b.input("v", (4, 3, 6, 2))))
    merged = fusionlang.fuse(b.build(), "apollo_patterns", feedback=False).graph
    assert plan_attention(merged, [n.name for n in merged.nodes]) is None
    # and a reshape that moves elements between rows is no relabelling of the batch
    b = GraphBuilder("rows")
    x = b.op("reshape", b.op("matmul", b.input("q", (2, 6, 2)), b.input("kt", (2, 2, 6))), shape=(2, 4, 9))
    b.output(b.op("matmul", b.op("softmax", x, axis=-1), b.input("v", (2, 9, 2))))
    rows = fusionlang.fuse(b.build(), "apollo_patterns", feedback=False).graph
    assert plan_attention(rows, [n.name for n in rows.nodes]) is None


def unet_like_block(tokens=64, channels=16, heads=2):
    """A UNet transformer block's self-attention as torch exports it: the projections'
    outputs scaled by d^-1/4 each, K^T made by reshapes and a transpose of the heads."""
    rng = np.random.default_rng(0)
    d = channels // heads
    b = GraphBuilder("unet_like")
    x = b.input("x", (1, tokens, channels))
    w = {name: b.constant(rng.standard_normal((channels, channels)).astype(np.float32) * 0.3) for name in "qkvo"}
    s = b.constant(np.array([d ** -0.25], np.float32))

    def heads_first(t):
        return b.op("transpose", b.op("reshape", b.op("matmul", x, w[t]), shape=(1, tokens, heads, d)), perm=[0, 2, 1, 3])

    q = b.op("mul", heads_first("q"), s)
    k = b.op("reshape", heads_first("k"), shape=(heads, tokens, d))
    kt = b.op("mul", b.op("reshape", b.op("transpose", k, perm=[0, 2, 1]), shape=(1, heads, d, tokens)), s)
    p = b.op("softmax", b.op("matmul", q, kt), axis=-1)
    o = b.op("reshape", b.op("transpose", b.op("matmul", p, heads_first("v")), perm=[0, 2, 1, 3]),
             shape=(1, tokens, channels))
    b.output(b.op("matmul", o, w["o"]))
    return b.build()


def swin_like_block(windows=4, heads=3, side=7, d=8):
    """A shifted-window attention block as torchvision's Swin exports it: Q scaled, the
    relative-position bias (1, heads, m, m) and the shift mask (1, windows, 1, m, m)."""
    rng = np.random.default_rng(1)
    m, channels = side * side, heads * d
    b = GraphBuilder("swin_like")
    x = b.input("x", (windows, m, channels))
    qkv = b.op("matmul", x, b.constant(rng.standard_normal((channels, 3 * channels)).astype(np.float32) * 0.3))
    parts = b.op("transpose", b.op("reshape", qkv, shape=(windows, m, 3, heads, d)), perm=[2, 0, 3, 1, 4])
    q, k, v = (b.op("squeeze", b.op("slice", parts, starts=[i], ends=[i + 1], axes=[0]), axes=[0]) for i in range(3))
    q = b.op("mul", q, b.constant(np.array(d ** -0.5, np.float32)))
    x = b.op("add", b.op("matmul", q, b.op("transpose", k, perm=[0, 1, 3, 2])),
             b.constant(rng.standard_normal((1, heads, m, m)).astype(np.float32)))
    shift = np.where(rng.random((1, windows, 1, m, m)) < 0.3, -100.0, 0.0).astype(np.float32)
    x = b.op("reshape", b.op("add", b.op("reshape", x, shape=(1, windows, heads, m, m)), b.constant(shift)),
             shape=(windows, heads, m, m))
    o = b.op("matmul", b.op("softmax", x, axis=-1), v)
    b.output(b.op("reshape", b.op("transpose", o, perm=[0, 2, 1, 3]), shape=(windows, m, channels)))
    return b.build()


@pytest.mark.parametrize("block", [unet_like_block, swin_like_block])
def test_unet_and_swin_blocks_compile_to_one_attention_kernel_under_the_default_rules(block):
    graph = block()
    out = fusionlang.compile(fusionlang.fuse(graph))
    attention = [k for k in out.kernels if k.strategy == "attention template"]
    assert len(attention) == 1
    ops = [graph.node(n).op for n in attention[0].nodes if n in graph.index.by_name]
    assert ops.count("matmul") == 2  # QK^T and P.V, the softmax opened between them
    feeds = random_feeds(graph, 5)
    assert_matches_reference(graph, feeds, out.run(feeds)[graph.outputs[0]])
