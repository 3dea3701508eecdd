"""Concats run in place: their inputs are written into the output's bytes, and what a run
returns is what the reference computes."""

from __future__ import annotations

import numpy as np
import pytest

import fusionlang
from fusionlang import reference
from fusionlang.backend import runtime
from fusionlang.backend.concat_inplace import split_at_concats
from fusionlang.backend.poly import build_program
from fusionlang.engine.plan import make_group, per_node_plan
from fusionlang.ops import GraphBuilder

RNG = np.random.default_rng(7)


def _weights(*shape):
    return RNG.standard_normal(shape).astype(np.float32) * 0.3


def _branches(batch=1, repeat=False, output_branch=False):
    """x -> three branches (a conv with relu, a 1x1 conv, an elementwise one) -> concat on
    channels -> a conv."""
    b = GraphBuilder("branches")
    x = b.input("x", (batch, 3, 9, 9))
    a = b.relu(b.conv(x, b.constant(_weights(4, 3, 3, 3)), pads=[1, 1, 1, 1]), name="a")
    c = b.conv(x, b.constant(_weights(5, 3, 1, 1)), name="c")
    e = b.tanh(b.mul(x, b.constant(np.float32(2.0))), name="e")
    parts = [a, c, e, a] if repeat else [a, c, e]
    cat = b.concat(*parts, axis=1, name="cat")
    channels = 4 + 5 + 3 + (4 if repeat else 0)
    b.output(b.conv(cat, b.constant(_weights(6, channels, 3, 3)), name="y"))
    if output_branch:
        b.output(c)
    return b.build(), {"x": RNG.standard_normal((batch, 3, 9, 9)).astype(np.float32)}


def _compiled(graph, plan=None, target="c"):
    return fusionlang.compile(plan or fusionlang.fuse(graph, "apollo"), target)


def _agrees(compiled, graph, feeds):
    got, want = compiled.run(feeds), reference.run(graph, feeds)
    for name in graph.outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5)


def _concat_kernels(compiled):
    return [k for k in compiled.kernels if any(compiled.graph.node(n).op == "concat" for n in k.nodes)]


@pytest.mark.parametrize("fused,target", [(True, "c"), (False, "c"), (True, "cuda-emu")])
def test_branches_write_into_the_concat_output(fused, target):
    graph, feeds = _branches()
    compiled = _compiled(graph, None if fused else per_node_plan(graph), target)
    _agrees(compiled, graph, feeds)
    buffers = compiled.buffers.buffers
    for value, at in (("a", 0), ("c", 4 * 81 * 4), ("e", 9 * 81 * 4)):
        assert buffers[value].inside == "cat"
        assert buffers[value].offset == buffers["cat"].offset + at
    assert _concat_kernels(compiled) == [] and compiled.stats.concats_in_place == 1


def test_a_concat_fused_after_a_branch_gets_a_group_of_its_own():
    graph, feeds = _branches()
    conv_a = next(n.name for n in graph.nodes if n.op == "conv")
    tail = [conv_a, "a", "cat"]  # a branch with the concat after it, as Apollo groups inception's
    members = [[n.name] for n in graph.nodes if n.name not in tail and n.name != "y"] + [tail, ["y"]]
    plan = per_node_plan(graph)
    plan.groups = [make_group(graph, k, m) for k, m in enumerate(members)]
    plan.validate()
    split = split_at_concats(plan)
    assert [g.nodes for g in split.groups[-3:]] == [[conv_a, "a"], ["cat"], ["y"]]
    assert "a" in split.groups[-3].outputs and [g.id for g in split.groups] == list(range(len(members) + 1))
    compiled = _compiled(graph, plan)
    _agrees(compiled, graph, feeds)
    assert compiled.buffers.buffers["a"].inside == "cat" and _concat_kernels(compiled) == []


def test_nested_concats_add_up_their_offsets():
    b = GraphBuilder("dense")
    x = b.input("x", (1, 2, 5, 5))
    first = b.concat(b.relu(x, name="r0"), b.exp(b.neg(x), name="n0"), axis=1, name="c1")
    second = b.concat(first, b.sigmoid(first, name="s1"), axis=1, name="c2")
    b.output(b.reduce_sum(second, axes=[1], name="total"), b.tanh(first, name="t"))
    graph = b.build()
    feeds = {"x": RNG.standard_normal((1, 2, 5, 5)).astype(np.float32)}
    for target in ("c", "cuda-emu"):
        compiled = _compiled(graph, per_node_plan(graph), target)
        _agrees(compiled, graph, feeds)
    buffers = compiled.buffers.buffers
    assert buffers["c1"].inside == buffers["r0"].inside == buffers["s1"].inside == "c2"
    assert buffers["n0"].offset == buffers["c2"].offset + 2 * 25 * 4
    assert buffers["s1"].offset == buffers["c2"].offset + 4 * 25 * 4


@pytest.mark.parametrize("case", ["batch of 2", "an input twice", "a branch is a graph output"])
def test_concats_that_cannot_run_in_place_still_copy(case):
    graph, feeds = _branches(batch=2 if case == "batch of 2" else 1, repeat=case == "an input twice",
                             output_branch=case == "a branch is a graph output")
    compiled = _compiled(graph, per_node_plan(graph))
    _agrees(compiled, graph, feeds)
    assert all(b.inside is None for b in compiled.buffers.buffers.values())
    assert len(_concat_kernels(compiled)) == 1 and compiled.stats.concats_in_place == 0


def test_a_concat_of_graph_inputs_or_into_a_graph_output_copies():
    b = GraphBuilder("edges")
    x, y = b.input("x", (1, 4)), b.input("y", (1, 4))
    b.output(b.concat(x, b.relu(y, name="r"), axis=1, name="cat"))
    graph = b.build()
    feeds = {"x": RNG.standard_normal((1, 4)).astype(np.float32), "y": RNG.standard_normal((1, 4)).astype(np.float32)}
    compiled = _compiled(graph, per_node_plan(graph))
    _agrees(compiled, graph, feeds)
    assert all(b.inside is None for b in compiled.buffers.buffers.values())


def _dense_block(last_of_block=False):
    """densenet's pattern: conv -> concat(previous, conv) -> scale, shift, relu, with the
    concat also read by the next concat; Apollo-like grouping fuses conv .. relu."""
    b = GraphBuilder("dense")
    x = b.input("x", (1, 4, 6, 6))
    prev = b.relu(x, name="prev")
    conv = b.conv(prev, b.constant(_weights(2, 4, 3, 3)), pads=[1, 1, 1, 1], name="conv")
    cat = b.concat(prev, conv, axis=1, name="cat")
    act = b.relu(b.add(b.mul(cat, b.constant(_weights(1, 6, 1, 1))), b.constant(_weights(1, 6, 1, 1))), name="act")
    new = b.conv(act, b.constant(_weights(2, 6, 1, 1)), name="new")
    if last_of_block:  # a transition layer follows: nothing but the group reads the concat
        b.output(b.reduce_sum(new, axes=[1], name="y"))
    else:
        b.output(b.reduce_sum(b.concat(cat, new, axis=1, name="cat2"), axes=[1], name="y"))
    graph = b.build()
    fused = [n.name for n in graph.nodes if n.name in ("conv", "cat", "act") or graph.node(n.name).op in ("mul", "add")]
    members, placed = [], False
    for n in graph.nodes:
        if n.name in fused:
            if not placed:
                members.append(fused)
                placed = True
        else:
            members.append([n.name])
    plan = per_node_plan(graph)
    plan.groups = [make_group(graph, k, m) for k, m in enumerate(members)]
    plan.validate()
    return graph, plan, {"x": RNG.standard_normal((1, 4, 6, 6)).astype(np.float32)}


def test_a_concat_inside_a_group_is_cut_out_on_the_cpu_only():
    graph, plan, feeds = _dense_block()
    whole = next(g for g in plan.groups if "cat" in g.nodes)
    cut = split_at_concats(plan)
    pieces = [g.nodes for g in cut.groups if set(g.nodes) & set(whole.nodes)]
    assert pieces == [["conv"], ["cat"], [n for n in whole.nodes if n not in ("conv", "cat")]]
    assert split_at_concats(plan, cut_inside=False) is plan  # a GPU keeps the group: a launch costs more
    compiled = _compiled(graph, plan)
    _agrees(compiled, graph, feeds)
    buffers = compiled.buffers.buffers
    assert buffers["conv"].inside == buffers["prev"].inside == buffers["cat"].inside == "cat2"
    assert _concat_kernels(compiled) == []


def test_the_last_concat_of_a_dense_block_is_cut_out_of_its_group_on_the_cpu():
    """Read only inside its group, by the batch norm after it: its inputs come from before the
    group and from the group's conv, which are stored anyway, so the cut stores nothing more
    (fused with the batch norm, the offset writes left loop fusion no shared loop)."""
    graph, plan, feeds = _dense_block(last_of_block=True)
    whole = next(g for g in plan.groups if "cat" in g.nodes)
    cut = split_at_concats(plan)
    pieces = [g.nodes for g in cut.groups if set(g.nodes) & set(whole.nodes)]
    assert pieces == [["conv"], ["cat"], [n for n in whole.nodes if n not in ("conv", "cat")]]
    assert split_at_concats(plan, cut_inside=False) is plan
    compiled = _compiled(graph, plan)
    _agrees(compiled, graph, feeds)
    buffers = compiled.buffers.buffers
    assert buffers["conv"].inside == buffers["prev"].inside == "cat" and _concat_kernels(compiled) == []
    assert all("distributed" not in k.strategy for k in compiled.kernels)


def test_no_cut_where_the_group_computes_what_the_concat_lays_out():
    """Concat inputs made by elementwise nodes of the group are never stored when the group
    stays whole: cut out, they would be."""
    b = GraphBuilder("inner")
    x = b.input("x", (1, 4, 6, 6))
    cat = b.concat(b.relu(x, name="r"), b.tanh(x, name="t"), axis=1, name="cat")
    b.output(b.sigmoid(cat, name="y"))
    graph = b.build()
    plan = per_node_plan(graph)
    plan.groups = [make_group(graph, 0, [n.name for n in graph.nodes])]
    plan.validate()
    assert split_at_concats(plan) is plan
    _agrees(_compiled(graph, plan), graph, {"x": RNG.standard_normal((1, 4, 6, 6)).astype(np.float32)})


def test_no_cut_where_the_concat_would_copy_anyway():
    graph, plan, _ = _dense_block()
    graph.outputs.append("prev")  # an input of the concat is a graph output: it keeps its own array
    assert split_at_concats(plan) is plan


def test_a_cut_is_recorded_as_decisions_and_keeps_the_other_groups_schedules():
    from fusionlang.engine.decisions import Verdict

    graph, plan, _ = _dense_block()
    whole = next(g for g in plan.groups if "cat" in g.nodes)
    others = [g for g in plan.groups if g is not whole]
    plan.schedules = {g.id: f"schedule of {sorted(g.nodes)}" for g in plan.groups}  # the engine carries them opaque
    plan.template_schedules = {g.id: {"after": f"after {sorted(g.nodes)}"} for g in plan.groups}
    cut = split_at_concats(plan)
    cuts = [d for d in cut.decisions if d.verdict is Verdict.CONCAT_CUT]
    # every edge inside the old group that now crosses groups, and no other
    owner = cut.group_of()
    crossing = {(n.name, r.name) for n in plan.nodes_of(whole) for out in n.outputs
                for r in graph.index.consumers.get(out, ()) if r.name in whole.nodes and owner[r.name] != owner[n.name]}
    assert {d.edge for d in cuts} == crossing and crossing
    assert all("cat (concat)" in d.detail and "runs in place" in d.detail for d in cuts)
    # the groups the cut left alone keep their schedule, under their new ids; the cut one's pieces have none
    kept = {cut.group(gid).nodes[0]: text for gid, text in cut.schedules.items()}
    assert kept == {g.nodes[0]: f"schedule of {sorted(g.nodes)}" for g in others}
    kept = {cut.group(gid).nodes[0]: parts for gid, parts in cut.template_schedules.items()}
    assert kept == {g.nodes[0]: {"after": f"after {sorted(g.nodes)}"} for g in others}


def test_fuse_cuts_the_plan_so_explain_and_compile_read_one_plan():
    """fusionlang.fuse (target c) decides the cut: compile finds nothing left to cut."""
    graph, feeds = _branches()
    plan = fusionlang.fuse(graph, "apollo", target="c")
    assert split_at_concats(plan) is plan
    compiled = fusionlang.compile(plan)
    assert [g.nodes for g in compiled.plan.groups] == [g.nodes for g in plan.groups]
    assert compiled.stats.schedule_searches == 0
    _agrees(compiled, graph, feeds)


def test_a_concat_of_two_thousand_inputs_runs_in_bounded_isl_problems(monkeypatch):
    # one concat of 2,000 relus was one isl problem of 2,000 statements and a C function of
    # 2,001 restrict pointers (1,000: 10 s of codegen, 168 s of gcc); the partitioner makes it
    # a tree of concats of at most max_args - 1 inputs (engine/wide_concat.py)
    b = GraphBuilder("wide")
    parts = [b.relu(b.input(f"x{k}", (1, 4))) for k in range(2000)]
    b.output(b.concat(*parts, axis=1, name="cat"))
    graph = b.build()
    feeds = {name: RNG.standard_normal((1, 4)).astype(np.float32) for name in graph.inputs}
    bound = 64 + 95  # apollo's max_ops relus in a group with a concat of max_args - 1 inputs
    sizes = []

    def counted(*args, **kwargs):
        prog = build_program(*args, **kwargs)
        sizes.append(len(prog.stmts))
        assert sizes[-1] <= bound, f"an isl problem of {sizes[-1]} statements"  # before any C compiler runs
        return prog

    monkeypatch.setattr(runtime, "build_program", counted)
    plan = fusionlang.fuse(graph, "apollo")
    compiled = fusionlang.compile(plan, "c")
    # each relu is scheduled; the 22 concats of 95 or fewer relus run in place, so only the
    # root's 22 slabs (into the graph output, which is not placed) are statements
    assert sum(sizes) == 2000 + 22 and max(sizes) <= bound
    assert compiled.stats.concats_in_place == 22
    output = graph.outputs[0]
    np.testing.assert_array_equal(compiled.run(feeds)[output], reference.run(graph, feeds)[output])


def _torch_dense_block(layers=3, order=None, last_is_output=False):
    """torch's densenet block: every layer concats all the block's features so far (the
    block's input first, then each layer's conv in order) and computes one more from them;
    ``order(features)`` reorders the inputs of the block's last concat."""
    b = GraphBuilder("torch_dense")
    x = b.input("x", (1, 3, 5, 5))
    features = [b.relu(x, name="f0")]
    for k in range(1, layers + 1):
        into = features[0] if k == 1 else b.concat(*features, axis=1, name=f"cat{k - 1}")
        channels = 3 + 2 * (k - 1)
        act = b.relu(b.add(into, b.constant(_weights(1, channels, 1, 1))), name=f"act{k}")
        features.append(b.conv(act, b.constant(_weights(2, channels, 3, 3)), pads=[1, 1, 1, 1], name=f"f{k}"))
    last = b.concat(*(order or list)(features), axis=1, name=f"cat{layers}")
    if last_is_output:
        b.output(last)
    else:
        b.output(b.reduce_sum(last, axes=[1], name="y"))
    return b.build(), {"x": RNG.standard_normal((1, 3, 5, 5)).astype(np.float32)}


def test_a_torch_dense_block_lies_in_its_last_concat_and_copies_nothing():
    graph, feeds = _torch_dense_block()
    compiled = _compiled(graph, per_node_plan(graph))
    _agrees(compiled, graph, feeds)
    buffers = compiled.buffers.buffers
    assert _concat_kernels(compiled) == [] and compiled.stats.concats_in_place == 3
    base = buffers["cat3"].offset
    for value, channels_before in (("cat1", 0), ("cat2", 0), ("f0", 0), ("f1", 3), ("f2", 5), ("f3", 7)):
        assert buffers[value].inside == "cat3"
        assert buffers[value].offset == base + channels_before * 25 * 4


@pytest.mark.parametrize("case", ["a run out of order", "a run cut short"])
def test_a_concat_that_reads_an_earlier_ones_inputs_otherwise_copies(case):
    def reorder(features):
        return [features[1], features[0], *features[2:]] if case == "a run out of order" else features[1:]

    graph, feeds = _torch_dense_block(order=reorder)
    compiled = _compiled(graph, per_node_plan(graph))
    _agrees(compiled, graph, feeds)
    assert [k.nodes for k in _concat_kernels(compiled)] == [["cat3"]]
    assert compiled.buffers.buffers["f1"].inside == "cat2"


def test_a_dense_block_whose_last_concat_is_a_graph_output_copies_only_that_one():
    graph, feeds = _torch_dense_block(last_is_output=True)
    compiled = _compiled(graph, per_node_plan(graph))
    _agrees(compiled, graph, feeds)
    assert [k.nodes for k in _concat_kernels(compiled)] == [["cat3"]]
    assert compiled.buffers.buffers["cat1"].inside == "cat2" and compiled.buffers.buffers["cat2"].inside is None
