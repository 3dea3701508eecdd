"""The cost model's numbers come from shapes and access specs, computed here by hand."""

import numpy as np
import pytest

from fusionlang.engine.cost import DEVICES, CostModel
from fusionlang.errors import FuseError
from fusionlang.ops import GraphBuilder


def chain(n=3, shape=(64, 32)):
    b = GraphBuilder("chain")
    v = b.input("x", shape)
    for k in range(n):
        v = b.relu(v, name=f"r{k}")
    b.output(v)
    return b.build()


def test_unfused_chain_moves_every_intermediate_twice():
    g = chain(3)
    nbytes = 64 * 32 * 4
    total = CostModel(g).unfused()
    assert total.launches == 3
    assert total.bytes == 3 * 2 * nbytes


def test_fused_chain_reads_input_once_and_writes_output_once():
    g = chain(3)
    cost = CostModel(g).group_cost([n.name for n in g.nodes])
    assert (cost.bytes_read, cost.bytes_written, cost.launches) == (64 * 32 * 4, 64 * 32 * 4, 1)


def test_value_used_outside_the_group_is_still_written():
    b = GraphBuilder("side")
    x = b.input("x", (10,))
    a = b.relu(x, name="a")
    c = b.exp(a, name="c")
    b.output(a, c)
    g = b.build()
    cost = CostModel(g).group_cost(["a", "c"])
    assert cost.bytes_written == 2 * 40


def test_conv_flops_count_multiply_adds():
    b = GraphBuilder("conv")
    x = b.input("x", (1, 4, 8, 8))
    w = b.constant(np.zeros((6, 4, 3, 3), np.float32))
    y = b.conv(x, w, pads=(1, 1, 1, 1))
    b.output(y)
    g = b.build()
    flops = CostModel(g).node_flops(g.nodes[0])
    assert flops == 1 * 6 * 8 * 8 * (4 * 3 * 3) * 2


def test_views_are_free():
    b = GraphBuilder("view")
    x = b.input("x", (4, 6))
    y = b.reshape(x, shape=(6, 4))
    b.output(y)
    g = b.build()
    cost = CostModel(g).group_cost([g.nodes[0].name])
    assert (cost.bytes, cost.launches, cost.seconds) == (0, 0, 0.0)


def test_roofline_takes_the_slower_of_memory_and_compute():
    h100 = DEVICES["h100"]
    assert h100.seconds(3.35e12, 0, 1) == pytest.approx(1.0 + 1e-6)
    assert h100.seconds(0, 67e12, 0) == pytest.approx(1.0)


def test_unknown_device_is_a_clear_error():
    with pytest.raises(FuseError, match=r"unknown device 'tpu' \(known: h100, h200, a100, cpu\)"):
        CostModel(chain(1), device_name="tpu")


def test_the_cpu_prices_a_gemm_at_the_templates_rate_and_its_epilogue_at_the_loop_nests():
    cpu = DEVICES["cpu"]
    assert cpu.rate("dense") > cpu.rate("loop")
    assert cpu.seconds(0, {"dense": 1e9}, 0) == pytest.approx(1e9 / cpu.rate("dense"))
    assert cpu.seconds(0, 1e9, 0) == pytest.approx(1e9 / cpu.rate("loop"))
    b = GraphBuilder("mm")
    x = b.input("x", (64, 64))
    y = b.relu(b.matmul(x, b.constant(np.ones((64, 64), np.float32))))
    b.output(y)
    g = b.build()
    model = CostModel(g, device_name="cpu")
    mm, relu = (model.node_flops(n) for n in g.nodes)
    cost = model.group_cost([n.name for n in g.nodes])
    assert cost.kernel == "dense"
    assert cost.seconds == pytest.approx(
        max(cost.bytes / cpu.bandwidth, mm / cpu.rate("dense") + relu / cpu.rate("loop")) + cpu.launch)
    # a GPU prices every flop alike
    assert DEVICES["h100"].seconds(0, {"dense": 1e9, "loop": 1e9}, 0) == DEVICES["h100"].seconds(0, 2e9, 0)
