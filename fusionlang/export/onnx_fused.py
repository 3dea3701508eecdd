"""The fused ONNX model: the original model with each fused group as a local ONNX function.

``fused_onnx(model, plan)`` returns the model whose main graph calls one function per
kernel group of ``plan`` (domain ``fusionlang.fused``, named ``group_<id>_<category>``),
each function's doc string naming the group's fuse rules and rewrites with their .fuse
file:line, so the plan can be looked at in Netron or run by onnxruntime.

What goes into a function: the *original* ONNX nodes, never fusionlang's rewritten ops.
The plan's ops are fusionlang ops (``layer_norm`` opened into reduce_sum, rsqrt...;
conv and batch_norm folded into one conv with new weights), many without an ONNX
equivalent and with constants the model does not hold; re-emitting them as ONNX would
need an ONNX form for every fusionlang op, and the file would no longer be the user's
model. Every imported node keeps its ONNX origin in its provenance ("onnx:LABEL",
inherited through every rewrite and decomposition), so each original node is mapped to
the groups its pieces ended up in, and the original nodes are partitioned instead:

- A node whose pieces are all in one kernel group goes into that group's function.
- A node split across kernel groups (a compound op opened and its pieces fused into
  different groups) is kept whole, in the group holding most of its pieces (the first
  such group on a tie): ONNX cannot call half a node. A note says so, and a group left
  with no node of its own has no function (another note).
- A node with no piece in a kernel group (folded to a constant at import, an Identity or
  Dropout the import removed, a node in a "view" or "const" group, dead code) stays in
  the main graph as it is.
- If the functions would then read each other's results in a cycle (a main-graph node
  between two nodes of one group; a node kept whole in a later group whose output a
  group between reads), every function and main-graph node on the cycle becomes one
  function, named after all its groups (a note says so). The result is always a valid,
  acyclic graph of the model's own nodes, so onnxruntime computes what the model does.

A node with subgraphs (If, Loop, Scan: the import inlines or unrolls them, and their
pieces carry "onnx:LABEL/inner" provenance) is kept whole like any other node; the
values its subgraphs read from the outer scope become inputs of its function.

ONNX functions cannot hold initializers, so initializers stay in the main graph and are
passed to the functions as inputs, like every other value a group reads. Each function
imports the model's opsets; the model imports ``fusionlang.fused`` version 1 besides.

This module reads an ONNX model (the frontend's input) and a FusionPlan (the engine's
output), so it lives in its own package below both: frontend must not import engine,
and neither imports this one, so no import goes upstream.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx
import onnx
from onnx import helper

from fusionlang.engine.plan import FusionPlan, Group
from fusionlang.errors import InputError, ModelError
from fusionlang.frontend.onnx_context import node_label
from fusionlang.frontend.onnx_control import outer_reads
from fusionlang.frontend.onnx_import import load_model

#: the domain of the group functions, and its version in the model's opset imports
FUSED_DOMAIN = "fusionlang.fused"
FUSED_DOMAIN_VERSION = 1
#: model-local functions need IR version 8 (onnx 1.10) or later
MIN_IR_VERSION = 8
#: protobuf's limit on one serialized message; past it the tensors go to a side file
PROTOBUF_LIMIT = 2**31 - 1


@dataclass
class FusedOnnx:
    """The fused model, which plan groups each function holds, and notes on every group
    whose function differs from the plan (a split node kept whole, groups merged)."""

    model: onnx.ModelProto
    #: function name -> the ids of the plan groups it holds, in plan order
    functions: dict[str, list[int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def save_fused_onnx(model, plan: FusionPlan, path) -> FusedOnnx:
    """Write ``model`` (a path, bytes or ModelProto: the one ``plan`` was made from) to
    ``path`` with each kernel group of ``plan`` as a local ONNX function (see the module
    docstring). Raises ModelError if the plan was not made from this model, InputError if
    ``path`` cannot be written. Returns what :func:`fused_onnx` returns."""
    fused = fused_onnx(model, plan)
    _write(fused.model, path)
    return fused


def fused_onnx(model, plan: FusionPlan) -> FusedOnnx:
    """``model`` with each kernel group of ``plan`` as a local function, without writing it."""
    proto, label = load_model(model)
    return _Exporter(proto, label, plan).run()


class _Exporter:
    """One export: where each original node goes (``home``: node index -> group id, for
    nodes with pieces in kernel groups) and the model being built."""

    def __init__(self, proto: onnx.ModelProto, label: str, plan: FusionPlan):
        self.proto = proto
        self.plan = plan
        self.nodes = list(proto.graph.node)
        self.order = {g.id: k for k, g in enumerate(plan.groups)}
        self.votes = _group_votes(plan, self.nodes, label)
        # the group holding most of a node's pieces; the first in plan order on a tie
        self.home = {k: min(count, key=lambda gid: (-count[gid], self.order[gid])) for k, count in self.votes.items()}
        self.readers = _readers(self.nodes, proto.graph.output)
        self.fused = FusedOnnx(_empty_copy(proto))

    def run(self) -> FusedOnnx:
        notes = self.fused.notes
        notes += [_split_note(node_label(self.nodes[k], k), self.nodes[k], count, self.home[k])
                  for k, count in sorted(self.votes.items()) if len(count) > 1]
        for members in _clusters(self.nodes, self.home):
            gids = sorted({self.home[k] for k in members if k in self.home}, key=self.order.__getitem__)
            if gids:
                self._call(gids, members)
            else:
                self.fused.model.graph.node.extend(self.nodes[k] for k in members)
        placed = {gid for gids in self.fused.functions.values() for gid in gids}
        notes += [_empty_note(g, self.nodes, self.votes, self.home) for g in self.plan.kernels if g.id not in placed]
        _keep_visible_value_info(self.fused.model, self.proto)
        return self.fused

    def _call(self, gids: list[int], members: list[int]) -> None:
        """Add the function of groups ``gids`` holding original nodes ``members``, and its call."""
        function = _function([self.plan.group(gid) for gid in gids], self.plan, self.nodes, members, self.readers,
                             list(self.proto.opset_import))
        self.fused.model.functions.append(function)
        self.fused.model.graph.node.append(helper.make_node(function.name, list(function.input),
                                                            list(function.output), name=function.name,
                                                            domain=FUSED_DOMAIN))
        self.fused.functions[function.name] = gids
        if len(gids) > 1:
            self.fused.notes.append(f"groups {', '.join(map(str, gids))} share function {function.name}: apart, "
                                    "their ONNX nodes would read each other's results in a cycle")


# ----- mapping plan groups back to ONNX nodes -----------------------------------------------
def _group_votes(plan: FusionPlan, nodes: list[onnx.NodeProto], label: str) -> dict[int, Counter[int]]:
    """ONNX node index -> how many ops of each kernel group came from it. ModelError when
    the plan names an ONNX node the model lacks (it was made from another model)."""
    by_label: dict[str, list[int]] = {}
    for k, node in enumerate(nodes):
        by_label.setdefault(node_label(node, k), []).append(k)
    kernel = {g.id for g in plan.kernels}
    votes: dict[int, Counter[int]] = {}
    imported = False
    for group in plan.groups:
        for op in plan.nodes_of(group):
            for origin in (p[len("onnx:"):] for p in op.provenance if p.startswith("onnx:")):
                imported = True
                for k in _resolve(origin, by_label, op.name, label):
                    if group.id in kernel:
                        votes.setdefault(k, Counter())[group.id] += 1
    if not imported and plan.graph.nodes:
        raise ModelError(f"the plan's ops were not imported from ONNX, so they cannot be mapped to model {label!r}")
    return votes


def _resolve(origin: str, by_label: dict[str, list[int]], op: str, label: str) -> list[int]:
    """The top-level nodes an "onnx:" provenance names: the node itself, or the If, Loop or
    Scan whose subgraph held it ("LOOP/inner", the longest such prefix)."""
    if origin in by_label:
        return by_label[origin]
    prefix = origin
    while "/" in prefix:
        prefix = prefix.rpartition("/")[0]
        if prefix in by_label:
            return by_label[prefix]
    raise ModelError(f"the plan's op {op!r} comes from ONNX node {origin!r}, which model {label!r} does not have "
                     "(was the plan made from another model?)")


def _clusters(nodes: list[onnx.NodeProto], home: dict[int, int]) -> list[list[int]]:
    """The ONNX node indices each main-graph entry holds, in a topological order: a
    group's nodes together, every other node alone, and the groups and nodes that would
    form a cycle together (strongly connected components of the cluster graph)."""
    cluster_of = {k: ("group", home[k]) if k in home else ("node", k) for k in range(len(nodes))}
    producer = {value: k for k, node in enumerate(nodes) for value in node.output if value}
    dig: nx.DiGraph[tuple[str, int]] = nx.DiGraph()
    dig.add_nodes_from(cluster_of.values())
    for k, node in enumerate(nodes):
        for value in _reads(node):
            source = producer.get(value)
            if source is not None and cluster_of[source] != cluster_of[k]:
                dig.add_edge(cluster_of[source], cluster_of[k])
    dag = nx.condensation(dig)
    members: dict[int, list[int]] = {}
    for k in range(len(nodes)):  # in model order, so each list is too
        members.setdefault(dag.graph["mapping"][cluster_of[k]], []).append(k)
    ordered = nx.lexicographical_topological_sort(dag, key=lambda c: members[c][0])
    return [members[c] for c in ordered]


def _reads(node: onnx.NodeProto) -> list[str]:
    """The values ``node`` reads, its subgraphs' outer-scope reads included, in order."""
    return list(dict.fromkeys([v for v in node.input if v] + sorted(outer_reads(node))))


def _readers(nodes: list[onnx.NodeProto], graph_outputs) -> dict[str, set[int]]:
    """value -> indices of the nodes reading it (-1: a graph output)."""
    readers: dict[str, set[int]] = {}
    for k, node in enumerate(nodes):
        for value in _reads(node):
            readers.setdefault(value, set()).add(k)
    for info in graph_outputs:
        readers.setdefault(info.name, set()).add(-1)
    return readers


# ----- building the model -------------------------------------------------------------------
def _function(groups: list[Group], plan: FusionPlan, nodes: list[onnx.NodeProto], members: list[int],
              readers: dict[str, set[int]], opsets) -> onnx.FunctionProto:
    """The local function running the original nodes ``members`` (indices, in model order)
    for ``groups``: it reads what they read from outside, returns what is read outside."""
    body = [nodes[k] for k in members]
    produced = {value for node in body for value in node.output if value}
    inputs = list(dict.fromkeys(v for node in body for v in _reads(node) if v not in produced))
    inside = set(members)
    outputs = [value for node in body for value in node.output if value and readers.get(value, set()) - inside]
    name = "_".join(["group", *(str(g.id) for g in groups), _identifier(groups[0].category or groups[0].kind)])
    return helper.make_function(FUSED_DOMAIN, name, inputs, outputs, body, opsets, doc_string=_doc(groups, plan))


def _identifier(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


def _doc(groups: list[Group], plan: FusionPlan) -> str:
    """Where the function comes from: each group's ops, then the fuse rules that formed it
    and the rewrites that made its ops, each with its .fuse file:line."""
    lines = [f"fusionlang plan (strategy {plan.strategy or '-'}, rules {plan.rules or '-'})"]
    for group in groups:
        lines += _group_doc(group, plan)
    return "\n".join(lines)


def _group_doc(group: Group, plan: FusionPlan) -> list[str]:
    ops = plan.nodes_of(group)
    lines = [f"group {group.id}: {group.kind}, category {group.category or '-'}, {len(ops)} ops: "
             + ", ".join(f"{op.op} {op.name}" for op in ops)]
    lines += ["  fuse rules:", *(f"    {rule}" for rule in group.rules)] if group.rules else \
        ["  fuse rules: none (no fuse entry merged anything into it)"]
    rewrites = dict.fromkeys(p for op in ops for p in op.provenance if not p.startswith("onnx:"))
    if rewrites:
        lines += ["  rewrites:", *(f"    {step}" for step in rewrites)]
    stitched = [value for gid, value in plan.stitches if gid == group.id]
    if stitched:
        lines.append(f"  kept on chip (stitched): {', '.join(stitched)}")
    for pack in plan.horizontal:
        others = [str(gid) for gid in pack if gid != group.id]
        if group.id in pack:
            plural = "s" if len(others) > 1 else ""
            lines.append(f"  launched as one kernel (horizontal) with group{plural} {', '.join(others)}")
    return lines


def _split_note(label: str, node: onnx.NodeProto, count: Counter[int], home: int) -> str:
    where = ", ".join(f"{gid} ({n} ops)" for gid, n in sorted(count.items()))
    return f"ONNX node {label!r} ({node.op_type}) was fused into groups {where}; it is kept whole in group {home}'s " \
        "function"


def _empty_note(group: Group, nodes: list[onnx.NodeProto], votes: dict[int, Counter[int]],
                home: dict[int, int]) -> str:
    owners = sorted(k for k, count in votes.items() if group.id in count)
    if not owners:
        return f"group {group.id} has no function: none of its ops comes from a node of the model"
    names = ", ".join(f"{node_label(nodes[k], k)!r} (in group {home[k]})" for k in owners)
    return f"group {group.id} has no function of its own: its ops come from ONNX nodes kept whole elsewhere: {names}"


def _empty_copy(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` without main-graph nodes, importing the fused domain, at an IR version
    that has model-local functions."""
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    del model.graph.node[:]
    model.ir_version = max(model.ir_version, MIN_IR_VERSION)
    model.opset_import.append(helper.make_opsetid(FUSED_DOMAIN, FUSED_DOMAIN_VERSION))
    return model


def _keep_visible_value_info(model: onnx.ModelProto, proto: onnx.ModelProto) -> None:
    """Drop value_info of values now inside a function (the main graph no longer has them)."""
    visible = {v for node in model.graph.node for v in node.output}
    kept = [info for info in proto.graph.value_info if info.name in visible]
    del model.graph.value_info[:]
    model.graph.value_info.extend(kept)


def _write(model: onnx.ModelProto, path) -> None:
    """Save ``model`` to ``path``; tensors past protobuf's 2 GiB go to ``<file>.data`` beside it."""
    try:
        if model.ByteSize() > PROTOBUF_LIMIT:
            saved = onnx.ModelProto()
            saved.CopyFrom(model)  # saving moves the tensors' data out of the message it is given
            onnx.save_model(saved, os.fspath(path), save_as_external_data=True, location=Path(path).name + ".data")
        else:
            Path(path).write_bytes(model.SerializeToString())
    except OSError as exc:
        raise InputError(f"cannot write {os.fspath(path)!r}: {(exc.strerror or str(exc)).lower()}") from None
