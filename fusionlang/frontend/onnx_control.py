"""ONNX control flow (If, Loop, Scan, Optional*), resolved at import time.

fusionlang compiles static graphs, so control flow must be decided while importing:
an If whose condition is known (a constant, or a graph input the run specializes on,
like Reshape's shape) becomes the chosen branch inlined; a Loop with a known trip count
and a condition known each iteration, and a Scan over its static sequence axis, become
their body unrolled, loop-carried values threaded from one copy to the next and scan
outputs concatenated. Inlining copies each body node with its values renamed (fresh
names per copy, outer-scope names left as they are) and converts it like any top-level
node, so sequences and constants flow through bodies too. Anything data-dependent (a
condition computed from tensors) is refused with one line naming the form.
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np
import onnx
from onnx import numpy_helper

from fusionlang.frontend.onnx_context import NodeContext

CONTROL_CONVERTERS: dict[str, Callable[[NodeContext], None]] = {}

#: the most nodes unrolling the Loops and Scans of a model may add, nested ones counted
#: where they unroll: past it the model is refused (3 nested Loops of 1000 iterations were
#: checked one level at a time and went on towards 10**9 nodes)
MAX_UNROLLED_NODES = 100_000


def _converts(op_type: str):
    def register(fn):
        CONTROL_CONVERTERS[op_type] = fn
        return fn

    return register


# ----- subgraph import ------------------------------------------------------------------
def outer_reads(node: onnx.NodeProto) -> set[str]:
    """The outer-scope names ``node``'s subgraphs (at any depth) read."""
    reads: set[str] = set()
    for attr in node.attribute:
        for graph in _subgraphs(attr):
            reads |= _free_names(graph)
    return reads


def _subgraphs(attr: onnx.AttributeProto) -> list[onnx.GraphProto]:
    if attr.type == onnx.AttributeProto.GRAPH:
        return [attr.g]
    if attr.type == onnx.AttributeProto.GRAPHS:
        return list(attr.graphs)
    return []


def _free_names(graph: onnx.GraphProto) -> set[str]:
    """Names ``graph`` reads (its nodes, nested subgraphs, outputs) but does not define."""
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    free: set[str] = set()
    for node in graph.node:
        free |= {name for name in node.input if name and name not in defined}
        free |= outer_reads(node) - defined
        defined |= set(node.output)
    return free | ({v.name for v in graph.output} - defined)


def _renamed_graph(graph: onnx.GraphProto, mapping: Mapping[str, str]) -> onnx.GraphProto:
    """A copy of nested ``graph`` whose reads of outer names follow ``mapping`` (names the
    graph defines itself shadow the outer ones)."""
    copy = onnx.GraphProto()
    copy.CopyFrom(graph)
    local = {v.name for v in graph.input} | {t.name for t in graph.initializer} \
        | {out for node in graph.node for out in node.output}
    outer = {name: new for name, new in mapping.items() if name not in local}
    for node in copy.node:
        _rename_reads(node, outer)
    for value in copy.output:
        value.name = outer.get(value.name, value.name)
    return copy


def _rename_reads(node: onnx.NodeProto, mapping: Mapping[str, str]) -> None:
    """Rename ``node``'s inputs, and the outer reads of its subgraphs, in place."""
    names = [mapping.get(name, name) if name else "" for name in node.input]
    del node.input[:]
    node.input.extend(names)
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            attr.g.CopyFrom(_renamed_graph(attr.g, mapping))
        elif attr.type == onnx.AttributeProto.GRAPHS:
            for graph in attr.graphs:
                graph.CopyFrom(_renamed_graph(graph, mapping))


def inline_graph(ctx: NodeContext, graph: onnx.GraphProto, bound: Mapping[str, str], copy_label: str) -> list[str]:
    """Convert the nodes of subgraph ``graph`` of ``ctx``'s node into the importer.

    ``bound`` maps the graph's inputs to ONNX names of the enclosing scope. Every value
    the graph defines gets a fresh name (``copy_label`` tells copies apart in messages),
    so a body may be inlined many times. Returns the ONNX names of the graph's outputs.
    """
    unbound = [v.name for v in graph.input if v.name not in bound]
    if unbound:
        raise ctx.fail(f"subgraph {graph.name!r} input {unbound[0]!r} has no value bound to it")
    mapping = dict(bound)
    for tensor in graph.initializer:
        mapping[tensor.name] = ctx.fresh_name(f"{copy_label}/{tensor.name}")
        ctx.define_constant(mapping[tensor.name], numpy_helper.to_array(tensor))
    copies = []
    for index, node in enumerate(graph.node):
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        _rename_reads(copy, mapping)
        for name in node.output:
            if name:
                mapping[name] = ctx.fresh_name(f"{copy_label}/{name}")
        outs = [mapping[name] if name else "" for name in node.output]
        del copy.output[:]
        copy.output.extend(outs)
        copy.name = f"{copy_label}/{node.name or f'{node.op_type}#{index}'}"
        ctx.count_reads([*copy.input, *outer_reads(copy)])
        copies.append(copy)
    outputs = [mapping.get(v.name, v.name) for v in graph.output]
    ctx.count_reads(outputs)
    for copy in copies:
        ctx.convert_nested(copy)
    return outputs


def _bind_output(ctx: NodeContext, k: int, name: str) -> None:
    """ONNX output k of ``ctx``'s node is the value ONNX name ``name`` holds."""
    if ctx.is_empty_optional_named(name):
        ctx.set_empty_optional(k)
        return
    sequence = ctx.sequence_named(name)
    if sequence is not None:
        ctx.set_sequence(k, sequence)
        return
    array = ctx.constant_named(name)
    if array is not None:
        ctx.set_constant(k, array)
        return
    ctx.alias(k, ctx.value_named(name))


def _graph_attr(ctx: NodeContext, name: str) -> onnx.GraphProto:
    graph = ctx.attr(name)
    if not isinstance(graph, onnx.GraphProto):
        raise ctx.fail(f"attribute {name} (a graph) is required")
    return graph


def _known_flag(ctx: NodeContext, k: int, what: str, form: str) -> bool:
    """Input k, a boolean known at import time: a constant, or a graph input the model
    specializes on. One computed from fed tensors is refused: specializing on those
    tensors' values would compile the model anew for nearly every run."""
    if not ctx.is_const(k) and not ctx.is_graph_input(k):
        raise ctx.unsupported(form)
    values = ctx.const(k, what).ravel()
    if values.size != 1:
        raise ctx.fail(f"input {k} ({what}) must hold one value, got {values.size}")
    return bool(values[0])


# ----- If ---------------------------------------------------------------------------------
@_converts("If")
def _if(ctx: NodeContext) -> None:
    cond = _known_flag(ctx, 0, "cond", "a condition computed from tensors at run time "
                                       "(fusionlang chooses the branch at import time)")
    branch = _graph_attr(ctx, "then_branch" if cond else "else_branch")
    outputs = inline_graph(ctx, branch, {}, f"{ctx.label}/{'then' if cond else 'else'}")
    if len(outputs) != ctx.num_outputs:
        raise ctx.fail(f"the {'then' if cond else 'else'} branch has {len(outputs)} outputs, "
                       f"the node {ctx.num_outputs}")
    for k, name in enumerate(outputs):
        _bind_output(ctx, k, name)


# ----- Loop -------------------------------------------------------------------------------
@_converts("Loop")
def _loop(ctx: NodeContext) -> None:
    body = _graph_attr(ctx, "body")
    if not ctx.has_input(0):
        raise ctx.unsupported("no trip count M (fusionlang unrolls a loop whose trip count it knows at import time)")
    if not ctx.is_const(0) and not ctx.is_graph_input(0):
        raise ctx.unsupported("a trip count computed from tensors at run time")
    counts = ctx.ints(0, "M")
    if len(counts) != 1:
        raise ctx.fail(f"input 0 (M) must hold one integer, got {len(counts)}")
    trip_count = counts[0]
    running = _known_flag(ctx, 1, "cond", "an initial condition computed from tensors at run time") \
        if ctx.has_input(1) else True
    carried_count = ctx.num_inputs - 2
    names = [v.name for v in body.input]
    if len(names) != carried_count + 2 or len(body.output) < carried_count + 1:
        raise ctx.fail(f"the body takes {len(names)} inputs and gives {len(body.output)} outputs; a loop with "
                       f"{carried_count} carried values needs {carried_count + 2} and at least {carried_count + 1}")
    _check_unroll_size(ctx, trip_count, body)
    carried = [ctx.proto.input[k] for k in range(2, ctx.num_inputs)]
    cond_name = ctx.proto.input[1] if ctx.has_input(1) else ctx.fresh_constant("cond", np.array(True))
    scanned: list[list[str]] = [[] for _ in range(len(body.output) - 1 - carried_count)]
    iteration = 0
    while running and iteration < trip_count:
        counter = ctx.fresh_constant(f"iter{iteration}", np.array(iteration, np.int64))
        bound = dict(zip(names, [counter, cond_name, *carried]))
        outputs = inline_graph(ctx, body, bound, f"{ctx.label}/iter{iteration}")
        cond_name, carried = outputs[0], outputs[1:1 + carried_count]
        for column, name in zip(scanned, outputs[1 + carried_count:]):
            column.append(name)
        running = _body_condition(ctx, cond_name)
        iteration += 1
    for k, name in enumerate(carried):
        _bind_output(ctx, k, name)
    for k, column in enumerate(scanned, start=carried_count):
        if ctx.output(k):
            _bind_stacked(ctx, k, column, axis=0, form="a scan output of a loop that runs no iteration")


def _body_condition(ctx: NodeContext, name: str) -> bool:
    value = ctx.constant_named(name)
    if value is None:
        raise ctx.unsupported("a loop condition computed from tensors (fusionlang unrolls loops at import time)")
    if value.size != 1:
        raise ctx.fail(f"the body's condition must hold one value, got {value.size}")
    return bool(value.ravel()[0])


def _refuse_oversized(ctx: NodeContext, iterations: int, body: onnx.GraphProto) -> int:
    """The nodes unrolling ``iterations`` of ``body`` adds; refused past the limit alone."""
    added = iterations * max(len(body.node), 1)
    if added > MAX_UNROLLED_NODES:
        raise ctx.unsupported(f"{iterations} iterations of a {len(body.node)}-node body (unrolling adds at most "
                              f"{MAX_UNROLLED_NODES} nodes)")
    return added


def _check_unroll_size(ctx: NodeContext, iterations: int, body: onnx.GraphProto) -> None:
    """Refuse unrolling past the limit, counting what the model's loops unrolled before."""
    added = _refuse_oversized(ctx, iterations, body)
    total = ctx.count_unrolled(added)
    if total > MAX_UNROLLED_NODES:
        raise ctx.unsupported(f"{iterations} iterations of a {len(body.node)}-node body, after the loops unrolled "
                              f"before it ({total - added} nodes; unrolling adds at most {MAX_UNROLLED_NODES} "
                              "nodes to a model, nested loops included)")


def _bind_stacked(ctx: NodeContext, k: int, parts: list[str], axis: int, form: str) -> None:
    """ONNX output k stacks the tensors ``parts`` along a new ``axis`` (negative: from the
    end of the stacked rank)."""
    if not parts:
        raise ctx.unsupported(form)
    values = [ctx.value_named(part) for part in parts]
    rank = len(ctx.graph.types[values[0]].shape) + 1
    if not -rank <= axis < rank:
        raise ctx.fail(f"scan output axis {axis} is out of range for rank {rank}")
    axis %= rank
    expanded = [ctx.emit1("unsqueeze", [value], {"axes": (axis,)}) for value in values]
    ctx.emit1("concat", expanded, {"axis": axis}, ctx.output(k))


# ----- Scan -------------------------------------------------------------------------------
@_converts("Scan")
def _scan(ctx: NodeContext) -> None:
    if ctx.opset < 9:
        _scan_batched(ctx)
        return
    states = [ctx.proto.input[k] for k in range(ctx.num_inputs - _num_scan_inputs(ctx))]
    scan_inputs = [ctx.input(k) for k in range(len(states), ctx.num_inputs)]
    finals, columns = _unroll_scan(ctx, states, scan_inputs)
    for k, name in enumerate(finals):
        _bind_output(ctx, k, name)
    _bind_scan_outputs(ctx, columns, len(finals))


def _num_scan_inputs(ctx: NodeContext) -> int:
    count = ctx.attr("num_scan_inputs")
    first = 1 if ctx.opset < 9 else 0  # opset 8: input 0 is sequence_lens
    if not isinstance(count, int) or not 1 <= count <= ctx.num_inputs - first:
        raise ctx.fail(f"attribute num_scan_inputs must be 1 to {ctx.num_inputs - first}, got {count}")
    return count


def _directions(ctx: NodeContext, name: str, count: int) -> list[int]:
    values = list(ctx.attr(name, [0] * count))
    if len(values) != count or any(v not in (0, 1) for v in values):
        raise ctx.fail(f"attribute {name} must list {count} values of 0 or 1, got {values}")
    return values


def _unroll_scan(ctx: NodeContext, states: list[str], scan_inputs: list[str]):
    """Unroll the body over graph values ``scan_inputs``: the final states (ONNX names)
    and, per scan output, the body's outputs in iteration order."""
    body = _graph_attr(ctx, "body")
    if len(body.input) != len(states) + len(scan_inputs) or len(body.output) < len(states):
        raise ctx.fail(f"the body takes {len(body.input)} inputs and gives {len(body.output)} outputs, "
                       f"for {len(states)} states and {len(scan_inputs)} scan inputs")
    axes = list(ctx.attr("scan_input_axes", [0] * len(scan_inputs))) if ctx.opset >= 9 else [0] * len(scan_inputs)
    reverse = _directions(ctx, "scan_input_directions" if ctx.opset >= 9 else "directions", len(scan_inputs))
    if len(axes) != len(scan_inputs):
        raise ctx.fail(f"attribute scan_input_axes must list {len(scan_inputs)} axes, got {axes}")
    lengths = [_sequence_length(ctx, value, axis) for value, axis in zip(scan_inputs, axes)]
    if any(n != lengths[0] for n in lengths):
        raise ctx.fail(f"the scan inputs have different sequence lengths ({lengths})")
    _check_unroll_size(ctx, lengths[0], body)  # before the inputs are cut: 60,000 steps hung there
    slices = [_slices(ctx, value, axis) for value, axis in zip(scan_inputs, axes)]
    length = lengths[0]
    names = [v.name for v in body.input]
    columns: list[list[str]] = [[] for _ in range(len(body.output) - len(states))]
    for step in range(length):
        elements = [parts[length - 1 - step if back else step] for parts, back in zip(slices, reverse)]
        outputs = inline_graph(ctx, body, dict(zip(names, [*states, *elements])), f"{ctx.label}/step{step}")
        states = outputs[:len(states)]
        for column, name in zip(columns, outputs[len(states):]):
            column.append(name)
    return states, columns


def _sequence_length(ctx: NodeContext, value: str, axis: int) -> int:
    """The length of the scan input ``value`` along ``axis``."""
    shape = ctx.graph.types[value].shape
    if not -len(shape) <= axis < len(shape):
        raise ctx.fail(f"scan input axis {axis} is out of range for rank {len(shape)}")
    if shape[axis % len(shape)] == 0:
        raise ctx.unsupported("a scan over an empty sequence")
    return shape[axis % len(shape)]


def _slices(ctx: NodeContext, value: str, axis: int) -> list[str]:
    """Graph value ``value`` cut along ``axis`` into its elements (that axis dropped)."""
    shape = ctx.graph.types[value].shape
    axis %= len(shape)
    parts = ctx.emit("split", [value], {"axis": axis, "split": (1,) * shape[axis]}, [""] * shape[axis])
    return [ctx.emit1("squeeze", [part], {"axes": (axis,)}) for part in parts]


def _bind_scan_outputs(ctx: NodeContext, columns: list[list[str]], first: int) -> None:
    axes = list(ctx.attr("scan_output_axes", [0] * len(columns)))
    reverse = _directions(ctx, "scan_output_directions", len(columns))
    if len(axes) != len(columns):
        raise ctx.fail(f"attribute scan_output_axes must list {len(columns)} axes, got {axes}")
    for k, (column, axis, back) in enumerate(zip(columns, axes, reverse), start=first):
        if ctx.output(k):
            _bind_stacked(ctx, k, column[::-1] if back else column, axis, "a scan over an empty sequence")


def _scan_batched(ctx: NodeContext) -> None:
    """Opset 8's Scan: a batch axis 0 before the sequence axis, and optional
    sequence_lens (input 0). Each batch entry is scanned apart, then restacked."""
    if ctx.has_input(0):
        raise ctx.unsupported("sequence_lens (opset-8 Scan with per-batch lengths)")
    count = _num_scan_inputs(ctx)
    states = [ctx.input(k) for k in range(1, ctx.num_inputs - count)]
    scans = [ctx.input(k) for k in range(ctx.num_inputs - count, ctx.num_inputs)]
    batch = ctx.graph.types[(states + scans)[0]].shape[0]
    if batch == 0:
        raise ctx.unsupported("a scan over an empty batch")
    if len(ctx.graph.types[scans[0]].shape) < 2:
        raise ctx.fail("opset-8 scan inputs need a batch axis and a sequence axis")
    # (refused before cutting the batch; each batch's unrolling is counted as it happens)
    _refuse_oversized(ctx, batch * ctx.graph.types[scans[0]].shape[1], _graph_attr(ctx, "body"))
    per_batch = [_slices(ctx, value, 0) for value in states + scans]
    results = []
    for b in range(batch):
        finals, columns = _unroll_scan(ctx, [p[b] for p in per_batch[:len(states)]],
                                       [p[b] for p in per_batch[len(states):]])
        stacked = [_stack_now(ctx, column) for column in columns]
        results.append(finals + stacked)
    for k in range(len(results[0])):
        if ctx.output(k):
            _bind_stacked(ctx, k, [row[k] for row in results], 0, "a scan over an empty batch")


def _stack_now(ctx: NodeContext, column: list[str]) -> str:
    values = [ctx.value_named(part) for part in column]
    return ctx.emit1("concat", [ctx.emit1("unsqueeze", [v], {"axes": (0,)}) for v in values], {"axis": 0})



# ----- Optional -----------------------------------------------------------------------------
# An optional whose presence the import knows is its element (a tensor or a sequence) when
# present, and a marker in the importer when empty: no graph value ever holds an optional.
@_converts("Optional")
def _optional(ctx: NodeContext) -> None:
    if ctx.has_input(0):
        _bind_output(ctx, 0, ctx.proto.input[0])
    else:
        ctx.set_empty_optional(0)


@_converts("OptionalHasElement")
def _optional_has_element(ctx: NodeContext) -> None:
    ctx.set_constant(0, np.array(not ctx.is_empty_optional(0)))


@_converts("OptionalGetElement")
def _optional_get_element(ctx: NodeContext) -> None:
    if ctx.is_empty_optional(0):
        raise ctx.fail("reads the element of an empty optional")
    _bind_output(ctx, 0, ctx.proto.input[0])
