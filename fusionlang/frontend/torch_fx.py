"""Import a torch.fx graph of core ATen ops (torch.export, AOTAutograd) as a fusionlang Graph.

The graph is specialized on concrete input shapes: every placeholder is given a shape and
dtype (an ``InputSpec``), a SymInt placeholder a concrete int, and fusionlang's own shape
inference types every node from there, so one FX graph with symbolic sizes imports once
per shape its caller meets. ``torch_ops`` holds one converter per ATen op and maps it to
the same registry ops the ONNX converters emit.

Nothing here imports torch: the FX graph is read through its nodes' ``op``, ``target``,
``args`` and ``meta`` (ATen targets are named by ``str(target)``, "aten.add.Tensor"), and
the tensors that ``get_attr`` nodes and lifted parameters hold reach the importer as numpy
arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from fusionlang.errors import FuseError, ModelError, UnsupportedOpError
from fusionlang.frontend import torch_grad_ops  # noqa: F401 (registers the backward graphs' converters)
from fusionlang.frontend.torch_products import VIEWS, deferred_product, ranked_product
from fusionlang.frontend.torch_ops import CONVERTERS, REFUSALS, SYMBOLIC, FxContext, meta_dtype, target_name
from fusionlang.ir.graph import Graph
from fusionlang.ir.types import canonical_dtype
from fusionlang.ops.builder import GraphBuilder

#: what a deferred product imports as until its view takes it (torch_products)
_DEFERRED = object()
#: FX ``call_function`` targets that only pick or combine results (no kernel of their own)
GETITEM = "_operator.getitem"


@dataclass(frozen=True)
class InputSpec:
    """One tensor placeholder's concrete shape and dtype (a numpy dtype name)."""

    shape: tuple[int, ...]
    dtype: str


def fx_refusal(node) -> str | None:
    """Why ``node`` (a call_function of an FX graph) cannot be converted, or None when it can.

    What a capability partitioner asks: a node refused here runs in eager instead."""
    name = target_name(node.target)
    if name == GETITEM:
        return None if fx_refusal(node.args[0]) is None else "reads a result of an op that is not converted"
    if name in SYMBOLIC:
        return "shape arithmetic (runs in eager, between kernels)"
    if name not in CONVERTERS:
        return f"no converter for {name}"
    # inputs too: a piece's inputs cross to numpy (a cast from bfloat16 reads one that cannot)
    for value in _tensor_metas(node) + [v for arg in node.all_input_nodes for v in _tensor_metas(arg)]:
        if meta_dtype(value) is None:
            return f"dtype {value.dtype} is not supported"
        if str(getattr(value, "device", "cpu")) != "cpu":  # the C target reads host memory
            return f"a tensor on device {value.device} (fusionlang compiles for the CPU)"
    refuse = REFUSALS.get(name)
    return refuse(node) if refuse else None


def import_fx(graph_module, inputs: Sequence[InputSpec | int], constants: Mapping[str, np.ndarray] | None = None,
              name: str = "torch", outputs: Sequence[str] | None = None) -> Graph:
    """The FX graph of ``graph_module`` as a verified fusionlang Graph.

    ``inputs`` gives each placeholder, in order, its InputSpec (a tensor) or its int (a
    SymInt size); a placeholder whose name ``constants`` holds is bound to that array
    instead (export's parameters and buffers). Tensor placeholders become graph inputs
    named like the placeholder; the graph's outputs follow the FX output's flattened
    order, only the nodes ``outputs`` names when given. UnsupportedOpError names the first
    node no converter takes."""
    constants = dict(constants or {})
    importer = _FxImporter(graph_module, name, outputs)
    placeholders = [node for node in graph_module.graph.nodes if node.op == "placeholder"]
    free = [node for node in placeholders if node.name not in constants]
    if len(free) != len(inputs):
        raise ModelError(f"{name}: the graph takes {len(free)} inputs, {len(inputs)} were given")
    for node in placeholders:
        if node.name in constants:
            importer.env[node] = importer.builder.constant(np.asarray(constants[node.name]), node.name)
    for node, spec in zip(free, inputs):
        importer.bind_input(node, spec)
    for node in graph_module.graph.nodes:
        importer.convert(node)
    graph = importer.builder.build()
    graph.remove_unused()  # the views a product taken at rank no longer reads
    return graph


class _FxImporter:
    """The conversion of one FX graph: FX node -> graph value(s), node by node."""

    def __init__(self, graph_module, name: str, outputs: Sequence[str] | None):
        self.module = graph_module
        self.kept_outputs = None if outputs is None else set(outputs)
        self.builder = GraphBuilder(name)
        #: FX node -> graph value name, tuple of names (a multi-result op), or a Python scalar
        self.env: dict[Any, Any] = {}

    def bind_input(self, node, spec: InputSpec | int) -> None:
        if isinstance(spec, InputSpec):
            self.env[node] = self.builder.input(node.name, spec.shape, canonical_dtype(spec.dtype))
        else:
            self.env[node] = spec

    def convert(self, node) -> None:
        if node.op == "placeholder":
            return
        if node.op == "get_attr":
            self.env[node] = self.builder.constant(_attribute_array(self.module, node.target), node.name)
        elif node.op == "output":
            self._outputs(node.args[0])
        elif node.op == "call_function":
            self.env[node] = self._call(node)
        else:
            raise UnsupportedOpError(f"node {node.name!r}: FX {node.op} nodes are not supported (call_function only)")

    def _call(self, node) -> Any:
        name = target_name(node.target)
        if name == GETITEM:
            return self.env[node.args[0]][node.args[1]]
        if name in SYMBOLIC:
            return SYMBOLIC[name](self.builder.graph, *self._resolve(node.args))
        refusal = fx_refusal(node)
        if refusal is not None:
            raise UnsupportedOpError(f"node {node.name!r} ({name}): {refusal}")
        if deferred_product(node):
            return _DEFERRED  # its view decides, see torch_products
        ctx = self._context(node)
        if name in VIEWS and self.env.get(node.args[0]) is _DEFERRED:
            return self._view_of_product(ctx)
        return self._converted(node, ctx)

    def _converted(self, node, ctx: FxContext) -> Any:
        name = target_name(node.target)
        try:
            result = CONVERTERS[name](ctx)
        except FuseError as exc:
            if str(exc).startswith(f"node {node.name!r}"):
                raise
            raise type(exc)(f"node {node.name!r} ({name}): {exc}") from exc
        return _checked(ctx, result)

    def _view_of_product(self, ctx: FxContext):
        """A view of a deferred product: the product at its operands' rank when the view
        restores the axes they flattened, else the product and the view as they are."""
        types = self.builder.graph.types
        operands = ranked_product(ctx.node, self.env, lambda value: types[value].shape, ctx.arg(1, "size"),
                                  lambda value: value in self.builder.graph.constants)
        if operands is None:
            product = ctx.node.args[0]
            self.env[product] = self._converted(product, self._context(product))
            return self._converted(ctx.node, self._context(ctx.node))
        a, b, bias = operands
        result = ctx.emit("matmul", a, b)
        return _checked(ctx, result if bias is None else ctx.emit("add", result, bias))

    def _context(self, node) -> FxContext:
        return FxContext(self.builder, node, self._resolve(node.args), self._resolve(node.kwargs))

    def _resolve(self, value):
        """FX args with nodes replaced by what they import as (lists and dicts kept)."""
        if isinstance(value, (list, tuple)):
            return type(value)(self._resolve(v) for v in value)
        if isinstance(value, dict):
            return {k: self._resolve(v) for k, v in value.items()}
        return self.env[value] if _is_node(value) else value

    def _outputs(self, results) -> None:
        kept = [node for node in _flatten(results) if self.kept_outputs is None or node.name in self.kept_outputs]
        for value in self._resolve(kept):
            if not isinstance(value, str):
                raise ModelError(f"{self.builder.graph.name}: an output is {value!r}, not a tensor")
            self.builder.output(value)


def _checked(ctx: FxContext, result):
    """``result`` cast to the dtype torch says the node has, where the two differ (torch's
    type promotion, which a converter need not spell out op by op)."""
    expected = meta_dtype(ctx.node.meta.get("val"))
    if not isinstance(result, str) or expected is None or ctx.dtype(result) == expected:
        return result
    return ctx.emit("cast", result, to=expected)


def _tensor_metas(node) -> list:
    value = node.meta.get("val")
    values = value if isinstance(value, (list, tuple)) else [value]
    return [v for v in values if hasattr(v, "dtype") and hasattr(v, "shape")]


def _attribute_array(module, target: str) -> np.ndarray:
    value = module
    for part in target.split("."):
        value = getattr(value, part)
    return value.detach().cpu().numpy()


def _flatten(value) -> list:
    if isinstance(value, (list, tuple)):
        return [item for v in value for item in _flatten(v)]
    return [value]


def _is_node(value) -> bool:
    # FX nodes, without importing torch.fx: they carry an op kind and a graph
    return hasattr(value, "op") and hasattr(value, "graph") and hasattr(value, "target")

