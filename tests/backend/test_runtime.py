"""CompiledGraph: buffers, views, folded constants, errors, names, the API surface."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from helpers import random_feeds, softmax, views_plan
from hypothesis import given, settings
from strategies import graphs

import fusionlang.backend as backend
from fusionlang import reference
from fusionlang.backend import codegen_passes
from fusionlang.backend.memory import plan_buffers
from fusionlang.backend.runtime import CompiledStats
from fusionlang.engine.plan import FusionPlan, make_group, per_node_plan, single_group_plan
from fusionlang.errors import CodegenError, InputError
from fusionlang.ir.graph import Graph, Node
from fusionlang.ir.types import TensorType
from fusionlang.ops import GraphBuilder


def chain(n=5, shape=(64, 64)):
    b = GraphBuilder("chain")
    v = b.input("x", shape)
    for _ in range(n):
        v = b.tanh(b.add(v, b.constant(np.float32(0.25))))
    b.output(v)
    return b.build()


def test_compiled_graph_exposes_kernels_sources_buffers_stats():
    graph = chain(2)
    compiled = backend.compile(per_node_plan(graph))
    assert len(compiled.kernels) == 4
    k = compiled.kernels[0]
    assert k.group == 0 and k.nests == 1 and k.name in compiled.sources and k.source in compiled.sources
    assert compiled.stats.kernels == 4 and compiled.stats.codegen_seconds > 0 <= compiled.stats.compile_seconds
    assert compiled.buffers.arena_bytes > 0
    assert "int fl_run" in compiled.sources
    # typed, frozen stats whose JSON keeps the names the --json outputs and reports use
    data = json.loads(json.dumps(compiled.stats.to_dict()))
    assert set(data) == {"target", "groups", "kernels", "loop_nests", "unique_kernels", "intermediates_never_allocated",
                         "concats_in_place", "schedule_searches", "arena_bytes", "unshared_bytes", "constant_bytes",
                         "codegen_seconds", "compile_seconds"}
    assert CompiledStats.from_dict(data) == compiled.stats
    with pytest.raises(dataclasses.FrozenInstanceError):
        compiled.stats.kernels = 0  # type: ignore[misc]


def test_buffers_with_disjoint_lifetimes_share_storage():
    graph = chain(5)
    compiled = backend.compile(per_node_plan(graph))
    plan = compiled.buffers
    assert plan.arena_bytes < plan.unshared_bytes
    assert plan.sharing > 0
    np.testing.assert_allclose(compiled.run({"x": np.ones((64, 64), np.float32)})[graph.outputs[0]],
                               reference.run(graph, {"x": np.ones((64, 64), np.float32)})[graph.outputs[0]],
                               rtol=1e-5)


def test_fusion_removes_allocations():
    graph = chain(5)
    unfused = backend.compile(per_node_plan(graph))
    fused = backend.compile(single_group_plan(graph))
    assert [b.value for b in fused.buffers.buffers.values() if b.kind == "arena"] == graph.outputs
    assert fused.buffers.arena_bytes < unfused.buffers.arena_bytes
    assert fused.stats.intermediates_never_allocated == len(graph.nodes) - 1


@settings(max_examples=25)
@given(graphs())
def test_buffers_alive_at_the_same_time_never_overlap(case):
    graph, _ = case
    plan = per_node_plan(graph)
    buffers = plan_buffers(plan, dict(graph.constants), {}).buffers
    arena = [b for b in buffers.values() if b.kind == "arena"]
    for a in arena:
        for b in arena:
            if a is b or a.last < b.first or b.last < a.first:
                continue
            assert a.offset + a.nbytes <= b.offset or b.offset + b.nbytes <= a.offset, (a, b)


def test_view_groups_alias_and_launch_nothing():
    b = GraphBuilder("views")
    x = b.input("x", (4, 6))
    y = b.relu(x)
    r = b.reshape(y, shape=[6, 4])
    b.output(b.exp(b.flatten(r, axis=1)), r)
    graph = b.build()
    compiled = backend.compile(views_plan(graph))
    assert compiled.stats.kernels == 2  # relu and exp; reshape and flatten are views
    assert compiled.buffers.buffers[r].kind == "alias"
    feeds = random_feeds(graph)
    got, want = compiled.run(feeds), reference.run(graph, feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6)


def test_const_groups_are_folded_at_compile_time():
    b = GraphBuilder("consts")
    x = b.input("x", (3,))
    c = b.exp(b.constant(np.array([0.0, 1.0, 2.0], np.float32)), name="folded")
    b.output(b.add(x, c))
    graph = b.build()
    plan = FusionPlan(graph, [make_group(graph, 0, ["folded"], kind="const"),
                              make_group(graph, 1, [graph.nodes[1].name])])
    compiled = backend.compile(plan)
    assert compiled.stats.kernels == 1
    out = compiled.run({"x": np.zeros(3, np.float32)})[graph.outputs[0]]
    np.testing.assert_allclose(out, np.exp([0.0, 1.0, 2.0]), rtol=1e-6)


def test_outputs_that_are_inputs_or_constants_are_returned():
    b = GraphBuilder("passthrough")
    x = b.input("x", (2,))
    c = b.constant(np.array([1.0, 2.0], np.float32))
    b.output(b.relu(x), x, c)
    graph = b.build()
    out = backend.compile(per_node_plan(graph)).run({"x": np.array([-1.0, 3.0], np.float32)})
    np.testing.assert_array_equal(out["x"], [-1.0, 3.0])
    np.testing.assert_array_equal(out[c], [1.0, 2.0])


def test_runs_are_repeatable_and_do_not_alias_results():
    graph = chain(3, (8,))
    compiled = backend.compile(per_node_plan(graph))
    a = compiled.run({"x": np.zeros(8, np.float32)})[graph.outputs[0]]
    b = compiled.run({"x": np.ones(8, np.float32)})[graph.outputs[0]]
    assert not np.shares_memory(a, b) and not np.allclose(a, b)


def test_compound_op_is_a_codegen_error_naming_node_and_op():
    b = GraphBuilder("compound")
    x = b.input("x", (2, 3))
    b.output(b.softmax(x, axis=1, name="my_softmax"))
    graph = b.build()
    with pytest.raises(CodegenError, match="my_softmax.*softmax.*compound"):
        backend.compile(per_node_plan(graph))
    assert "compound" in backend.check_group(graph, ["my_softmax"])


def test_op_without_access_spec_is_a_codegen_error():
    b = GraphBuilder("shape")
    x = b.input("x", (2, 3))
    b.output(b.shape(x, name="shape_of_x"))
    graph = b.build()
    with pytest.raises(CodegenError, match="shape_of_x.*no access spec"):
        backend.compile(per_node_plan(graph))


def test_feeds_are_validated():
    graph = chain(1, (4,))
    compiled = backend.compile(per_node_plan(graph))
    with pytest.raises(InputError, match="missing input"):
        compiled.run({})
    with pytest.raises(InputError, match="expected shape"):
        compiled.run({"x": np.zeros(5, np.float32)})
    out = compiled.run({"x": np.zeros(4, np.float64)})  # same-kind cast is accepted
    assert out[graph.outputs[0]].dtype == np.float32


def test_unknown_target_is_rejected():
    with pytest.raises(CodegenError, match="unknown target"):
        backend.compile(per_node_plan(chain(1, (4,))), target="tpu")


def test_cuda_target_without_a_device_says_so():
    if backend.cuda_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(CodegenError, match="needs a CUDA device"):
        backend.compile(per_node_plan(chain(1, (4,))), target="cuda")


HOSTILE = ['x"; system("rm -rf /"); //', "*/ #define float int /*", "naïve\nname", "a b\tc", "0start", "\\"]


def test_hostile_names_never_reach_generated_code_raw():
    g = Graph("evil */ graph")
    x = g.add_input(HOSTILE[0], TensorType((3, 4)))
    prev = x
    for k, name in enumerate(HOSTILE[1:]):
        out = f"{name}:{k}"
        g.add_node(Node(name, "relu" if k % 2 else "tanh", [prev], [out]), [TensorType((3, 4))])
        prev = out
    g.outputs.append(prev)
    for plan in (per_node_plan(g), single_group_plan(g)):
        compiled = backend.compile(plan)
        for name in HOSTILE + ["evil */ graph"]:
            if not all(ch.isascii() and (ch.isalnum() or ch == "_") for ch in name):  # safe ones may appear
                assert name not in compiled.sources
        feeds = {x: np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)}
        np.testing.assert_allclose(compiled.run(feeds)[prev], reference.run(g, feeds)[prev], rtol=1e-6)
        assert "*/ #define" not in compiled.sources


def test_default_target_is_c_without_a_device():
    assert backend.default_target() == ("cuda" if backend.cuda_available() else "c")


def test_openmp_build_matches(monkeypatch):
    monkeypatch.setattr(codegen_passes, "PARALLEL_MIN_ELEMENTS", 0)  # its rows shared even at this small size
    b = GraphBuilder("omp")
    x = b.input("x", (64, 48))
    b.output(softmax(b, x))
    graph = b.build()
    feeds = random_feeds(graph)
    compiled = backend.compile(single_group_plan(graph), openmp=True)
    assert "#pragma omp parallel for" in compiled.sources
    np.testing.assert_allclose(compiled.run(feeds)[graph.outputs[0]], reference.run(graph, feeds)[graph.outputs[0]],
                               rtol=1e-5, atol=1e-6)


def test_small_stack_buffers_in_leaf_kernels_stay_aligned():
    # regression: GCC 12 at -march=native (AVX-512) stored to a red-zone array assuming
    # 16-byte alignment it did not have (a conv_transpose row buffer): a segfault
    b = GraphBuilder("convt")
    x = b.input("x", (1, 3, 6, 7))
    w = b.constant(np.linspace(-1, 1, 108, dtype=np.float32).reshape(3, 4, 3, 3))
    b.output(b.conv_transpose(x, w, kernel_shape=[3, 3], strides=[2, 3], pads=[1, 1, 1, 1], output_padding=[1, 1]))
    graph = b.build()
    feeds = random_feeds(graph)
    got = backend.compile(per_node_plan(graph)).run(feeds)[graph.outputs[0]]
    np.testing.assert_allclose(got, reference.run(graph, feeds)[graph.outputs[0]], rtol=1e-5, atol=1e-5)


def test_run_writes_outputs_straight_into_the_arrays_it_returns():
    b = GraphBuilder("direct")
    x = b.input("x", (8, 16))
    h = b.tanh(b.exp(x))
    y = b.relu(b.add(h, np.float32(1.0)))
    view = b.reshape(y, shape=(16, 8))
    b.output(y, h, view)  # h is also read by a later kernel; view re-labels y's storage
    graph = b.build()
    compiled = backend.compile(views_plan(graph), "c")
    runtime = compiled._runtime.program  # the slot table and arena (backend/c_program.py)
    assert h in runtime.direct_outputs and y not in runtime.direct_outputs  # y has a view as an output
    feeds = random_feeds(graph)
    first = compiled.run(feeds)
    want = reference.run(graph, feeds)
    for name in want:
        np.testing.assert_allclose(first[name], want[name], rtol=1e-6)
        assert not np.shares_memory(first[name], runtime.arena)
    kept = {k: v.copy() for k, v in first.items()}
    compiled.execute({"x": np.zeros((8, 16), np.float32)})  # the arena again, never the caller's arrays
    second = compiled.run({"x": np.ones((8, 16), np.float32)})
    for name in kept:
        np.testing.assert_array_equal(first[name], kept[name])
        assert not np.shares_memory(first[name], second[name])


def test_run_writes_a_reshaped_output_straight_into_the_array_it_returns():
    # a training forward returns saved activations reshaped: the buffer the reshape
    # re-labels is written into the caller's array, and later kernels read it there
    b = GraphBuilder("direct_view")
    x = b.input("x", (8, 16))
    h = b.tanh(b.exp(x))
    whole = b.reshape(h, shape=(16, 8))
    y = b.relu(b.add(h, np.float32(1.0)))
    b.output(whole, b.reshape(y, shape=(128,)), y)
    graph = b.build()
    compiled = backend.compile(views_plan(graph), "c")
    runtime = compiled._runtime.program
    assert runtime.direct_outputs == (whole,)  # y's storage is two outputs: copied
    feeds = random_feeds(graph)
    want = reference.run(graph, feeds)
    for _ in range(2):
        got = compiled.run(feeds)
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-6)
            assert not np.shares_memory(got[name], runtime.arena)


def test_a_thread_count_builds_with_openmp_and_gives_the_one_thread_numbers():
    b = GraphBuilder("threads")
    x = b.input("x", (64, 48))
    b.output(softmax(b, b.tanh(x)))
    graph = b.build()
    feeds = random_feeds(graph)
    one = backend.compile(single_group_plan(graph))
    two = backend.compile(single_group_plan(graph), threads=2)
    assert not one.openmp and two.openmp and "omp_set_num_threads(2);" in two.sources
    out = graph.outputs[0]
    np.testing.assert_array_equal(two.run(feeds)[out], one.run(feeds)[out])
    for bad in (0, -1, 1.5):
        with pytest.raises(CodegenError, match=r"expected a positive number of threads"):
            backend.compile(single_group_plan(graph), threads=bad)
