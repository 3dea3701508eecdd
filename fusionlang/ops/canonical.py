"""The canonical attributes of a node: what patterns compare their literals with.

A node stores its attributes as written (by the importer, a builder or a rule), with
defaults that depend on shapes left empty: a conv imported without strides stores
``strides=()``, which means ``[1, 1]`` on 2-d images, and ``axes=[-1]`` means the last
axis. Both are right for the ops, which resolve them when they run, but a pattern with
``strides=[1, 1]`` or ``axes=[2]`` must match them too. So the matcher compares
canonical values: defaults filled from the operand shapes, axes made non-negative (and
sorted where their order does not matter), the way each op itself reads them.

This is a view, computed where patterns read attributes, not stored on nodes: stored
attributes stay as the model wrote them (they round-trip to ONNX and the printer), and
a rewrite that spreads ``..rest`` passes on what it found.
"""

from __future__ import annotations

from typing import Any, Callable

from fusionlang.errors import FuseError
from fusionlang.ir.graph import Graph, Node
from fusionlang.ops.registry import OpCall, OpRegistry
from fusionlang.ops.reduce import reduced_axes

Canonical = Callable[[OpCall], dict[str, Any]]


def canonical_attrs(registry: OpRegistry, graph: Graph, node: Node, overrides: dict | None = None) -> dict:
    """``node``'s attributes (with ``overrides`` in place of some), canonical for its op.

    Attributes that cannot be resolved (an axis out of range, a missing shape) are left
    as they are: they then match only what is written the same way."""
    attrs = {**node.attrs, **(overrides or {})}
    rule = _RULES.get(node.op)
    if rule is None:
        return attrs
    in_types = [graph.types.get(v) if v else None for v in node.inputs]
    try:
        _, call = registry.call(node.op, node.name, attrs, in_types)
        return {**call.attrs, **rule(call)}
    except (FuseError, KeyError, IndexError, TypeError, ValueError):
        return attrs


def _window(call: OpCall) -> dict:
    """conv, conv_transpose and pooling: strides and dilations 1, pads 0 per spatial
    axis, and (conv) the kernel shape of the weight."""
    spatial = call.input(0).rank - 2
    out = {"strides": call.attrs["strides"] or (1,) * spatial,
           "dilations": call.attrs["dilations"] or (1,) * spatial,
           "pads": call.attrs["pads"] or (0,) * (2 * spatial)}
    if not call.attrs["kernel_shape"] and call.has_input(1):
        out["kernel_shape"] = call.input(1).shape[2:]
    if "output_padding" in call.attrs:
        out["output_padding"] = call.attrs["output_padding"] or (0,) * spatial
    return out


def _reduce(call: OpCall) -> dict:
    return {"axes": reduced_axes(call, call.input(0).rank)}


def _axis(*, inclusive: bool = False) -> Canonical:
    def resolve(call: OpCall) -> dict:
        return {"axis": call.axis(call.attrs["axis"], call.input(0).rank, inclusive=inclusive)}

    return resolve


def _transpose(call: OpCall) -> dict:
    rank = call.input(0).rank
    perm = call.attrs["perm"] or tuple(reversed(range(rank)))
    return {"perm": tuple(call.axis(p, rank, name="perm") for p in perm)}


def _axes_of(rank_of: Callable[[OpCall], int]) -> Canonical:
    def resolve(call: OpCall) -> dict:
        axes = call.attrs["axes"]
        if not axes:
            return {}
        rank = rank_of(call)
        return {"axes": tuple(sorted(call.axis(a, rank, name="axes") for a in axes))}

    return resolve


_RULES: dict[str, Canonical] = {
    **{op: _window for op in ("conv", "conv_transpose", "max_pool", "average_pool")},
    **{f"reduce_{kind}": _reduce for kind in ("sum", "mean", "max", "min", "prod")},
    **{op: _axis() for op in ("softmax", "log_softmax", "concat", "split", "gather", "gather_elements",
                              "index_of", "cumsum", "layer_norm")},
    **{op: _axis() for op in ("cumprod", "scatter_elements", "scatter_position", "scatter_pick", "sort_position",
                              "sorted_indices")},
    "one_hot": _axis(inclusive=True),
    "flatten": _axis(inclusive=True),
    "transpose": _transpose,
    "squeeze": _axes_of(lambda call: call.input(0).rank),
    "unsqueeze": _axes_of(lambda call: call.input(0).rank + len(call.attrs["axes"])),
}
