"""The NumPy reference interpreter: the oracle every fused program is compared with (each node
evaluated by :func:`.evaluate.evaluate_node`, as constant folding does)."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from fusionlang.errors import InputError, ShapeError
from fusionlang.ir.graph import Graph
from fusionlang.ops.evaluate import evaluate_node
from fusionlang.ops.registry import OpRegistry, registry_of


def check_feeds(graph: Graph, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Validate feeds against the graph inputs; returns them as arrays of the right dtype."""
    missing = [name for name in graph.inputs if name not in feeds]
    if missing:
        raise InputError(f"missing input {missing[0]!r} (graph inputs: {', '.join(graph.inputs)})")
    extra = sorted(set(feeds) - set(graph.inputs))
    if extra:
        raise InputError(f"unknown input {extra[0]!r} (graph inputs: {', '.join(graph.inputs)})")
    arrays = {}
    for name in graph.inputs:
        want = graph.types[name]
        array = np.asarray(feeds[name])
        if tuple(array.shape) != want.shape:
            raise InputError(f"input {name!r}: expected shape {list(want.shape)}, got {list(array.shape)}")
        if array.dtype != np.dtype(want.dtype):
            array = _converted(name, array, np.dtype(want.dtype))
        arrays[name] = array
    return arrays


def _converted(name: str, array: np.ndarray, want: np.dtype) -> np.ndarray:
    """``array`` as ``want`` when the conversion keeps every value (integers exactly,
    finite floats finite: float64 feeds for a float32 input round, as users mean them), else
    an InputError naming the first value it would change. NumPy's same-kind cast turned
    int64 300 into int8 44 without a word."""
    integers = array.dtype.kind in "iu" and want.kind in "iu"  # signed <-> unsigned: the values decide
    if not (integers or np.can_cast(array.dtype, want, casting="same_kind")):
        # (NumPy saves bfloat16 as raw 2-byte records, which load back as void)
        hint = "; pass bfloat16 values as float32, which .npy files can hold" if want.name == "bfloat16" else ""
        raise InputError(f"input {name!r}: expected dtype {want.name}, got {array.dtype}{hint}")
    with np.errstate(all="ignore"):
        out = array.astype(want)
        if want.kind in "iub":
            changed = out.astype(array.dtype) != array
        else:  # a float: only a finite value that becomes infinite is lost
            changed = np.isfinite(array.astype(np.float64)) & ~np.isfinite(out.astype(np.float64))
    if changed.any():
        index = tuple(int(i) for i in np.argwhere(changed)[0])
        raise InputError(f"input {name!r}: expected dtype {want.name}, got {array.dtype} holding {array[index].item()!r} "
                         f"at {list(index)}, which {want.name} cannot hold (convert the feed first)")
    return out


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
