"""Groups run as the GEMM template through the whole pipeline: conv (1-D and 2-D, every
attribute), matmul (batched, broadcast) and gemm (transposes, alpha, beta, c) with random
epilogues, against the reference interpreter on the unfused graph."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import fusionlang
from fusionlang import reference
from fusionlang.backend import gemm_template, template
from fusionlang.backend.gemm_template import gemv_kind
from fusionlang.ops import GraphBuilder
from fusionlang.ops.access import i_sym

EPILOGUE_OPS = ["relu", "tanh", "bias", "residual", "scale", "clip", "sigmoid_mul", "gelu_tanh", "gelu_erf", "specials"]
#: what the "specials" epilogue adds, here and there: NaN, infinities, huge, subnormal, -0
SPECIALS = np.float32([np.nan, np.inf, -np.inf, 3e38, -3e38, 1e-40, -0.0, 40.0, -40.0])


@pytest.fixture(autouse=True)
def _small_problems_use_the_template(monkeypatch):
    # the tests' shapes are tiny; in production a GEMM this small stays a loop nest
    monkeypatch.setattr(template, "MIN_MACS", 0)


def _epilogue(draw, b, y, shape, feeds, rng, channel_axis):
    for op in draw(st.lists(st.sampled_from(EPILOGUE_OPS), max_size=4)):
        if op in ("relu", "tanh"):
            y = getattr(b, op)(y)
        elif op == "bias":
            bshape = [1] * len(shape)
            bshape[channel_axis] = shape[channel_axis]
            y = b.add(y, b.constant(rng.standard_normal(bshape).astype(np.float32)))
        elif op == "residual":
            name = f"r{len(feeds)}"
            feeds[name] = rng.standard_normal(shape).astype(np.float32)
            y = b.add(y, b.input(name, shape))
        elif op == "scale":
            y = b.mul(y, b.constant(np.float32(draw(st.sampled_from([0.5, -2.0, 3.0])))))
        elif op == "clip":
            y = b.clip(y, min=-1.0, max=1.5)
        elif op.startswith("gelu"):
            y = _gelu(b, y, op)
        elif op == "specials":
            name = f"r{len(feeds)}"
            values = rng.standard_normal(shape).astype(np.float32).reshape(-1)
            values[rng.integers(0, values.size, size=max(1, values.size // 4))] = rng.choice(SPECIALS, max(1, values.size // 4))
            feeds[name] = values.reshape(shape)
            y = b.add(y, b.input(name, shape))
        else:
            y = b.mul(y, b.sigmoid(y))
    return y


def _gelu(b, y, kind):
    """GPT-2's tanh GELU, with ONNX's Pow(x, 3.0) (the vectorized tanh and x*x*x), or BERT's erf one."""
    def c(value):
        return b.constant(np.float32(value))

    if kind == "gelu_tanh":
        inner = b.tanh(b.mul(b.add(y, b.mul(b.pow(y, c(3.0)), c(0.044715))), c(0.7978845608)))
    else:
        inner = b.erf(b.mul(y, c(0.7071067812)))
    return b.mul(b.mul(y, c(0.5)), b.add(inner, c(1.0)))


def _check(graph, feeds, expect_template=True):
    plan = fusionlang.fuse(graph, "apollo")
    compiled = fusionlang.compile(plan, "c")
    strategies = [k.strategy for k in compiled.kernels]
    if expect_template:
        assert "gemm template" in strategies, strategies
    got = compiled.run(feeds)
    want = reference.run(graph, feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-4, atol=2e-4)
    return compiled


def conv_case(draw, groups=st.integers(1, 3), channels=st.integers(1, 3), strides=st.integers(1, 2)):
    """A conv (1-D or 2-D, every attribute, random groups) with a random epilogue: (graph,
    feeds), or None when the window does not fit."""
    rank = draw(st.sampled_from([1, 2]))
    group = draw(groups)
    cin, oc = group * draw(st.integers(1, 3)), group * draw(channels)
    spatial = tuple(draw(st.integers(1, 8)) for _ in range(rank))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    strides = tuple(draw(strides) for _ in range(rank))
    dilations = tuple(draw(st.integers(1, 2)) for _ in range(rank))
    pads = tuple(draw(st.integers(0, 2)) for _ in range(2 * rank))  # begin and end may differ
    out = [(n + pads[a] + pads[rank + a] - d * (k - 1) - 1) // s + 1
           for a, (n, k, s, d) in enumerate(zip(spatial, kernel, strides, dilations))]
    if min(out) < 1:
        return None
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    batch = draw(st.integers(1, 2))
    b = GraphBuilder("conv")
    x = b.input("x", (batch, cin) + spatial)
    feeds = {"x": rng.standard_normal((batch, cin) + spatial).astype(np.float32)}
    w = b.constant(rng.standard_normal((oc, cin // group) + kernel).astype(np.float32))
    args = [x, w] + ([b.constant(rng.standard_normal(oc).astype(np.float32))] if draw(st.booleans()) else [])
    y = b.conv(*args, strides=strides, dilations=dilations, pads=pads, group=group)
    y = _epilogue(draw, b, y, (batch, oc, *out), feeds, rng, 1)
    b.output(y)
    return b.build(), feeds


def matmul_case(draw, sizes=st.integers(1, 19)):
    """A matmul (batched, broadcast, constant or input weights) with a random epilogue."""
    m, k, n = (draw(sizes) for _ in range(3))
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    a_batch = tuple(1 if draw(st.booleans()) else d for d in batch)
    b_batch = batch[draw(st.integers(0, len(batch))):]  # b may have fewer batch dims
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    b = GraphBuilder("matmul")
    x = b.input("x", a_batch + (m, k))
    feeds = {"x": rng.standard_normal(a_batch + (m, k)).astype(np.float32)}
    weight = rng.standard_normal(b_batch + (k, n)).astype(np.float32)
    w = b.constant(weight) if draw(st.booleans()) else b.input("w", weight.shape)
    if w == "w":
        feeds["w"] = weight
    y = b.matmul(x, w)
    y = _epilogue(draw, b, y, tuple(np.broadcast_shapes(a_batch, b_batch)) + (m, n), feeds, rng, -1)
    b.output(y)
    return b.build(), feeds


def gemm_case(m, k, n, trans_a, trans_b, alpha, beta, c_shape):
    """relu(gemm) with the given transposes, alpha, beta and shape of c: (graph, feeds)."""
    rng = np.random.default_rng(m * 289 + k * 17 + n)
    b = GraphBuilder("gemm")
    a_shape = (k, m) if trans_a else (m, k)
    x = b.input("a", a_shape)
    w = b.constant(rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32))
    args = [x, w]
    if c_shape != "none":
        shape = {"row": (n,), "full": (m, n), "scalar": (1,)}[c_shape]
        args.append(b.constant(rng.standard_normal(shape).astype(np.float32)))
    b.output(b.relu(b.gemm(*args, trans_a=trans_a, trans_b=trans_b, alpha=alpha, beta=beta)))
    return b.build(), {"a": rng.standard_normal(a_shape).astype(np.float32)}


@settings(max_examples=20)
@given(data=st.data())
def test_conv_groups_with_random_epilogues_match_the_reference(data):
    case = conv_case(data.draw)
    if case is not None:
        _check(*case)


@settings(max_examples=25)
@given(data=st.data())
def test_pool_groups_every_attribute_with_random_epilogues_and_specials_match_the_reference(data):
    draw = data.draw
    op = draw(st.sampled_from(["max_pool", "average_pool"]))
    rank = draw(st.sampled_from([1, 2]))
    spatial = tuple(draw(st.integers(1, 9)) for _ in range(rank))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    strides = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    dilations = tuple(draw(st.integers(1, 2)) for _ in range(rank))
    pads = tuple(draw(st.integers(0, k - 1)) for k in kernel * 2)  # ONNX: pads below the kernel
    attrs = dict(kernel_shape=kernel, strides=strides, dilations=dilations, pads=pads,
                 ceil_mode=draw(st.integers(0, 1)))
    if op == "average_pool":
        attrs["count_include_pad"] = draw(st.integers(0, 1))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    channels, batch = draw(st.integers(1, 4)), draw(st.integers(1, 2))
    x = rng.standard_normal((batch, channels) + spatial).astype(np.float32)
    specials = draw(st.lists(st.sampled_from([np.nan, np.inf, -np.inf, -0.0]), min_size=1, max_size=3))
    for value in specials:
        x.flat[int(rng.integers(x.size))] = value
    b = GraphBuilder("pool")
    try:
        y = getattr(b, op)(b.input("x", x.shape), **attrs)
    except fusionlang.FuseError:
        return  # the window does not fit the input
    out_shape = b.build().types[y].shape
    feeds = {"x": x}
    y = _epilogue(draw, b, y, out_shape, feeds, rng, 1)
    b.output(y)
    graph = b.build()
    plan = fusionlang.fuse(graph, "apollo")
    compiled = fusionlang.compile(plan, "c")
    assert "gemm template" in [k.strategy for k in compiled.kernels]
    got = compiled.run(feeds)
    with np.errstate(all="ignore"):
        want = reference.run(graph, feeds)
    for name in want:
        np.testing.assert_array_equal(np.isnan(got[name]), np.isnan(want[name]))
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("strides", [(1, 1), (2, 2)])  # the plane body and the row body
def test_max_pool_template_propagates_nan_and_never_picks_padding(strides):
    x = np.full((1, 2, 6, 7), -np.inf, np.float32)
    x[0, 0, 2, 3] = np.nan
    x[0, 1] = -3.0
    b = GraphBuilder("pool")
    b.output(b.max_pool(b.input("x", x.shape), kernel_shape=(3, 3), strides=strides, pads=(1, 1, 1, 1)))
    graph = b.build()
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c")
    assert [k.strategy for k in compiled.kernels] == ["gemm template"]
    got = compiled.run({"x": x})[graph.outputs[0]]
    np.testing.assert_array_equal(got, reference.run(graph, {"x": x})[graph.outputs[0]])
    assert np.isnan(got[0, 0]).any() and (got[0, 1] == -3.0).all()


@pytest.mark.parametrize("op", ["depthwise", "max_pool", "average_pool"])
def test_stride_one_windows_on_every_plane_size_up_to_17_match_the_reference(op):
    # the padded-plane body on each width, a multiple of 8 included: GCC 12 miscompiled an
    # earlier form of its padding copy on a 6x6 and a 14x14 plane (2 of 6 values per row)
    rng = np.random.default_rng(5)
    b = GraphBuilder(op)
    feeds = {}
    for size in range(1, 18):
        shape = (1, 3, size, size + (size % 3))
        feeds[f"x{size}"] = rng.standard_normal(shape).astype(np.float32)
        x = b.input(f"x{size}", shape)
        if op == "depthwise":
            w = b.constant(rng.standard_normal((3, 1, 3, 3)).astype(np.float32))
            b.output(b.conv(x, w, pads=(1, 1, 1, 1), group=3))
        else:
            b.output(getattr(b, op)(x, kernel_shape=(3, 3), pads=(1, 1, 1, 1)))
    graph = b.build()
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c")
    assert [k.strategy for k in compiled.kernels] == ["gemm template"] * 17
    got, want = compiled.run(feeds), reference.run(graph, feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5, err_msg=name)


@settings(max_examples=15)
@given(data=st.data())
def test_matmul_groups_with_batches_broadcasts_and_epilogues_match_the_reference(data):
    _check(*matmul_case(data.draw))


@settings(max_examples=10)
@given(m=st.integers(1, 17), k=st.integers(1, 17), n=st.integers(1, 17), trans_a=st.integers(0, 1),
       trans_b=st.integers(0, 1), alpha=st.sampled_from([1.0, 0.5]), beta=st.sampled_from([0.0, 1.0, 2.0]),
       c_shape=st.sampled_from(["none", "row", "full", "scalar"]))
def test_gemm_groups_with_transposes_alpha_beta_and_c_match_the_reference(m, k, n, trans_a, trans_b, alpha, beta,
                                                                         c_shape):
    _check(*gemm_case(m, k, n, trans_a, trans_b, alpha, beta, c_shape))


def test_a_group_that_exports_the_conv_output_and_its_activation_stores_both():
    rng = np.random.default_rng(0)
    b = GraphBuilder("two")
    x = b.input("x", (1, 3, 6, 6))
    c = b.conv(x, b.constant(rng.standard_normal((4, 3, 3, 3)).astype(np.float32)), pads=(1, 1, 1, 1))
    r = b.relu(c)
    b.output(c, b.tanh(r))
    graph = b.build()
    plan = fusionlang.fuse(graph, "apollo")
    compiled = _check(graph, {"x": rng.standard_normal((1, 3, 6, 6)).astype(np.float32)})
    assert len(compiled.kernels) <= len(plan.groups)


@pytest.mark.parametrize("matmul", [False, True])
def test_an_epilogue_reading_the_gemms_own_operand_takes_it_as_a_parameter(matmul):
    # a residual block adds the conv's input to its output: the epilogue reads the array the
    # GEMM reads as B (the conv's input) or A (the matmul's), which must still reach it
    rng = np.random.default_rng(2)
    b = GraphBuilder("residual")
    x = b.input("x", (2, 8, 4, 4) if not matmul else (8, 8))
    w = b.constant(rng.standard_normal((8, 8, 3, 3) if not matmul else (8, 8)).astype(np.float32))
    y = b.matmul(x, w) if matmul else b.conv(x, w, kernel_shape=(3, 3), pads=(1, 1, 1, 1))
    b.output(b.relu(b.add(x, y)))
    graph = b.build()
    _check(graph, {"x": rng.standard_normal(graph.types["x"].shape).astype(np.float32)})


def _one_group(graph):
    """The graph fused as one group, as a partitioner that takes everything would."""
    from fusionlang.engine.plan import single_group_plan

    return single_group_plan(graph)


def test_a_prologue_runs_as_a_loop_nest_before_the_template():
    rng = np.random.default_rng(1)
    b = GraphBuilder("prologue")
    x = b.input("x", (1, 4, 5, 5))
    pre = b.relu(b.mul(x, b.constant(rng.standard_normal((1, 4, 1, 1)).astype(np.float32))))
    y = b.tanh(b.conv(pre, b.constant(rng.standard_normal((3, 4, 3, 3)).astype(np.float32)), pads=(1, 1, 1, 1)))
    b.output(y)
    graph = b.build()
    plan = _one_group(graph)
    planned = template.plan_template(plan, plan.groups[0], dict(graph.constants))
    assert planned.before is not None and planned.after is None
    assert pre in planned.scratch  # the prologue's result goes through memory
    feeds = {"x": rng.standard_normal((1, 4, 5, 5)).astype(np.float32)}
    compiled = fusionlang.compile(plan, "c")
    assert [k.strategy for k in compiled.kernels] == ["gemm template"] and compiled.kernels[0].nests >= 2
    np.testing.assert_allclose(compiled.run(feeds)[y], reference.run(graph, feeds)[y], rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("after", ["concat", "reduce", "transpose"])
def test_what_the_epilogue_cannot_take_runs_as_a_loop_nest_after_the_template(after):
    rng = np.random.default_rng(3)
    b = GraphBuilder("after")
    x = b.input("x", (2, 3, 6, 6))
    other = b.input("o", (2, 2, 6, 6))
    c = b.relu(b.conv(x, b.constant(rng.standard_normal((5, 3, 3, 3)).astype(np.float32)), pads=(1, 1, 1, 1)))
    if after == "concat":
        y = b.sigmoid(b.concat(other, c, axis=1))
    elif after == "reduce":
        y = b.reduce_sum(c, axes=[2, 3], keepdims=1)
    else:
        y = b.transpose(c, perm=[0, 2, 3, 1])
    b.output(y)
    graph = b.build()
    plan = _one_group(graph)
    planned = template.plan_template(plan, plan.groups[0], dict(graph.constants))
    assert planned is not None
    feeds = {"x": rng.standard_normal((2, 3, 6, 6)).astype(np.float32),
             "o": rng.standard_normal((2, 2, 6, 6)).astype(np.float32)}
    compiled = fusionlang.compile(plan, "c")
    assert [k.strategy for k in compiled.kernels] == ["gemm template"]
    np.testing.assert_allclose(compiled.run(feeds)[y], reference.run(graph, feeds)[y], rtol=2e-4, atol=2e-4)


def test_a_channel_shuffle_after_the_conv_leaves_its_activation_in_the_epilogue():
    # shufflenet: conv + relu, then reshape -> transpose -> reshape; the relu belongs to the
    # template's epilogue (one trip through memory), only the shuffle runs after it
    rng = np.random.default_rng(4)
    b = GraphBuilder("shuffle")
    x = b.input("x", (1, 3, 6, 6))
    c = b.relu(b.conv(x, b.constant(rng.standard_normal((8, 3, 3, 3)).astype(np.float32)), pads=(1, 1, 1, 1)))
    shuffled = b.transpose(b.reshape(c, shape=[1, 2, 4, 6, 6]), perm=[0, 2, 1, 3, 4])
    y = b.reshape(shuffled, shape=[1, 8, 6, 6])
    b.output(y)
    graph = b.build()
    plan = _one_group(graph)
    planned = template.plan_template(plan, plan.groups[0], dict(graph.constants))
    assert [s.node.op for s in planned.epilogue] == ["relu"]
    assert planned.after is not None and planned.before is None
    # read through the three views, the shuffle permutes whole channels: only the channel
    # index is divided, each row of 6x6 is a plain contiguous read
    (read,) = [r for st in planned.after.prog.stmts for r in st.reads if r.array is not None]
    divided = {a for e in read.index for a in sp.sympify(e).atoms(sp.floor, sp.Mod)}
    assert divided and all(a.free_symbols == {i_sym(1)} for a in divided), read.index
    feeds = {"x": rng.standard_normal((1, 3, 6, 6)).astype(np.float32)}
    compiled = fusionlang.compile(plan, "c")
    assert [k.strategy for k in compiled.kernels] == ["gemm template"]
    np.testing.assert_allclose(compiled.run(feeds)[y], reference.run(graph, feeds)[y], rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("case", ["shuffled", "groups differ", "relu read outside"])
def test_a_grouped_convs_shuffle_is_where_the_template_stores(case):
    """shufflenet's unit: a grouped 1x1 conv + relu, then a shuffle of as many groups. Row q
    of conv group g is output channel q * G + g: the template stores there directly (C's
    rows step G planes) and no copy runs after it. Not when the shuffle has other groups
    or something outside reads the relu."""
    rng = np.random.default_rng(5)
    groups, channels, shuffle = 3, 12, 3 if case != "groups differ" else 2
    b = GraphBuilder("shuffle")
    x = b.input("x", (2, 6, 5, 7))
    c = b.relu(b.conv(x, b.constant(rng.standard_normal((channels, 6 // groups, 1, 1)).astype(np.float32)),
                      group=groups), name="c")
    parts = b.reshape(c, shape=[2, shuffle, channels // shuffle, 5, 7])
    y = b.reshape(b.transpose(parts, perm=[0, 2, 1, 3, 4]), shape=[2, channels, 5, 7], name="y")
    b.output(y)
    if case == "relu read outside":
        b.output(c)
    stored = case == "shuffled"
    planned = _stored_through_views(b.build(), y, stored, rng)
    assert planned.problem.c.rows == (groups * 35 if stored else 35)


def _stored_through_views(graph, last, stored: bool, rng):
    """The graph's one group planned and run: the template stores into ``last`` (no loop
    nest after it) exactly when ``stored``, and the numbers are the reference's either way."""
    plan = _one_group(graph)
    planned = template.plan_template(plan, plan.groups[0], dict(graph.constants))
    assert (planned.after is None) == stored and (planned.c_param.value == last) == stored
    feeds = {name: rng.standard_normal(graph.types[name].shape).astype(np.float32) for name in graph.inputs}
    compiled = fusionlang.compile(plan, "c")
    assert (compiled.kernels[0].nests == 1) == stored
    got, want = compiled.run(feeds), reference.run(graph, feeds)
    for name in graph.outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-4, atol=2e-4)
    return planned


def test_templates_can_be_switched_off_and_give_the_same_numbers():
    rng = np.random.default_rng(2)
    b = GraphBuilder("off")
    x = b.input("x", (2, 8, 16))
    y = b.relu(b.matmul(x, b.constant(rng.standard_normal((16, 12)).astype(np.float32))))
    b.output(y)
    graph = b.build()
    plan = fusionlang.fuse(graph, "apollo")
    feeds = {"x": rng.standard_normal((2, 8, 16)).astype(np.float32)}
    on, off = fusionlang.compile(plan, "c"), fusionlang.compile(plan, "c", templates=False)
    assert [k.strategy for k in on.kernels] == ["gemm template"]
    assert "gemm template" not in [k.strategy for k in off.kernels]
    np.testing.assert_allclose(on.run(feeds)[y], off.run(feeds)[y], rtol=1e-5, atol=1e-5)


def test_float64_and_small_problems_stay_loop_nests(monkeypatch):
    monkeypatch.setattr(template, "MIN_MACS", 4096)
    b = GraphBuilder("small")
    x = b.input("x", (2, 3))
    y = b.matmul(x, b.constant(np.ones((3, 4), np.float32)))
    b.output(y)
    plan = fusionlang.fuse(b.build(), "apollo")
    assert all(template.plan_template(plan, g, dict(plan.graph.constants)) is None for g in plan.groups)
    b = GraphBuilder("f64")
    x = b.input("x", (64, 64), dtype="float64")
    y = b.matmul(x, b.constant(np.ones((64, 64))))
    b.output(y)
    plan = fusionlang.fuse(b.build(), "apollo")
    assert all(template.plan_template(plan, g, dict(plan.graph.constants)) is None for g in plan.groups)


def test_random_graphs_with_templates_everywhere_stay_equivalent(monkeypatch):
    from fusionlang.backend import runtime
    from fusionlang.lang import load_rules
    from fusionlang.testing import COMPOUND_FAMILIES, check_equivalence_many, sample_graphs

    planned = []

    def counting(*args, **kwargs):
        found = template.plan_template(*args, **kwargs)
        planned.append(found is not None)
        return found

    monkeypatch.setattr(runtime, "plan_template", counting)
    graphs = sample_graphs(60, seed=11, min_nodes=3, max_nodes=10, families=COMPOUND_FAMILIES)
    verdicts = check_equivalence_many(graphs, load_rules("apollo"), "apollo", batch=30)
    mismatches = [v for v in verdicts if v.stage == "compare"]
    assert not mismatches, "\n\n".join(v.report() for v in mismatches[:3])
    assert sum(planned) >= 5, f"the random graphs should reach the template ({sum(planned)} of {len(planned)})"


def test_openmp_threads_share_the_tiles_and_give_the_same_numbers():
    rng = np.random.default_rng(5)
    b = GraphBuilder("threads")
    x = b.input("x", (1, 16, 20, 20))
    y = b.relu(b.conv(x, b.constant(rng.standard_normal((40, 16, 3, 3)).astype(np.float32)), pads=(1, 1, 1, 1)))
    b.output(y)
    graph = b.build()
    plan = fusionlang.fuse(graph, "apollo")
    feeds = {"x": rng.standard_normal((1, 16, 20, 20)).astype(np.float32)}
    threaded = fusionlang.compile(plan, "c", openmp=True)
    # one team for the conv (16*3*3 x 40 x 400 multiply-adds), sharing the tiles, not only the slivers
    assert "#pragma omp parallel if" in threaded.sources and "#pragma omp for collapse(2)" in threaded.sources
    np.testing.assert_allclose(threaded.run(feeds)[y], reference.run(graph, feeds)[y], rtol=2e-4, atol=2e-4)


def test_packing_buffers_that_cannot_be_allocated_are_a_one_line_resource_error(monkeypatch):
    from fusionlang.errors import ResourceError

    monkeypatch.setenv("FUSIONLANG_COPT", "-O2 -DFL_ALLOC_LIMIT=4096")
    rng = np.random.default_rng(6)
    b = GraphBuilder("oom")
    x = b.input("x", (64, 96))
    y = b.relu(b.matmul(x, b.input("w", (96, 80))))
    b.output(y)
    compiled = fusionlang.compile(fusionlang.fuse(b.build(), "apollo"), "c")
    feeds = {"x": rng.standard_normal((64, 96)).astype(np.float32), "w": rng.standard_normal((96, 80)).astype(np.float32)}
    kernel = compiled.kernels[0]
    assert kernel.strategy == "gemm template"
    with pytest.raises(ResourceError, match=rf"^out of memory allocating \d+ bytes in kernel {kernel.name}$"):
        compiled.run(feeds)
    monkeypatch.delenv("FUSIONLANG_COPT")
    np.testing.assert_allclose(fusionlang.compile(fusionlang.fuse(b.build(), "apollo"), "c").run(feeds)[y],
                               np.maximum(feeds["x"] @ feeds["w"], 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("group,pads", [(1, [0, 0, 0, 0]), (2, [0, 0, 0, 0]), (1, [1, 1, 1, 1])])
def test_a_pointwise_conv_reads_its_input_as_a_matrix(group, pads):
    # 1x1, stride 1, unpadded: packed as a [channels, pixels] matrix, whole rows at a time,
    # across batch and groups; padded, it stays an im2col, read in place from its padded
    # planes (its padded width is its output's) (20 channels: K past the short kernel's,
    # which reads a matrix in place; 9x8 planes: past those whose images fold)
    rng = np.random.default_rng(3)
    b = GraphBuilder("pointwise")
    x = b.input("x", (2, 20, 9, 8))
    w = b.constant(rng.standard_normal((6, 20 // group, 1, 1)).astype(np.float32))
    b.output(b.relu(b.conv(x, w, group=group, pads=pads), name="y"))
    graph = b.build()
    feeds = {"x": rng.standard_normal((2, 20, 9, 8)).astype(np.float32)}
    plan = fusionlang.fuse(graph, "apollo")
    compiled = fusionlang.compile(plan, "c")
    np.testing.assert_allclose(compiled.run(feeds)["y"], reference.run(graph, feeds)["y"], rtol=1e-5, atol=1e-5)
    (planned,) = [tg for g in plan.groups if (tg := template.plan_template(plan, g, dict(plan.graph.constants)))]
    kernel = gemm_template.gemm_function("k", planned.problem, planned.blocking, packed_a=planned.packed_a,
                                         packed_b=planned.packed_b)
    b_packers = {helper.name.rsplit("_", 1)[0] for helper in kernel.driver.called
                 if "_pack_" in helper.name and "_pack_a_" not in helper.name}
    direct = any("micro_direct" in helper.name for helper in kernel.driver.called)
    assert (not b_packers and direct) if any(pads) else (b_packers == {"fl_gemm_pack_b"} and not direct)


@pytest.mark.parametrize("width,stride,packer", [(64, 1, "copies"), (64, 2, "copies_s2"), (1, 1, "gather")])
def test_a_stride_1_conv_on_wide_rows_packs_by_copying_runs(width, stride, packer, monkeypatch):
    # densenet's 3x3 convs of 128 channels at 56x56 to 14x14 pack 1.2x faster copying runs of
    # taps than gathering them; a stride of 2 along rows copies runs of every second tap
    # (test_conv_copies_stride2); rows under half a vector are no run worth copying (7x7
    # planes: 1.2x slower). Packed, not read in place (test_conv_direct)
    monkeypatch.setattr(gemm_template, "READ_PLANES", False)
    rng = np.random.default_rng(4)
    b = GraphBuilder("copies")
    x = b.input("x", (1, 5, 4, width))
    w = b.constant(rng.standard_normal((6, 5, 3, 3)).astype(np.float32))
    b.output(b.relu(b.conv(x, w, pads=[1, 1, 1, 1], strides=[stride, stride]), name="y"))
    graph = b.build()
    feeds = {"x": rng.standard_normal((1, 5, 4, width)).astype(np.float32)}
    plan = fusionlang.fuse(graph, "apollo")
    np.testing.assert_allclose(fusionlang.compile(plan, "c").run(feeds)["y"], reference.run(graph, feeds)["y"],
                               rtol=1e-5, atol=1e-5)
    (planned,) = [tg for g in plan.groups if (tg := template.plan_template(plan, g, dict(plan.graph.constants)))]
    kernel = gemm_template.gemm_function("k", planned.problem, planned.blocking, packed_a=planned.packed_a,
                                         packed_b=planned.packed_b)
    assert {h.name.rsplit("_", 1)[0] for h in kernel.driver.called if "_pack_" in h.name and "_pack_a_" not in h.name} \
        == {f"fl_gemm_pack_{packer}"}


def test_a_convs_im2col_panel_is_cut_to_a_quarter_of_l2_and_a_matmuls_is_not():
    # densenet's 3x3 conv of 128 channels at 56x56 to 32: its panel (3136 columns of 384
    # taps, 4.8 MB) is packed per call and read back by each row block of A: in L2
    # (0.73 to 0.86 of the time), where a matmul's B of the same shape keeps L3's panel
    from fusionlang.backend.machine import machine_for

    machine = machine_for("avx512", l1d=48 * 1024, l2=2 << 20, l3=256 << 20)
    rng = np.random.default_rng(5)
    b = GraphBuilder("panels")
    x = b.input("x", (1, 128, 56, 56))
    b.output(b.relu(b.conv(x, b.constant(rng.standard_normal((32, 128, 3, 3)).astype(np.float32)), pads=[1] * 4),
                    name="y"))
    m = b.input("m", (32, 1152))
    b.output(b.relu(b.matmul(m, b.input("n", (1152, 3136))), name="z"))
    plan = fusionlang.fuse(b.build(), "apollo")
    planned = {tg.problem.b.__class__.__name__: tg.blocking for g in plan.groups
               if (tg := template.plan_template(plan, g, dict(plan.graph.constants), machine))}
    conv, matmul = planned["Im2Col"], planned["Operand"]
    assert conv.nc * conv.kc * 4 <= machine.l2 // 4 < (conv.nc + conv.nr) * conv.kc * 4
    assert matmul.nc == -(-3136 // matmul.nr) * matmul.nr  # the whole N, as blocking_for gives


@pytest.mark.parametrize("layer,kind", [("matmul", "column"), ("conv", "column"), ("heads", "narrow"),
                                        ("scores", "short")])
def test_skinny_gemms_are_planned_onto_the_gemv_and_narrow_kernels(layer, kind, monkeypatch):
    # W[m, k] . x[k, 1] and a 1x1 conv on a pooled [1, c, 1, 1] vector: the weight read in
    # place by the GEMV kernel (not packed into 6 x 64 tiles that are 63/64 padding); and
    # attention's P.V and Q.K^T with 4-wide heads by the narrow and the short kernel
    rng = np.random.default_rng(5)
    b = GraphBuilder("column")
    if layer == "scores":
        q, kt = b.input("q", (3, 29, 4)), b.input("kt", (3, 4, 37))
        y = b.matmul(q, kt)
        feeds = {"q": rng.standard_normal((3, 29, 4)).astype(np.float32),
                 "kt": rng.standard_normal((3, 4, 37)).astype(np.float32)}
    elif layer == "heads":
        x, v = b.input("x", (3, 29, 37)), b.input("v", (3, 37, 4))
        y = b.matmul(x, v)
        feeds = {"x": rng.standard_normal((3, 29, 37)).astype(np.float32),
                 "v": rng.standard_normal((3, 37, 4)).astype(np.float32)}
    elif layer == "matmul":
        x = b.input("x", (37, 1))
        y = b.matmul(b.constant(rng.standard_normal((29, 37)).astype(np.float32)), x)
        feeds = {"x": rng.standard_normal((37, 1)).astype(np.float32)}
    else:
        x = b.input("x", (1, 37, 1, 1))
        y = b.conv(x, b.constant(rng.standard_normal((29, 37, 1, 1)).astype(np.float32)),
                   b.constant(rng.standard_normal(29).astype(np.float32)))
        feeds = {"x": rng.standard_normal((1, 37, 1, 1)).astype(np.float32)}
    b.output(b.relu(y, name="y"))
    graph = b.build()
    plan = fusionlang.fuse(graph, "apollo")
    planned = template.plan_template(plan, plan.groups[0], dict(plan.graph.constants))
    assert gemv_kind(planned.problem) == kind and not planned.packed_a and not planned.packed_b
    monkeypatch.setattr(gemm_template, "PARALLEL_MIN_MACS", 0)  # threads even at this small size
    for openmp in (False, True):  # threads share the rows (outputs) of each kernel
        compiled = fusionlang.compile(plan, "c", openmp=openmp)
        assert f"template ({kind})" in compiled.sources
        assert ("#pragma omp parallel for" in compiled.sources) == openmp
        np.testing.assert_allclose(compiled.run(feeds)["y"], reference.run(graph, feeds)["y"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("constant", [False, True])
def test_a_few_rows_run_the_gemv_unless_the_weight_is_packed_at_compile_time(constant):
    # a batch of 4 through a transposed weight [29, 37]: an input weight (torch training's
    # classifier gradient) is read in place by the few-rows GEMV, not packed on every call;
    # a constant one is packed once, at compile time, for the blocked kernel
    rng = np.random.default_rng(7)
    b = GraphBuilder("few_rows")
    w = rng.standard_normal((29, 37)).astype(np.float32)
    feeds = {"x": rng.standard_normal((4, 37)).astype(np.float32)}
    if not constant:
        feeds["w"] = w
    b.output(b.relu(b.gemm(b.input("x", (4, 37)), b.constant(w) if constant else b.input("w", (29, 37)), trans_b=1),
                    name="y"))
    graph = b.build()
    plan = fusionlang.fuse(graph, "apollo")
    planned = template.plan_template(plan, plan.groups[0], dict(plan.graph.constants))
    assert gemv_kind(planned.problem) == "rows" and planned.packed_b == constant
    compiled = fusionlang.compile(plan, "c")
    assert ("template (rows)" in compiled.sources) != constant
    np.testing.assert_allclose(compiled.run(feeds)["y"], reference.run(graph, feeds)["y"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("gelu", ["gelu_tanh", "gelu_erf"])
@pytest.mark.parametrize("m,k,n", [(1, 19, 37), (37, 19, 1), (29, 37, 4), (29, 4, 37), (40, 30, 50)])
def test_gelu_epilogues_keep_special_values_in_every_kernel(m, k, n, gelu):
    # a GELU after a row GEMV, a column GEMV, the narrow, the short and the blocked kernel,
    # its input salted with NaN, infinities, huge values (tanh saturates to exactly +-1, so
    # GELU(-huge) is -0, not -3.6e31), subnormals and -0
    rng = np.random.default_rng(m * 100 + n)
    b = GraphBuilder("gelu")
    x = b.input("x", (m, k))
    feeds = {"x": rng.standard_normal((m, k)).astype(np.float32)}
    salt = rng.standard_normal((m, n)).astype(np.float32).reshape(-1)
    salt[rng.permutation(salt.size)[:max(1, salt.size // 3)]] = np.resize(SPECIALS, max(1, salt.size // 3))
    feeds["s"] = salt.reshape(m, n)
    y = b.add(b.matmul(x, b.constant(rng.standard_normal((k, n)).astype(np.float32))), b.input("s", (m, n)))
    b.output(_gelu(b, y, gelu))
    _check(b.build(), feeds)


def _gelu_backward(b, g, h):
    """torch's erf-GELU backward: g * (Phi(h) + h * phi(h)) at the saved pre-activation h."""
    def c(value):
        return b.constant(np.float32(value))

    cdf = b.mul(b.add(b.erf(b.mul(h, c(0.7071067812))), c(1.0)), c(0.5))
    pdf = b.mul(b.exp(b.mul(b.mul(h, h), c(-0.5))), c(0.3989422804))
    return b.mul(g, b.add(cdf, b.mul(h, pdf)))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("gelu", ["gelu_tanh", "gelu_erf", "gelu_backward"])
def test_linear_gelu_epilogues_run_inline_on_one_and_two_threads(gelu, threads, monkeypatch):
    # a Linear (GEMM + bias) with GPT-2's tanh GELU, BERT's erf GELU or the erf GELU's
    # backward (the GEMM's product times GELU' at a saved activation, salted with NaN,
    # infinities, huge values, subnormals and -0) in its epilogue: the inline vectorizable
    # functions, no libm call, the tiles shared by the threads
    monkeypatch.setattr(gemm_template, "PARALLEL_MIN_MACS", 0)
    rng = np.random.default_rng(11)
    m, k, n = 40, 30, 50
    b = GraphBuilder(gelu)
    y = b.add(b.matmul(b.input("x", (m, k)), b.constant(rng.standard_normal((k, n)).astype(np.float32))),
              b.constant(rng.standard_normal(n).astype(np.float32)))
    feeds = {"x": rng.standard_normal((m, k)).astype(np.float32)}
    if gelu == "gelu_backward":
        saved = 2 * rng.standard_normal(m * n).astype(np.float32)
        saved[rng.permutation(saved.size)[:len(SPECIALS) * 8]] = np.resize(SPECIALS, len(SPECIALS) * 8)
        feeds["h"] = saved.reshape(m, n)
        b.output(_gelu_backward(b, y, b.input("h", (m, n))))
    else:
        b.output(_gelu(b, y, gelu))
    graph = b.build()
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c", threads=threads)
    [kernel] = compiled.kernels
    assert kernel.strategy == "gemm template"
    functions = {"gelu_tanh": ["fl_tanhf("], "gelu_erf": ["fl_erff("], "gelu_backward": ["fl_erff(", "fl_expf("]}
    assert all(f in kernel.source for f in functions[gelu]) and not any(
        f" {f}(" in kernel.source for f in ("tanhf", "erff", "expf", "powf")), kernel.source
    assert ("#pragma omp parallel" in kernel.source) == (threads > 1)
    got, want = compiled.run(feeds), reference.run(graph, feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-4, atol=2e-4)


def _reshaped_gelu_graph(rng, back: bool, bias: bool):
    # BERT's feed-forward: a GEMM over [B*S, N], the GELU over [B, S, N] (the reshape the
    # importer put between them), and (training) a reshape back to [B*S, N]
    b = GraphBuilder("reshaped_gelu")
    x = b.input("x", (8, 6))
    h = b.reshape(b.matmul(x, b.constant(rng.standard_normal((6, 10)).astype(np.float32))), shape=[2, 4, 10])
    if bias:
        h = b.add(h, b.input("r", (2, 4, 10)))
    y = b.mul(_gelu(b, h, "gelu_erf"), b.input("g", (4, 10)))
    y = b.reshape(y, shape=[8, 10]) if back else y
    b.output(y)
    graph = b.build()
    shapes = {"x": (8, 6), "r": (2, 4, 10), "g": (4, 10)}
    return graph, y, {name: rng.standard_normal(shapes[name]).astype(np.float32) for name in graph.inputs}


@pytest.mark.parametrize("back", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_a_reshape_between_the_gemm_and_its_elementwise_chain_keeps_the_chain_in_the_epilogue(back, bias):
    rng = np.random.default_rng(7)
    graph, y, feeds = _reshaped_gelu_graph(rng, back, bias)
    plan = _one_group(graph)
    planned = template.plan_template(plan, plan.groups[0], dict(graph.constants))
    assert planned.after is None and planned.epilogue_refused is None
    assert len(planned.epilogue) >= 5
    compiled = fusionlang.compile(plan, "c")
    assert [(k.strategy, k.nests) for k in compiled.kernels] == [("gemm template", 1)]  # the call alone
    assert "epilogue statement(s)" in compiled.kernels[0].source and "0 epilogue statement(s)" not in compiled.kernels[0].source
    np.testing.assert_allclose(compiled.run(feeds)[y], reference.run(graph, feeds)[y], rtol=2e-4, atol=2e-4)


def test_a_reshape_that_moves_elements_is_refused_with_its_reason():
    # [8, 10] -> [10, 8] is a reshape too, but a transpose after it reads other elements
    rng = np.random.default_rng(8)
    b = GraphBuilder("moved")
    x = b.input("x", (8, 6))
    h = b.transpose(b.reshape(b.matmul(x, b.constant(rng.standard_normal((6, 10)).astype(np.float32))), shape=[10, 8]),
                    perm=[1, 0])
    b.output(b.tanh(h))
    graph = b.build()
    plan = _one_group(graph)
    planned = template.plan_template(plan, plan.groups[0], dict(graph.constants))
    assert planned.after is not None and "at another element" in planned.epilogue_refused


def test_an_elementwise_chain_after_the_template_runs_as_one_loop_nest():
    # BERT's training step: a mask's where and layer norm pieces share the pooler GEMM's
    # group over another box; they ran as one nest per op, each through its own temporary
    rng = np.random.default_rng(9)
    b = GraphBuilder("beside")
    x, u, w = b.input("x", (4, 6)), b.input("u", (2, 3, 5)), b.input("w", (3, 1))
    y = b.matmul(x, b.constant(rng.standard_normal((6, 10)).astype(np.float32)))
    t = b.sub(u, w)
    z = b.mul(b.tanh(t), b.mul(t, b.constant(np.float32(2.0))))
    b.output(y)
    b.output(z)
    graph = b.build()
    plan = _one_group(graph)
    planned = template.plan_template(plan, plan.groups[0], dict(graph.constants))
    assert planned.after is not None and planned.after.nests == 1
    assert "runs over [2, 3, 5]" in planned.epilogue_refused
    feeds = {"x": rng.standard_normal((4, 6)).astype(np.float32), "u": rng.standard_normal((2, 3, 5)).astype(np.float32),
             "w": rng.standard_normal((3, 1)).astype(np.float32)}
    compiled = fusionlang.compile(plan, "c")
    got, want = compiled.run(feeds), reference.run(graph, feeds)
    for value in (y, z):
        np.testing.assert_allclose(got[value], want[value], rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("weight", [(6, 10), (1, 6, 10)])
def test_a_batched_product_with_one_weight_matrix_is_one_gemm_over_the_batches_rows(weight):
    # a Linear on [B, S, E]: B products of S rows packed the weights B times (BERT's
    # feed-forward, m=64 x4: 1.9 ms where one product of 256 rows takes 0.9)
    rng = np.random.default_rng(10)
    b = GraphBuilder("linear3d")
    x = b.input("x", (2, 3, 4, 6))
    y = b.matmul(x, b.input("w", weight))
    y = b.mul(b.add(y, b.input("per_image", (2, 1, 1, 10))), b.input("per_row", (3, 4, 1)))
    b.output(y)
    graph = b.build()
    plan = _one_group(graph)
    planned = template.plan_template(plan, plan.groups[0], dict(graph.constants))
    assert (planned.problem.m, planned.problem.outer, len(planned.epilogue)) == (24, (), 2)
    feeds = {name: rng.standard_normal(graph.types[name].shape).astype(np.float32) for name in graph.inputs}
    compiled = fusionlang.compile(plan, "c")
    assert [k.detail for k in compiled.kernels] == ["GEMM m=24 n=10 k=6"]
    np.testing.assert_allclose(compiled.run(feeds)[y], reference.run(graph, feeds)[y], rtol=2e-4, atol=2e-4)


def test_a_batched_product_with_a_matrix_per_batch_keeps_its_outer_loop():
    b = GraphBuilder("scores")
    y = b.matmul(b.input("q", (2, 4, 6)), b.input("k", (2, 6, 5)))
    b.output(y)
    plan = _one_group(b.build())
    planned = template.plan_template(plan, plan.groups[0], {})
    assert (planned.problem.m, planned.problem.outer) == (4, (2,))


def test_a_boolean_mask_after_the_product_is_refused_naming_the_mask():
    # Llama's causal mask: the template's parameters are float pointers
    b = GraphBuilder("masked")
    scores = b.matmul(b.input("q", (4, 6)), b.input("k", (6, 5)))
    b.output(b.where(b.input("keep", (4, 5), dtype="bool"), scores, b.constant(np.float32(-1e9))))
    plan = _one_group(b.build())
    planned = template.plan_template(plan, plan.groups[0], {})
    assert planned.epilogue_refused == "the group reads or writes keep as bool"


@pytest.mark.parametrize("case", ["heads merged", "batch of heads merged", "rows and columns swapped",
                                  "heads read outside"])
def test_attention_heads_merged_back_are_where_the_product_stores(case):
    """P.V is [B, H, S, D]; transposed to [B, S, H, D] and reshaped to [B, S, H*D] the
    template stores there directly (C's rows step H*D floats, its head step D) and no copy
    runs after it; also from a [B*H, S, D] product viewed as [B, H, S, D] (its outer loop
    split in two). Not when the transpose swaps C's rows and columns (no contiguous
    columns) or something outside reads the product before the views."""
    rng = np.random.default_rng(11)
    batch, heads, seq, dim = 2, 3, 4, 5
    b = GraphBuilder("merge")
    if case == "batch of heads merged":
        pv = b.matmul(b.input("p", (batch * heads, seq, seq)), b.input("v", (batch * heads, seq, dim)))
        pv = b.reshape(pv, shape=[batch, heads, seq, dim], name="pv")
    else:
        pv = b.matmul(b.input("p", (batch, heads, seq, seq)), b.input("v", (batch, heads, seq, dim)), name="pv")
    perm = [0, 1, 3, 2] if case == "rows and columns swapped" else [0, 2, 1, 3]
    merged = b.transpose(pv, perm=perm)
    y = b.reshape(merged, shape=[batch, -1, heads * (dim if perm[1] == 2 else seq)], name="y")
    b.output(y)
    if case == "heads read outside":
        b.output(pv)
    stored = case in ("heads merged", "batch of heads merged")
    planned = _stored_through_views(b.build(), y, stored, rng)
    if stored:
        assert planned.problem.c == gemm_template.Operand(heads * dim, 1, 0, (seq * heads * dim, dim))
