"""Constant evaluation, in one place: a node computed by its op's NumPy reference.

The reference interpreter runs every node through :func:`evaluate_node`; the importer and
the rewrite engine fold constant-only nodes with :func:`fold_node` and
:func:`fold_constants`; compile evaluates a plan's "const" groups with
:func:`evaluate_node`. So a folded graph computes exactly what the unfolded one did, and a
failing reference reads the same wherever it runs. Folded outputs keep their value names,
so nothing downstream has to be renamed.
"""

from __future__ import annotations

import numpy as np

from fusionlang.errors import FuseError, ShapeError
from fusionlang.ir.graph import Graph, Node
from fusionlang.ir.types import HALF_FLOATS
from fusionlang.ops.registry import OpRegistry, registry_of


def evaluate_node(node: Node, args: list, registry: OpRegistry, *, failing: str = "",
                  out_dtypes: list[str] | None = None) -> list[np.ndarray]:
    """``node``'s outputs computed from ``args`` (one per input, None where an optional
    input is absent) by its op's reference. A reference that fails raises ShapeError
    naming the node (``failing`` says in what, e.g. "constant folding failed: ").

    With ``out_dtypes`` (the outputs' dtypes), float16 and bfloat16 inputs are computed in
    float32 and each result rounded once to its dtype, as ONNX Runtime does (and the
    generated code): NumPy would round every intermediate of a reference to 16 bits."""
    if out_dtypes is not None and any(a is not None and np.asarray(a).dtype.name in HALF_FLOATS for a in args):
        wide = [None if a is None else _widened(np.asarray(a)) for a in args]
        results = evaluate_node(node, wide, registry, failing=failing)
        with np.errstate(over="ignore"):  # rounding past the 16-bit range is inf, as in the generated code
            return [r.astype(dtype, copy=False) for r, dtype in zip(results, out_dtypes)] + results[len(out_dtypes):]
    opdef = registry.get(node.op, f"node {node.name!r}")
    args = list(args)
    while args and args[-1] is None:
        args.pop()
    try:
        # IEEE special values are results here, as in the generated code (log(0) is -inf,
        # 0/0 NaN): NumPy's RuntimeWarnings about them would only reach users' terminals
        with np.errstate(all="ignore"):
            results = opdef.reference(args, node.attrs)
    except FuseError:
        raise
    except (ValueError, IndexError, TypeError, ArithmeticError) as exc:
        raise ShapeError(f"node {node.name!r} ({node.op}): {failing}{exc}") from exc
    results = [np.asarray(array) for array in results]
    if len(results) < len(node.outputs):
        raise ShapeError(f"node {node.name!r} ({node.op}): {failing}computed {len(results)} values for "
                         f"{len(node.outputs)} outputs")
    return results


def _widened(array: np.ndarray) -> np.ndarray:
    """A 16-bit float array as float32 (exact); other arrays unchanged."""
    return array.astype(np.float32) if array.dtype.name in HALF_FLOATS else array


def is_foldable(graph: Graph, node: Node) -> bool:
    """True when every input the node reads is a constant (ops without inputs included)."""
    return all(value in graph.constants for value in node.present_inputs())


def fold_node(graph: Graph, node: Node, registry: OpRegistry | None = None) -> bool:
    """Replace ``node``'s outputs by constants if its inputs are all constant.

    The node itself stays in ``graph.nodes``; the caller drops it (``fold_constants``
    rebuilds the node list once instead of removing nodes one by one). Returns whether
    the node was folded.
    """
    if not is_foldable(graph, node):
        return False
    args = [graph.constants[v] if v else None for v in node.inputs]
    results = evaluate_node(node, args, registry_of(graph, registry), failing="constant folding failed: ",
                            out_dtypes=[graph.types[out].dtype for out in node.outputs])
    for out, array in zip(node.outputs, results):
        want = graph.types[out]
        if array.shape != want.shape or array.dtype != np.dtype(want.dtype):
            raise ShapeError(f"node {node.name!r} ({node.op}): folding computed {array.dtype}{list(array.shape)} "
                             f"but its type says {want}")
    for out, array in zip(node.outputs, results):
        # the value keeps its name; it only changes from node output to constant
        del graph.types[out]
        graph.add_constant(out, array)
    return True


def fold_constants(graph: Graph, registry: OpRegistry | None = None) -> int:
    """Fold every constant-only subgraph of ``graph`` in place; returns the nodes folded.

    Nodes are visited in topological order, so a chain of constant-only nodes folds in
    one pass. Constants nothing reads any more are left for ``Graph.remove_unused``.
    """
    registry = registry_of(graph, registry)
    kept: list[Node] = []
    folded = 0
    for node in graph.nodes:
        if fold_node(graph, node, registry):
            folded += 1
        else:
            kept.append(node)
    graph.nodes = kept
    return folded


__all__ = ["evaluate_node", "fold_constants", "fold_node", "is_foldable"]
