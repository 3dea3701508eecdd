"""isl schedules each fused group once from fuse to run: the feedback check's selected
schedule is kept (by group signature), the plan carries each group's, and compile replays it
(fusionlang.backend.schedule_store); nothing is kept between calls."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from helpers import random_feeds

import fusionlang
import fusionlang.backend
import fusionlang.backend.feedback as feedback
import fusionlang.backend.schedule as schedule
import fusionlang.backend.schedule_store as schedule_store
from fusionlang import reference
from fusionlang.backend import template
from fusionlang.ops import GraphBuilder


def _block(b: GraphBuilder, x: str, bias: str) -> str:
    mean = b.reduce_mean(x, axes=(1,))
    centered = b.sub(x, mean)
    var = b.reduce_mean(b.mul(centered, centered), axes=(1,))
    normed = b.div(centered, b.sqrt(b.add(var, bias)))
    e = b.exp(b.sub(normed, b.reduce_max(normed, axes=(1,))))
    return b.add(x, b.div(e, b.reduce_sum(e, axes=(1,))))


def blocks(count=3):
    """``count`` alike blocks (a normalization, a softmax, a residual): groups that repeat."""
    b = GraphBuilder("blocks")
    x = b.input("x", (8, 16))
    bias = b.constant(np.full((1, 16), 0.5, np.float32), name="bias")
    for _ in range(count):
        x = _block(b, x, bias)
    b.output(x)
    return b.build()


class CountingCheck(feedback.FeedbackCheck):
    """A FeedbackCheck that keeps the store fuse() used, to count its searches."""

    made: list = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        CountingCheck.made.append(self)


@pytest.fixture
def fuse_check(monkeypatch):
    """The FeedbackCheck the next fusionlang.fuse() makes."""
    CountingCheck.made = []
    monkeypatch.setattr(fusionlang.backend, "FeedbackCheck", CountingCheck)
    return CountingCheck.made


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_each_fused_group_is_scheduled_once_across_feedback_and_compile(fuse_check, target):
    graph = blocks()
    plan = fusionlang.fuse(graph, "apollo", target=target)
    (check,) = fuse_check
    assert check.target == ("c" if target == "c" else "cuda")
    assert check.store.searches, "the feedback check selected no schedule"
    assert max(check.store.searches.values()) == 1
    assert plan.target == target and plan.schedules
    compiled = fusionlang.compile(plan)
    # compile replayed the plan's schedules rather than selecting again
    assert compiled.target == target and compiled.stats.schedule_searches == 0
    feeds = random_feeds(graph)
    np.testing.assert_allclose(compiled.run(feeds)[graph.outputs[0]], reference.run(graph, feeds)[graph.outputs[0]],
                               rtol=1e-5, atol=1e-5)


def test_a_plan_compiled_for_another_target_is_scheduled_for_that_target():
    plan = fusionlang.fuse(blocks(), "apollo", target="c")
    assert fusionlang.compile(plan, "cuda-emu").stats.schedule_searches > 0


def test_a_replayed_schedule_compiles_to_the_code_a_fresh_search_gives():
    plan = fusionlang.fuse(blocks(), "apollo")
    replayed = fusionlang.compile(plan, "c")
    assert replayed.stats.schedule_searches == 0
    searched = fusionlang.compile(dataclasses.replace(plan, schedules={}), "c")
    assert searched.stats.schedule_searches > 0
    assert replayed.sources == searched.sources


def test_the_plan_json_holds_each_schedule():
    plan = fusionlang.fuse(templated(), "apollo")
    data = json.loads(plan.to_json())
    assert data["target"] == "c"
    want = {str(gid): dataclasses.asdict(choice) for gid, choice in plan.schedules.items()}
    assert data["schedules"] == json.loads(json.dumps(want))
    parts = {str(gid): {part: dataclasses.asdict(choice) for part, choice in chosen.items()}
             for gid, chosen in plan.template_schedules.items()}
    assert parts and data["template_schedules"] == json.loads(json.dumps(parts))


def test_without_feedback_compile_schedules_each_group_structure_once():
    plan = fusionlang.fuse(blocks(), "apollo", feedback=False)
    assert plan.target == "" and plan.schedules == {}
    compiled = fusionlang.compile(plan, "c")
    assert compiled.stats.schedule_searches > 0
    assert max(compiled.schedule_store.searches.values()) == 1


def test_one_check_per_fuse_call_nothing_kept_between_calls(fuse_check):
    fusionlang.fuse(blocks(), "apollo")
    fusionlang.fuse(blocks(), "apollo")
    first, second = fuse_check
    assert first is not second and first.store is not second.store
    assert first.store.searches == second.store.searches  # the second searched again: nothing was shared


def _conv_bias_relu():
    rng = np.random.default_rng(1)
    b = GraphBuilder("conv_epilogue")
    x = b.input("x", (1, 3, 8, 8))
    w = b.constant(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    bias = b.constant(rng.standard_normal(4).astype(np.float32))
    b.output(b.relu(b.conv(x, w, bias, pads=(1, 1, 1, 1))))
    return b.build()


def test_a_conv_and_its_epilogue_are_one_nest_without_a_schedule_search():
    graph = _conv_bias_relu()
    check = feedback.FeedbackCheck()
    assert check(graph, [n.name for n in graph.nodes]) is None
    assert check.store.search_count == 0
    # compiled as loop nests (no template), the group is scheduled once, at compile, and is right
    plan = fusionlang.fuse(graph, "apollo")
    assert len([g for g in plan.groups if g.kind == "kernel"]) == 1 and plan.schedules == {}
    compiled = fusionlang.compile(plan, "c", templates=False)
    assert compiled.stats.schedule_searches == 1
    feeds = random_feeds(graph)
    np.testing.assert_allclose(compiled.run(feeds)[graph.outputs[0]], reference.run(graph, feeds)[graph.outputs[0]],
                               rtol=1e-4, atol=1e-5)


def test_two_template_ops_are_refused_together_and_each_runs_as_its_template(monkeypatch):
    # shufflenet's stem: a max pool, and an average pool reading it
    monkeypatch.setattr(template, "MIN_MACS", 0)  # in production a pool this small stays a loop nest
    b = GraphBuilder("pools")
    x = b.input("x", (1, 4, 16, 16))
    pooled = b.max_pool(x, kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1))
    averaged = b.average_pool(pooled, kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1), count_include_pad=0)
    b.output(pooled, averaged)
    graph = b.build()
    names = [n.name for n in graph.nodes]
    reason = feedback.check_group(graph, names)
    assert reason is not None and "max_pool" in reason and "average_pool" in reason and "compute template" in reason
    plan = fusionlang.fuse(graph, "apollo")
    assert not any(set(g.nodes) >= set(names) for g in plan.groups)
    compiled = fusionlang.compile(plan, "c")
    assert [k.strategy for k in compiled.kernels] == ["gemm template", "gemm template"]
    feeds = random_feeds(graph)
    want = reference.run(graph, feeds)
    for name, value in compiled.run(feeds).items():
        np.testing.assert_allclose(value, want[name], rtol=1e-5, atol=1e-6)


def _weights(rng, *shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def templated():
    """Groups that run as GEMM templates with loop nests around them: a batch norm + relu
    before a conv + bias + relu + residual (a loop nest before the template on the C
    target), a pointwise conv followed by a channel shuffle and a concat (one after it), a
    matmul with a GELU epilogue."""
    rng = np.random.default_rng(3)
    b = GraphBuilder("templated")
    x = b.input("x", (1, 8, 16, 16))
    normed = b.relu(b.add(b.mul(x, b.constant(_weights(rng, 8, 1, 1))), b.constant(_weights(rng, 8, 1, 1))))
    conv = b.relu(b.conv(normed, b.constant(_weights(rng, 8, 8, 3, 3)), b.constant(_weights(rng, 8)),
                         pads=(1, 1, 1, 1)))
    residual = b.add(conv, x)
    pointwise = b.conv(residual, b.constant(_weights(rng, 16, 8, 1, 1)), b.constant(_weights(rng, 16)))
    shuffled = b.reshape(b.transpose(b.reshape(pointwise, shape=(1, 2, 8, 16, 16)), perm=(0, 2, 1, 3, 4)),
                         shape=(1, 16, 16, 16))
    joined = b.concat(shuffled, b.relu(residual), axis=1)
    t = b.input("t", (32, 64))
    product = b.matmul(t, b.constant(_weights(rng, 64, 64)))
    gelu = b.mul(product, b.sigmoid(b.mul(product, b.constant(np.full((1,), 1.702, np.float32)))))
    b.output(joined, gelu)
    return b.build()


def _no_search(*args, **kwargs):
    raise AssertionError("compile searched for a schedule")


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_compile_replays_the_schedules_around_templates(target):
    graph = templated()
    plan = fusionlang.fuse(graph, "apollo", target=target)
    assert plan.template_schedules, "no templated group has a loop nest around its template"
    compiled = fusionlang.compile(plan)
    assert compiled.stats.schedule_searches == 0
    assert any("template" in k.strategy.lower() for k in compiled.kernels)
    feeds = random_feeds(graph)
    want = reference.run(graph, feeds)
    for name, value in compiled.run(feeds).items():
        np.testing.assert_allclose(value, want[name], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_compile_from_a_plan_never_searches_not_even_around_a_template(monkeypatch, target):
    plan = fusionlang.fuse(templated(), "apollo", target=target)
    monkeypatch.setattr(schedule, "select_program", _no_search)
    monkeypatch.setattr(schedule_store, "select_program", _no_search)
    fusionlang.compile(plan)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_replayed_template_parts_compile_to_the_code_a_fresh_search_gives(target):
    plan = fusionlang.fuse(templated(), "apollo", target=target)
    replayed = fusionlang.compile(plan)
    # the loop nests around templates are searched, and counted, when the plan holds no schedule for them
    searched = fusionlang.compile(dataclasses.replace(plan, template_schedules={}))
    assert searched.stats.schedule_searches == sum(len(parts) for parts in plan.template_schedules.values()) > 0
    assert replayed.sources == searched.sources


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_group_of_one_statement_is_scheduled_by_fuse_too(target):
    # the feedback check needs no search to say one statement is one nest (an embedding's
    # gather in BERT), but compile needs its schedule: the plan carries it
    b = GraphBuilder("one")
    b.output(b.exp(b.input("x", (8, 16))))
    plan = fusionlang.fuse(b.build(), "apollo", target=target)
    assert len(plan.schedules) == 1
    assert fusionlang.compile(plan).stats.schedule_searches == 0
