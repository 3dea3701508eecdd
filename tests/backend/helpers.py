"""Shared helpers for backend tests: graphs built from primitive ops, plans, feeds."""

from __future__ import annotations

import numpy as np

import fusionlang
from fusionlang import reference
from fusionlang.backend.codegen_passes import CodegenOptions, plan_codegen
from fusionlang.backend.loopir import For, walk
from fusionlang.backend.runtime import lower_group
from fusionlang.engine.plan import FusionPlan, make_group, per_node_plan
from fusionlang.ir.graph import Graph, Node
from fusionlang.ops import GraphBuilder
from fusionlang.ops.checking import op_call
from fusionlang.ops.registry import REGISTRY


def random_feeds(graph: Graph, seed: int = 0, scale: float = 1.0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for name in graph.inputs:
        t = graph.types[name]
        if t.dtype.startswith("float"):
            feeds[name] = (rng.standard_normal(t.shape) * scale).astype(t.dtype)
        elif t.dtype == "bool":
            feeds[name] = rng.random(t.shape) < 0.5
        else:
            feeds[name] = rng.integers(-5, 6, t.shape).astype(t.dtype)
    return feeds


def view_kind(graph: Graph):
    def kind(node: Node) -> str:
        return "view" if REGISTRY.get(node.op).is_view(op_call(graph, node)) else "kernel"

    return kind


def views_plan(graph: Graph) -> FusionPlan:
    """One group per node, views marked as such (they launch nothing)."""
    return per_node_plan(graph, view_kind(graph))


def groups_plan(graph: Graph, groups: list[list[str]]) -> FusionPlan:
    """Hand-built plan: the given node lists as groups, every other node alone."""
    covered = {n for g in groups for n in g}
    order = {n.name: k for k, n in enumerate(graph.nodes)}
    members = [list(g) for g in groups] + [[n.name] for n in graph.nodes if n.name not in covered]
    members.sort(key=lambda m: max(order[n] for n in m))
    plan = FusionPlan(graph, [make_group(graph, k, m) for k, m in enumerate(members)], strategy="hand")
    plan.validate()
    return plan


# ----- the compound ops, written with primitive ops ---------------------------------


def softmax(b: GraphBuilder, x: str, axis: int = -1, log: bool = False) -> str:
    m = b.reduce_max(x, axes=[axis])
    d = b.sub(x, m)
    e = b.exp(d)
    s = b.reduce_sum(e, axes=[axis])
    return b.sub(d, b.log(s)) if log else b.div(e, s)


def layer_norm(b: GraphBuilder, x: str, gamma: str, beta: str, eps: float = 1e-5) -> str:
    mean = b.reduce_mean(x, axes=[-1])
    d = b.sub(x, mean)
    var = b.reduce_mean(b.mul(d, d), axes=[-1])
    rstd = b.rsqrt(b.add(var, b.constant(np.float32(eps))))
    return b.add(b.mul(b.mul(d, rstd), gamma), beta)


def gelu(b: GraphBuilder, x: str) -> str:
    """erf form: 0.5 * x * (1 + erf(x / sqrt(2)))."""
    t = b.erf(b.div(x, b.constant(np.float32(np.sqrt(2.0)))))
    return b.mul(b.mul(x, b.constant(np.float32(0.5))), b.add(t, b.constant(np.float32(1.0))))


def decompose(graph: Graph) -> Graph:
    """The graph with softmax/log_softmax opened into primitive ops.

    A stand-in for the decomposition rule files the engine applies before partitioning:
    the light models contain Softmax, and the backend only compiles primitive ops.
    """
    b = GraphBuilder(graph.name)
    for name in graph.inputs:
        b.graph.add_input(name, graph.types[name])
    for name, value in graph.constants.items():
        b.graph.add_constant(name, value)
    rename: dict[str, str] = {}
    for node in graph.nodes:
        ins = [rename.get(v, v) for v in node.inputs]
        if node.op in ("softmax", "log_softmax"):
            out = softmax(b, ins[0], node.attrs["axis"], log=node.op == "log_softmax")
            rename[node.outputs[0]] = out
            continue
        b.graph.add_node(Node(node.name, node.op, ins, list(node.outputs), dict(node.attrs), node.provenance),
                         [graph.types[v] for v in node.outputs])
    for value in graph.outputs:
        v = rename.get(value, value)
        if v != value:
            v = b.identity(v, name=f"out_{value}", outputs=[value])
        b.graph.outputs.append(value)
    return b.build()


def operand_sizes(monkeypatch, cls, method: str, size) -> list[int]:
    """Record ``size(self) + size(other)`` for every call of the binary isl ``method`` of
    ``cls`` (how many pieces the call had to copy or compare); returns the growing list."""
    sizes: list[int] = []
    real = getattr(cls, method)

    def counted(self, other):
        sizes.append(size(self) + size(other))
        return real(self, other)

    monkeypatch.setattr(cls, method, counted)
    return sizes


def planned_loops(plan: FusionPlan, target: str = "c", **options) -> list:
    """Every loop of ``plan``'s groups lowered for ``target``, in print order, each with the
    codegen passes' decisions (``For.plan``) for ``options`` (see backend.codegen_passes)."""
    loops = []
    for group in plan.groups:
        lowered = plan_codegen(lower_group(plan, group, target), CodegenOptions(target, **options))
        loops += [n for n in walk(lowered.body) if isinstance(n, For)]
    return loops


def check_one_and_two_threads(graph: Graph, feeds: dict, tolerance: float = 2e-4) -> None:
    """Graph compiled for C (apollo's plan) on one thread matches the reference
    interpreter, and on two threads matches the one-thread run bit for bit."""
    plan = fusionlang.fuse(graph, "apollo")
    want = reference.run(graph, feeds)
    one = fusionlang.compile(plan, "c").run(feeds)
    two = fusionlang.compile(plan, "c", threads=2).run(feeds)
    for name in want:
        np.testing.assert_allclose(one[name], want[name], rtol=tolerance, atol=tolerance)
        np.testing.assert_array_equal(two[name], one[name])
