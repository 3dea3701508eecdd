"""End-to-end equivalence: a graph through the whole pipeline, against the oracle.

``check_equivalence(graph, rules, strategy, target="c")`` rewrites the graph with the
rule set, partitions it with the strategy (the backend vetting every group, as
``fusionlang.fuse`` does), loop-fuses and compiles every group, runs the program, and
compares each graph output with the reference interpreter run on the *unfused* graph.
Whatever goes wrong is reported with the stage it went wrong in (fuse, compile, run,
compare), never raised, so a caller can count.

Compiling is the expensive part (a C compiler run per kernel library). To check
hundreds of graphs, :func:`check_equivalence_many` puts a batch of graphs side by side
in one graph (disjoint components, names prefixed), so one plan and one compiled module
cover the batch; a batch that fails is split until the failing graphs are found, each
then checked alone, so every verdict names one graph.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from typing import Iterable, Mapping, cast

import numpy as np

from fusionlang.api import compile as compile_plan
from fusionlang.api import fuse, load_rules
from fusionlang.errors import FuseError
from fusionlang.ir.graph import Graph, Node
from fusionlang.ir.printer import format_graph
from fusionlang.ops.checking import verify_graph
from fusionlang.ops.interpreter import run as reference_run
from fusionlang.testing.values import Mismatch, compare, feeds_for, magnitude

STAGES = ("reference", "fuse", "compile", "run", "compare")


@dataclass
class Equivalence:
    """The verdict on one graph: ``ok``, or the stage that failed and why."""

    graph: Graph
    strategy: str
    target: str
    ok: bool
    #: the stage that failed (one of STAGES), None when ok
    stage: str | None = None
    #: an exception's one-line description, when a stage raised
    error: str = ""
    #: output name -> how it differs from the reference
    mismatches: dict[str, Mismatch] = field(default_factory=dict)
    kernels: int = 0
    groups: int = 0
    seconds: float = 0.0
    #: graphs checked together in one compiled module (1 when checked alone)
    batch: int = 1
    feeds: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        head = f"graph {self.graph.name!r}, strategy {self.strategy}, target {self.target}: "
        if self.ok:
            return head + f"equivalent ({self.groups} groups, {self.kernels} kernels)"
        if self.error:
            return head + f"{self.stage} failed: {self.error}"
        return head + "outputs differ: " + "; ".join(f"{k}: {m}" for k, m in self.mismatches.items())

    def report(self) -> str:
        """The verdict with the graph, for a bug report."""
        return str(self) + "\n" + format_graph(self.graph)


def _describe(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    if isinstance(exc, FuseError):
        return text
    where = traceback.extract_tb(exc.__traceback__)[-1]
    return f"{type(exc).__name__}: {text} (at {where.filename.rsplit('/', 2)[-1]}:{where.lineno})"


def check_equivalence(graph: Graph, rules="apollo", strategy: str | None = None, target: str = "c",
                      feeds: Mapping[str, np.ndarray] | None = None, *, seed: int = 0,
                      feedback: bool = True) -> Equivalence:
    """Check that the fused, compiled ``graph`` computes what the reference interpreter
    computes on the unfused graph (``feeds``, or :func:`feeds_for` with ``seed``)."""
    ruleset = load_rules(rules) if isinstance(rules, str) else rules
    started = time.perf_counter()
    feeds = dict(feeds) if feeds is not None else feeds_for(graph, seed)
    name = strategy or "default"
    result = Equivalence(graph, name, target, False, feeds=feeds)

    def fail(stage: str, exc: BaseException) -> Equivalence:
        result.stage, result.error = stage, _describe(exc)
        result.seconds = time.perf_counter() - started
        return result

    try:
        with np.errstate(all="ignore"):
            values = reference_run(graph, feeds, keep={v for n in graph.nodes for v in n.outputs})
    except Exception as exc:  # the oracle itself cannot run the graph: not a verdict on fusion
        return fail("reference", exc)
    expected = {out: values[out] for out in graph.outputs}
    scale = magnitude(list(values.values()) + list(feeds.values()) + list(graph.constants.values()))
    try:
        plan = fuse(graph, ruleset, strategy, feedback=feedback, target=target)
        result.strategy = plan.strategy or name
        result.groups = len(plan.groups)
    except Exception as exc:
        return fail("fuse", exc)
    try:
        compiled = compile_plan(plan, target)
        result.kernels = compiled.stats.kernels
    except Exception as exc:
        return fail("compile", exc)
    try:
        actual = compiled.run(feeds)
    except Exception as exc:
        return fail("run", exc)
    for out, want in expected.items():
        if out not in actual:
            result.mismatches[out] = Mismatch("the compiled program does not return this output")
            continue
        mismatch = compare(want, actual[out], scale=scale)
        if mismatch is not None:
            result.mismatches[out] = mismatch
    result.ok = not result.mismatches
    result.stage = None if result.ok else "compare"
    result.seconds = time.perf_counter() - started
    return result


# ----- many graphs, one module ---------------------------------------------------------------


def union(graphs: list[Graph], name: str = "batch") -> tuple[Graph, list[dict[str, str]]]:
    """One graph holding ``graphs`` side by side (names prefixed ``g<k>_``), and per
    graph the map from its value names to the union's."""
    # the first registry given holds the ops of the others (all come from one rule set)
    out = Graph(name, next((g.registry for g in graphs if g.registry is not None), None))
    renames = []
    for k, graph in enumerate(graphs):
        prefix = f"g{k}_"
        rename = {v: prefix + v for v in graph.types}
        renames.append(rename)
        for value in graph.inputs:
            out.add_input(rename[value], graph.types[value])
        for value, array in graph.constants.items():
            out.add_constant(rename[value], array)
        for node in graph.nodes:
            new = Node(prefix + node.name, node.op, [rename[v] if v else "" for v in node.inputs],
                       [rename[v] for v in node.outputs], dict(node.attrs), node.provenance)
            out.add_node(new, [graph.types[v] for v in node.outputs])
        out.outputs.extend(rename[v] for v in graph.outputs)
    return out, renames


def check_equivalence_many(graphs: Iterable[Graph], rules="apollo", strategy: str | None = None, target: str = "c",
                           *, batch: int = 40, seed: int = 0, feedback: bool = True) -> list[Equivalence]:
    """One verdict per graph, checking ``batch`` graphs per compiled module (graph k is
    fed ``feeds_for(graph, seed + k)``). A failing batch is split in halves until each
    failure is pinned to single graphs, which are then checked alone; if a batch fails
    but every graph in it passes alone, the last verdict is that batch's (a defect
    that needs graphs side by side)."""
    ruleset = load_rules(rules) if isinstance(rules, str) else rules
    graphs = list(graphs)
    feeds = [feeds_for(g, seed + k) for k, g in enumerate(graphs)]
    verdicts: list[Equivalence | None] = [None] * len(graphs)
    extra: list[Equivalence] = []

    def solve(indices: list[int]) -> None:
        if len(indices) == 1:
            k = indices[0]
            verdicts[k] = check_equivalence(graphs[k], ruleset, strategy, target, feeds[k], feedback=feedback)
            return
        merged, renames = union([graphs[k] for k in indices], f"batch_{indices[0]}_{indices[-1]}")
        merged_feeds = {renames[j][name]: array for j, k in enumerate(indices) for name, array in feeds[k].items()}
        verdict = check_equivalence(merged, ruleset, strategy, target, merged_feeds, feedback=feedback)
        if verdict.ok:
            for k in indices:
                verdicts[k] = Equivalence(graphs[k], verdict.strategy, target, True, kernels=verdict.kernels,
                                          groups=verdict.groups, seconds=verdict.seconds / len(indices),
                                          batch=len(indices), feeds=feeds[k])
            return
        half = len(indices) // 2
        solve(indices[:half])
        solve(indices[half:])
        if all(cast(Equivalence, verdicts[k]).ok for k in indices):  # (both halves solved)
            verdict.batch = len(indices)
            extra.append(verdict)

    for start in range(0, len(graphs), max(1, batch)):
        solve(list(range(start, min(start + batch, len(graphs)))))
    return [v for v in verdicts if v is not None] + extra


# ----- minimizing a failing graph -------------------------------------------------------------


def _cut(graph: Graph, value: str) -> Graph:
    """``graph`` with ``value`` made a graph input (its producer and whatever only fed it
    go away)."""
    out = graph.copy()
    producer = next(n for n in out.nodes if value in n.outputs)
    out.nodes = [n for n in out.nodes if n is not producer]
    for other in producer.outputs:
        if other != value:
            out.types.pop(other, None)
            out.outputs = [v for v in out.outputs if v != other]
            for n in out.nodes:
                if other in n.inputs:
                    return graph  # a multi-output node whose other outputs are used: keep it
    out.inputs.append(value)
    return _tidy(out)


def _bypass(graph: Graph, node: Node) -> Graph:
    """``graph`` with ``node`` removed and its users reading its first input instead
    (only when the types agree)."""
    source = node.present_inputs()[0] if node.present_inputs() else None
    out_value = node.outputs[0]
    if source is None or len(node.outputs) != 1 or graph.types[source] != graph.types[out_value]:
        return graph
    if out_value in graph.outputs and (source in graph.inputs or source in graph.outputs):
        return graph
    out = graph.copy()
    out.nodes = [n for n in out.nodes if n.name != node.name]
    for n in out.nodes:
        n.inputs = [source if v == out_value else v for v in n.inputs]
    out.outputs = [source if v == out_value else v for v in out.outputs]
    out.types.pop(out_value, None)
    return _tidy(out)


def _drop_output(graph: Graph, value: str) -> Graph:
    out = graph.copy()
    out.outputs = [v for v in out.outputs if v != value]
    return _tidy(out)


def _tidy(graph: Graph) -> Graph:
    graph.outputs = list(dict.fromkeys(graph.outputs))
    graph.remove_unused()
    used = {v for n in graph.nodes for v in n.present_inputs()} | set(graph.outputs)
    for value in [v for v in graph.inputs if v not in used]:
        graph.inputs.remove(value)
        graph.types.pop(value, None)
    return graph


def minimize(graph: Graph, fails, *, max_attempts: int = 400) -> Graph:
    """A smaller graph on which ``fails(graph)`` still holds: greedily drop outputs, cut
    nodes (their result becomes a graph input) and bypass nodes whose input has their
    output's type, until no single step keeps the failure (or ``max_attempts``)."""
    attempts = 0
    current = graph
    changed = True
    while changed and attempts < max_attempts:
        changed = False
        candidates = []
        if len(current.outputs) > 1:
            candidates += [lambda g, v=v: _drop_output(g, v) for v in current.outputs]
        candidates += [lambda g, v=n.outputs[0]: _cut(g, v) for n in current.nodes]
        candidates += [lambda g, n=n: _bypass(g, n) for n in current.nodes]
        for step in candidates:
            attempts += 1
            if attempts > max_attempts:
                break
            try:
                smaller = step(current)
            except (FuseError, StopIteration):
                continue
            if smaller is current or not smaller.nodes or not smaller.outputs:
                continue
            try:
                verify_graph(smaller)
            except FuseError:
                continue
            if fails(smaller):
                current = smaller
                changed = True
                break
    return current


__all__ = ["Equivalence", "STAGES", "check_equivalence", "check_equivalence_many", "minimize", "union"]
