"""The kind of kernel the cost model prices a group as (engine/kernel_kind.py), the cpu
device's per-kind rates (from bench/cpu_rates.py's committed JSON), and a DP partition
that follows them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import fusionlang
from fusionlang.engine import partition
from fusionlang.engine.cost import DEVICES, CostModel, Device
from fusionlang.engine.kernel_kind import (ATTENTION, DENSE, DEPTHWISE, GEMV, GROUPED, KINDS, LOOP, LOOP_CONTRACTION,
                                           POOL, node_kind)
from fusionlang.ops import GraphBuilder

RATES_JSON = Path(__file__).parents[2] / "bench" / "results" / "cpu_rates.json"


def conv_graph(channels_in, channels_out, group, plane=14, kernel=3):
    b = GraphBuilder("conv")
    x = b.input("x", (1, channels_in, plane, plane))
    w = b.constant(np.ones((channels_out, channels_in // group, kernel, kernel), np.float32))
    b.output(b.relu(b.conv(x, w, group=group, pads=(kernel // 2,) * 4, name="c"), name="act"))
    return b.build()


def matmul_graph(a_shape, b_shape, constant_b=True):
    b = GraphBuilder("mm")
    a = b.input("a", a_shape)
    rhs = b.constant(np.ones(b_shape, np.float32)) if constant_b else b.input("b", b_shape)
    b.output(b.matmul(a, rhs, name="mm"))
    return b.build()


def two_matmuls(size, attention=False):
    """matmul -> relu (or, for attention, scale and softmax) -> matmul."""
    b = GraphBuilder("two")
    x = b.input("x", (size, size))
    h = b.matmul(x, b.constant(np.ones((size, size), np.float32)), name="mm1")
    h = b.softmax(b.mul(h, b.constant(np.float32(0.1))), axis=-1) if attention else b.relu(h, name="act")
    b.output(b.matmul(h, b.input("v", (size, size)), name="mm2"))
    return b.build()


def kind_of(graph, name):
    return node_kind(graph, graph.node(name))


@pytest.mark.parametrize("channels_in, channels_out, group, kind", [
    (32, 32, 1, DENSE),
    (32, 32, 32, DEPTHWISE),  # groups == channels, one output channel a group
    (32, 64, 32, GROUPED),  # groups == input channels, but two output channels a group
    (64, 64, 8, GROUPED),  # 8 channels a group
    (64, 64, 2, DENSE),  # 32 channels a group fill the GEMM's tile: the GEMM template
])
def test_convs_are_classified_by_channels_per_group(channels_in, channels_out, group, kind):
    assert kind_of(conv_graph(channels_in, channels_out, group), "c") == kind


@pytest.mark.parametrize("a_shape, b_shape, kind", [
    ((64, 64), (64, 64), DENSE),
    ((64, 256), (256, 1), GEMV),  # n = 1
    ((1, 256), (256, 64), GEMV),  # m = 1
    ((256,), (256, 64), GEMV),  # a vector
    ((4, 1, 256), (256, 64), DENSE),  # a shared matrix: the batch's rows are the GEMM's rows
    ((8, 8), (8, 8), LOOP_CONTRACTION),  # below the templates' smallest problem: a loop nest
])
def test_matmuls_are_classified_by_their_shape(a_shape, b_shape, kind):
    assert kind_of(matmul_graph(a_shape, b_shape), "mm") == kind


def test_a_batched_matmul_of_two_inputs_keeps_its_rows_per_batch():
    assert kind_of(matmul_graph((4, 1, 64), (4, 64, 64), constant_b=False), "mm") == GEMV


def test_gemm_reads_its_transposes():
    b = GraphBuilder("gemm")
    a = b.input("a", (256, 1))  # transposed: one row
    b.output(b.gemm(a, b.constant(np.ones((64, 256), np.float32)), trans_a=1, trans_b=1, name="g"))
    assert kind_of(b.build(), "g") == GEMV


def test_pools_and_elementwise_ops():
    b = GraphBuilder("pool")
    x = b.input("x", (1, 8, 16, 16))
    b.output(b.relu(b.max_pool(x, kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1), name="p"), name="r"))
    graph = b.build()
    assert (kind_of(graph, "p"), kind_of(graph, "r")) == (POOL, LOOP)


def group_kind(graph, device="cpu"):
    return CostModel(graph, device_name=device).group_cost([n.name for n in graph.nodes]).kernel


def test_a_group_is_its_template_op_with_its_epilogue():
    assert group_kind(conv_graph(32, 32, 32)) == DEPTHWISE
    assert group_kind(conv_graph(32, 32, 1)) == DENSE


def test_two_matmuls_are_attention_only_around_a_softmax():
    assert group_kind(two_matmuls(64, attention=True)) == ATTENTION
    assert group_kind(two_matmuls(64)) == LOOP_CONTRACTION


def test_the_engine_mirrors_the_backends_limits_and_attention_check():
    from fusionlang.backend.attention_template import attention_applies
    from fusionlang.backend.grouped_template import MAX_GROUP_CHANNELS
    from fusionlang.backend.template import MIN_MACS
    from fusionlang.engine import kernel_kind

    assert (kernel_kind.TEMPLATE_MIN_MACS, kernel_kind.GROUPED_MAX_CHANNELS) == (MIN_MACS, MAX_GROUP_CHANNELS)
    for attention in (True, False):
        graph = two_matmuls(64, attention)
        # the backend judges the group with softmax opened, as fuse() hands it over
        plan = fusionlang.fuse(graph, "apollo_patterns", feedback=False)
        members = [n.name for n in plan.graph.nodes]
        assert kernel_kind.is_attention(plan.graph, members) == attention_applies(plan.graph, members) == attention


def test_a_depthwise_conv_costs_more_per_flop_than_a_dense_one():
    def seconds_per_flop(graph):
        cost = CostModel(graph, device_name="cpu").group_cost([n.name for n in graph.nodes])
        return cost.seconds / cost.flops
    # large enough planes that both are compute-bound on the cpu device
    assert seconds_per_flop(conv_graph(256, 256, 256, plane=56, kernel=7)) \
        > 2 * seconds_per_flop(conv_graph(256, 256, 1, plane=56))


def test_a_two_matmul_group_prices_its_contractions_at_the_loop_nests_rate():
    graph = two_matmuls(256)
    model = CostModel(graph, device_name="cpu")
    cpu = model.device
    mm1, act, mm2 = (model.node_flops(graph.node(n)) for n in ("mm1", "act", "mm2"))
    together = model.group_cost(["mm1", "act", "mm2"])
    assert together.seconds == pytest.approx(cpu.launch + max(
        together.bytes / cpu.bandwidth, (mm1 + mm2) / cpu.rate(LOOP_CONTRACTION) + act / cpu.rate(LOOP)))
    alone = model.group_cost(["mm2"])
    assert alone.seconds == pytest.approx(cpu.launch + max(alone.bytes / cpu.bandwidth, mm2 / cpu.rate(DENSE)))


def test_a_template_ops_prologue_goes_through_memory():
    """relu -> conv: the C backend runs the relu as a loop nest before the conv's template
    and the template reads its result back: a pass of its own, whose time adds to the
    template's however compute-bound that is."""
    b = GraphBuilder("prologue")
    x = b.input("x", (1, 32, 28, 28))
    act = b.relu(x, name="act")
    b.output(b.conv(act, b.constant(np.ones((32, 32, 3, 3), np.float32)), pads=(1, 1, 1, 1), name="c"))
    graph = b.build()
    model = CostModel(graph, device_name="cpu")
    cost = model.group_cost(["act", "c"])
    staged = 2 * graph.types[act].nbytes
    flops = {DENSE: model.node_flops(graph.node("c")), LOOP: model.node_flops(graph.node("act"))}
    assert cost.seconds == pytest.approx(model.device.seconds(cost.bytes, flops, 1) + staged / model.device.bandwidth)
    # an epilogue stays in the template's tiles: no such trip
    # a GPU computes the prologue while it stages the operand
    h100 = CostModel(graph, device_name="h100")
    assert h100.group_cost(["act", "c"]).seconds == pytest.approx(h100.device.seconds(cost.bytes, cost.flops, 1))
    epilogue = CostModel(conv_graph(32, 32, 1), device_name="cpu")
    priced = epilogue.group_cost(["c", "act"])
    assert priced.seconds == pytest.approx(epilogue.device.seconds(priced.bytes, {
        DENSE: epilogue.node_flops(epilogue.graph.node("c")), LOOP: epilogue.node_flops(epilogue.graph.node("act"))}, 1))


def test_the_cpu_rates_are_the_calibration_benchmarks():
    """bench/cpu_rates.py measured them; cost.py's table must not drift from its JSON."""
    recorded = json.loads(RATES_JSON.read_text())
    assert recorded["command"].startswith("python bench/cpu_rates.py") and recorded["date"]
    assert dict(DEVICES["cpu"].rates) == recorded["rates"]
    assert set(recorded["rates"]) == set(KINDS)
    assert DEVICES["cpu"].flops == recorded["rates"][LOOP]


def test_device_rates_are_a_frozen_mapping():
    with pytest.raises(TypeError):
        DEVICES["cpu"].rates[DENSE] = 1.0  # type: ignore[index]


@pytest.fixture
def two_contractions_rules(tmp_path):
    """dnnfusion's table with an entry fusing two contractions (which it lacks), for dp."""
    path = tmp_path / "mm.fuse"
    path.write_text('import "dnnfusion.fuse"\nfuse many_to_many -> many_to_many : many_to_many [cost]\n')
    return fusionlang.load_rules(str(path))


def test_dp_on_the_cpu_keeps_large_matmuls_in_templates_of_their_own(two_contractions_rules, monkeypatch):
    """Pricing every flop alike (as the cpu device did), one group holding both matmuls
    moves the fewest bytes and wins; the backend would run it as one loop nest, at about a
    third of the GEMM template's rate, and the per-kind prices now say so."""
    monkeypatch.setitem(DEVICES, "flat", Device("flat", 20e9, 30e9, 2e-7))

    def groups(size, device):
        plan = partition(two_matmuls(size), two_contractions_rules, "dp", options={"cost": device})
        return [g.nodes for g in plan.groups], [g.kernel for g in plan.groups]

    assert groups(256, "flat")[0] == [["mm1", "act", "mm2"]]
    # each matmul a GEMM template, the relu its first one's epilogue (a prologue of the
    # second would run as a loop nest of its own, through memory)
    assert groups(256, "cpu") == ([["mm1", "act"], ["mm2"]], [DENSE, DENSE])
    # 8x8 matmuls are loop nests whatever their group: fusing them saves a launch and the bytes
    assert groups(8, "cpu") == ([["mm1", "act", "mm2"]], [LOOP_CONTRACTION])
