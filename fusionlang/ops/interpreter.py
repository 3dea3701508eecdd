"""The NumPy reference interpreter: the oracle every fused program is compared with (each node
evaluated by :func:`.evaluate.evaluate_node`, as constant folding does)."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from fusionlang.errors import ShapeError
from fusionlang.feeds import check_inputs
from fusionlang.ir.graph import Graph
from fusionlang.ops.evaluate import evaluate_node
from fusionlang.ops.registry import OpRegistry, registry_of


def check_feeds(graph: Graph, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Validate feeds against the graph inputs; returns them as arrays of the right dtype."""
    return check_inputs({name: (graph.types[name].shape, np.dtype(graph.types[name].dtype)) for name in graph.inputs},
                        feeds)


def run(graph: Graph, feeds: Mapping[str, np.ndarray], registry: OpRegistry | None = None,
        *, keep: set[str] | None = None) -> dict[str, np.ndarray]:
    """Run ``graph`` on ``feeds``; returns {output name: array}.

    Intermediates are freed after their last use, so memory stays near the live set.
    ``keep`` names extra values to return (for debugging and differential tests).
    """
    registry = registry_of(graph, registry)
    env: dict[str, np.ndarray] = dict(graph.constants)
    env.update(check_feeds(graph, feeds))
    wanted = set(graph.outputs) | (keep or set())
    last_use = {}
    for position, node in enumerate(graph.nodes):
        for value in node.present_inputs():
            last_use[value] = position
    for position, node in enumerate(graph.nodes):
        results = evaluate_node(node, [env[v] if v else None for v in node.inputs], registry,
                                out_dtypes=[graph.types[out].dtype for out in node.outputs])
        for out, array in zip(node.outputs, results):
            expected = graph.types[out]
            if array.shape != expected.shape:
                raise ShapeError(f"node {node.name!r} ({node.op}): computed shape {list(array.shape)} "
                                 f"but its type says {expected}")
            env[out] = array
        for value in node.present_inputs():
            if last_use.get(value) == position and value not in wanted and value not in graph.constants:
                env.pop(value, None)
    return {name: env[name] for name in graph.outputs} | {name: env[name] for name in (keep or ()) if name in env}
