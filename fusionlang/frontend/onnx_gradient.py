"""The ``Gradient`` op of ``ai.onnx.preview.training``: reverse-mode derivatives built at import.

``Gradient(xs=[...], zs=[...], y=Y)`` names a subgraph of the model, the nodes computing
``Y`` from the tensors ``xs`` and ``zs``, and returns dY/dx for each x in ``xs``, evaluated
at the Gradient node's own inputs (xs then zs). Import turns that into ordinary nodes:
the subgraph is inlined again, fed the Gradient's inputs (the forward pass), and the
adjoint nodes are written as ONNX nodes and inlined after it (the backward pass), so the
derivatives fuse and compile like the rest of the model. The seed is a tensor of ones
shaped like Y, so a Y with more than one element gives the derivative of its sum.

Each differentiable op has one rule (:data:`RULES`) giving the adjoints of its inputs
from the adjoint of its output; broadcasting is undone by summing over the broadcast axes.
A path from an x to Y through an op without a rule is refused by name.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from fusionlang.errors import UnsupportedOpError
from fusionlang.frontend.onnx_context import NodeContext
from fusionlang.frontend.onnx_newops import DOMAIN_CONVERTERS
from fusionlang.frontend.unsupported import DEFAULT_DOMAINS

#: dtypes a derivative is taken in, as numpy types
DIFFERENTIABLE = {"float16": np.float16, "float32": np.float32, "float64": np.float64}


class _Adjoints:
    """The backward pass as ONNX nodes over the forward values (``shapes`` and ``dtype``
    of each), written into one graph for NodeContext.inline."""

    def __init__(self, opset: int, shapes: dict[str, tuple[int, ...]], dtype: type):
        self.opset = opset
        self.shapes = shapes
        self.dtype = dtype
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def op(self, op_type: str, inputs: Sequence[str], **attrs) -> str:
        out = f"adjoint_{len(self.nodes)}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=out, **attrs))
        return out

    def const(self, array) -> str:
        name = f"adjoint_const_{len(self.initializers)}"
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def scalar(self, value: float) -> str:
        return self.const(np.array(value, dtype=self.dtype))

    def unbroadcast(self, grad: str, to: str, from_shape: tuple[int, ...]) -> str:
        """``grad`` (shaped ``from_shape``) summed down to the shape of forward value ``to``."""
        shape = self.shapes[to]
        if tuple(from_shape) == tuple(shape):
            return grad
        lead = len(from_shape) - len(shape)
        axes = list(range(lead)) + [lead + k for k, n in enumerate(shape) if n == 1 and from_shape[lead + k] != 1]
        if axes:
            if self.opset >= 13:
                grad = self.op("ReduceSum", [grad, self.const(np.array(axes, dtype=np.int64))], keepdims=1)
            else:
                grad = self.op("ReduceSum", [grad], axes=axes, keepdims=1)
        return self.op("Reshape", [grad, self.const(np.array(shape, dtype=np.int64))])


#: a rule: (adjoints, forward node, adjoint of its output) -> adjoint of each input (None: none)
Rule = Callable[[_Adjoints, onnx.NodeProto, str], list]


def _add(b: _Adjoints, node, g):
    out = b.shapes[node.output[0]]
    return [b.unbroadcast(g, x, out) for x in node.input]


def _sub(b: _Adjoints, node, g):
    out = b.shapes[node.output[0]]
    x, z = node.input
    return [b.unbroadcast(g, x, out), b.unbroadcast(b.op("Neg", [g]), z, out)]


def _mul(b: _Adjoints, node, g):
    out = b.shapes[node.output[0]]
    x, z = node.input
    return [b.unbroadcast(b.op("Mul", [g, z]), x, out), b.unbroadcast(b.op("Mul", [g, x]), z, out)]


def _div(b: _Adjoints, node, g):
    # d(x/z)/dz = -(x/z)/z: read the forward quotient rather than squaring z
    out = b.shapes[node.output[0]]
    x, z = node.input
    gx = b.op("Div", [g, z])
    gz = b.op("Neg", [b.op("Mul", [gx, node.output[0]])])
    return [b.unbroadcast(gx, x, out), b.unbroadcast(gz, z, out)]


def _matmul(b: _Adjoints, node, g):
    x, z = node.input
    if len(b.shapes[x]) < 2 or len(b.shapes[z]) < 2:
        raise UnsupportedOpError("Gradient through MatMul of a 1-D operand is not supported (only rank >= 2)")
    out = b.shapes[node.output[0]]

    def swapped(value):
        rank = len(b.shapes[value])
        return b.op("Transpose", [value], perm=list(range(rank - 2)) + [rank - 1, rank - 2])

    gx_full = b.op("MatMul", [g, swapped(z)])
    gz_full = b.op("MatMul", [swapped(x), g])
    return [b.unbroadcast(gx_full, x, out[:-1] + (b.shapes[x][-1],)),
            b.unbroadcast(gz_full, z, out[:-2] + (b.shapes[z][-2], out[-1]))]


def _unary(make: Callable[[_Adjoints, onnx.NodeProto, str], str]) -> Rule:
    return lambda b, node, g: [make(b, node, g)]


RULES: dict[str, Rule] = {
    "Add": _add,
    "Sub": _sub,
    "Mul": _mul,
    "Div": _div,
    "MatMul": _matmul,
    "Identity": _unary(lambda b, node, g: g),
    "Neg": _unary(lambda b, node, g: b.op("Neg", [g])),
    "Exp": _unary(lambda b, node, g: b.op("Mul", [g, node.output[0]])),
    "Log": _unary(lambda b, node, g: b.op("Div", [g, node.input[0]])),
    "Sqrt": _unary(lambda b, node, g: b.op("Div", [g, b.op("Add", [node.output[0], node.output[0]])])),
    "Reciprocal": _unary(lambda b, node, g: b.op("Neg", [b.op("Mul", [g, b.op("Mul", [node.output[0],
                                                                                        node.output[0]])])])),
    "Tanh": _unary(lambda b, node, g: b.op("Mul", [g, b.op("Sub", [b.scalar(1), b.op("Mul", [node.output[0],
                                                                                          node.output[0]])])])),
    "Sigmoid": _unary(lambda b, node, g: b.op("Mul", [g, b.op("Mul", [node.output[0], b.op(
        "Sub", [b.scalar(1), node.output[0]])])])),
    "Relu": _unary(lambda b, node, g: b.op("Where", [b.op("Greater", [node.input[0], b.scalar(0)]), g,
                                                     b.scalar(0)])),
    "Sin": _unary(lambda b, node, g: b.op("Mul", [g, b.op("Cos", [node.input[0]])])),
    "Cos": _unary(lambda b, node, g: b.op("Neg", [b.op("Mul", [g, b.op("Sin", [node.input[0]])])])),
}


def _gradient(ctx: NodeContext) -> None:
    xs, zs, y = list(ctx.attr("xs", [])), list(ctx.attr("zs", [])), ctx.attr("y")
    if not xs or not y:
        raise ctx.fail("needs the attributes xs and y")
    sources = xs + zs
    if ctx.num_inputs != len(sources):
        raise ctx.fail(f"takes {len(sources)} inputs (xs then zs), the model gives {ctx.num_inputs}")
    if ctx.num_outputs > len(xs):
        raise ctx.fail(f"has {ctx.num_outputs} outputs, but xs names {len(xs)} tensors")
    nodes = _forward_nodes(ctx, sources, y)
    produced = [v for node in nodes for v in node.output if v]
    body = helper.make_graph(nodes, f"{ctx.label}/forward", [_info(name) for name in sources],
                             [_info(v) for v in produced])
    values = dict(zip(sources, ctx.inputs()))
    values.update(zip(produced, ctx.inline(body, ctx.inputs())))
    if y not in values:
        raise ctx.fail(f"y {y!r} is not computed from xs and zs")
    types = {name: ctx.graph.types[value] for name, value in values.items()}
    shapes = {name: t.shape for name, t in types.items()}
    read_constants = {v: ctx.constant_named(v) for node in nodes for v in node.input if v and v not in shapes}
    shapes.update((v, array.shape) for v, array in read_constants.items() if array is not None)
    dtype = types[y].dtype
    if dtype not in DIFFERENTIABLE:
        raise ctx.fail(f"y {y!r} is {dtype}; derivatives are taken of floating-point tensors only "
                       f"({', '.join(DIFFERENTIABLE)})")
    adjoints = _Adjoints(ctx.opset, shapes, DIFFERENTIABLE[dtype])
    outputs = _backward(ctx, adjoints, nodes, xs, y)
    names = sorted(values)
    body = helper.make_graph(adjoints.nodes, f"{ctx.label}/backward", [_info(name) for name in names],
                             [_info(v) for v in outputs], adjoints.initializers)
    for k, value in enumerate(ctx.inline(body, [values[name] for name in names])):
        if ctx.output(k):
            ctx.alias(k, value)


def _backward(ctx: NodeContext, b: _Adjoints, nodes: list[onnx.NodeProto], xs: list[str], y: str) -> list[str]:
    """Adjoint nodes into ``b``; the adjoint of each x (zeros where Y does not depend on it)."""
    active = set(xs)
    for node in nodes:
        if active.intersection(node.input):
            active.update(v for v in node.output if v)
    contributions: dict[str, list[str]] = {y: [b.const(np.ones(b.shapes[y], dtype=b.dtype))]}
    for node in reversed(nodes):
        out = node.output[0] if node.output else ""
        if not out or out not in contributions or not active.intersection(node.input):
            continue
        rule = RULES.get(node.op_type) if node.domain in DEFAULT_DOMAINS else None
        if rule is None or len([v for v in node.output if v]) != 1:
            raise UnsupportedOpError(f"node {ctx.label!r} (Gradient): the path from xs to y {y!r} goes through "
                                     f"{node.op_type} (node {node.name or out!r}), which has no derivative rule "
                                     f"(rules: {', '.join(sorted(RULES))})")
        for value, grad in zip(node.input, rule(b, node, _total(b, contributions[out]))):
            if value in active and grad is not None:
                contributions.setdefault(value, []).append(grad)
    return [_total(b, contributions[x]) if x in contributions
            else b.const(np.zeros(b.shapes[x], dtype=b.dtype)) for x in xs]


def _total(b: _Adjoints, terms: list[str]) -> str:
    total = terms[0]
    for term in terms[1:]:
        total = b.op("Add", [total, term])
    return total


def _forward_nodes(ctx: NodeContext, sources: list[str], y: str) -> list[onnx.NodeProto]:
    """The model's nodes computing ``y`` from ``sources`` and constants, in model order."""
    graph = ctx.model_graph()
    producers = {out: node for node in graph.node for out in node.output if out}
    constants = {t.name for t in graph.initializer}
    fed = {vi.name for vi in graph.input} - constants
    needed: set[int] = set()
    todo, seen = [y], set(sources)
    while todo:
        value = todo.pop()
        if value in seen or not value:
            continue
        seen.add(value)
        if value in producers:
            node = producers[value]
            if node is ctx.proto:
                raise ctx.fail(f"y {y!r} is computed from this Gradient's own outputs")
            needed.add(id(node))
            todo.extend(node.input)
        elif value in fed:
            raise ctx.fail(f"y {y!r} depends on graph input {value!r}, which is in neither xs nor zs")
        elif value not in constants:
            raise ctx.fail(f"y {y!r} reads {value!r}, which no node, graph input or initializer defines")
    return [node for node in graph.node if id(node) in needed]


def _info(name: str) -> onnx.ValueInfoProto:
    return helper.make_empty_tensor_value_info(name)


DOMAIN_CONVERTERS["ai.onnx.preview.training", "Gradient"] = _gradient
