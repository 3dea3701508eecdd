"""The passes of a rewrite run besides simplification (which is rewrite.py's worklist):

* :func:`decompose_pass` opens compound ops with the rule set's decompositions;
* :func:`fold_pass` folds constant-only subgraphs through the reference interpreter;
* :func:`dead_code` and :func:`common_subexpressions` clean up afterwards.
"""

from __future__ import annotations

import numpy as np

from fusionlang.errors import RewriteError
from fusionlang.ops.evaluate import fold_constants
from fusionlang.ir.graph import Graph, Node
from fusionlang.ir.types import HALF_FLOATS
from fusionlang.lang.guards import Bindings
from fusionlang.lang.instantiate import InstantiateError, Instantiator, Scalar
from fusionlang.lang.ruleset import DecomposeRule, RuleSet
from fusionlang.engine.rewrite_index import GraphIndex
from fusionlang.engine.rewrite_surgery import splice
from fusionlang.engine.rewrite_trace import Recorder

#: constants up to this many elements are merged when equal (scalars from decompositions)
SMALL_CONSTANT = 64


def decompose_pass(graph: Graph, ruleset: RuleSet, recorder: Recorder) -> int:
    """Open every compound op that has a matching decomposition case, and the compound
    ops its body builds in turn. Returns how many nodes were opened."""
    if not ruleset.decompositions:
        return 0
    index = GraphIndex(graph)
    opened = 0
    for root in list(graph.nodes):
        stack = [root]
        while stack:
            node = stack.pop()
            case = _case_for(ruleset, node)
            if case is None or index.is_removed(node):
                continue
            kept = open_node(index, ruleset, node, case, recorder)
            opened += 1
            stack.extend(reversed(kept))
    index.finalize()
    return opened


def _case_for(ruleset: RuleSet, node: Node) -> DecomposeRule | None:
    for case in ruleset.decompositions.get(node.op, ()):
        if case.applies(node):
            return case
    return None


def open_node(index: GraphIndex, ruleset: RuleSet, node: Node, case: DecomposeRule, recorder: Recorder) -> list[Node]:
    graph = index.graph
    recorder.fire(case.name, case.where, node.name, "decompose", counted=False)
    statics = {var: node.attrs[attr] for attr, var in case.binds}
    statics.update(case.requires)
    bindings = Bindings(dict(zip(case.params, node.inputs)), statics)
    provenance = node.provenance + (f"decompose {case.op} ({case.where})",)
    inst = Instantiator(graph, ruleset.registry, bindings, provenance=provenance, stem=f"{node.name}_",
                        namer=index.fresh_name, widen=_WIDENED if _is_16_bit(graph, node) else None)
    try:
        values = inst.body(case.body)
        values = [inst.materialize(v, graph.types[out].dtype, graph.types[out].shape) if isinstance(v, Scalar)
                  else _narrowed(inst, v, graph.types[out].dtype) for v, out in zip(values, node.outputs)]
    except InstantiateError as exc:
        where = exc.span or case.span
        raise RewriteError(f"{where}: decomposition of {case.op!r} fails at node {node.name!r}: {exc.message}") \
            from None
    recorder.built(len(inst.created), case.span, f"the decomposition of {case.op!r} at node {node.name!r}")
    return splice(index, node, values, inst.created, ruleset.registry,
                  what=f"{case.where}: decomposition of {case.op!r}", new_constants=inst.new_constants)


#: a compound op on 16-bit floats is opened in float32: its body's steps compute and keep
#: their results in float32 and only its outputs are rounded, once, as ONNX Runtime and the
#: reference interpreter compute the op (a float16 layer norm of a row holding 300 squared
#: deviations past float16's 65504 and returned beta alone, step by step)
_WIDENED = {dtype: "float32" for dtype in HALF_FLOATS}


def _is_16_bit(graph: Graph, node: Node) -> bool:
    return any(graph.types[v].dtype in HALF_FLOATS for v in (*node.present_inputs(), *node.outputs))


def _narrowed(inst: Instantiator, value: str, dtype: str) -> str:
    """A body's result rounded to its output's 16-bit dtype (other results as they are)."""
    return inst.cast(value, dtype) if dtype in HALF_FLOATS else value


def fold_pass(graph: Graph, ruleset: RuleSet) -> int:
    return fold_constants(graph, ruleset.registry)


def dead_code(graph: Graph) -> int:
    return graph.remove_unused()


def _freeze(value):
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


def common_subexpressions(graph: Graph) -> int:
    """Merge equal small constants and nodes computing the same op on the same inputs
    with the same attributes. Graph outputs keep their names. Returns values merged."""
    rename: dict[str, str] = {}
    outputs = set(graph.outputs)
    seen_constants: dict[tuple, str] = {}
    for name, array in graph.constants.items():
        if array.size > SMALL_CONSTANT or name in outputs:
            continue
        key = (array.dtype.str, array.shape, array.tobytes())
        if key in seen_constants:
            rename[name] = seen_constants[key]
        else:
            seen_constants[key] = name
    seen_nodes: dict[tuple, Node] = {}
    kept = []
    for node in graph.nodes:
        if rename:
            node.inputs = [rename.get(v, v) for v in node.inputs]
        key = (node.op, tuple(node.inputs), _freeze(node.attrs), len(node.outputs))
        earlier = seen_nodes.get(key)
        if earlier is not None and not any(out in outputs for out in node.outputs):
            for mine, theirs in zip(node.outputs, earlier.outputs):
                rename[mine] = theirs
                graph.types.pop(mine, None)
            continue
        seen_nodes.setdefault(key, node)
        kept.append(node)
    graph.nodes = kept
    return len(rename)
