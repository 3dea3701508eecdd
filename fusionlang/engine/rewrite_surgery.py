"""Graph surgery: put the values a rule built in place of the node it replaces.

Shared by rewrites and decompositions. New nodes whose inputs are all constants are
folded on the spot through the reference interpreter (``fusionlang.frontend.fold``), so
a replacement such as ``w * reshape(g / sqrt(var + eps))`` over constant weights leaves a
single new constant. The replaced node's output names survive (consumers and graph
outputs keep reading the same names); new nodes are inserted where the old one was, so
the node list stays topologically ordered.
"""

from __future__ import annotations

from fusionlang.errors import RewriteError
from fusionlang.frontend.fold import fold_node
from fusionlang.ir.graph import Graph, Node
from fusionlang.ops.registry import OpRegistry


def splice(graph: Graph, node: Node, results: list[str], created: list[Node], registry: OpRegistry,
           *, what: str, constants_before: set[str]) -> list[Node]:
    """Replace ``node`` by ``results`` (one value per output of ``node``).

    ``created``: nodes the rule added (appended to ``graph.nodes``); ``constants_before``:
    constant names that existed before the rule ran (others are the rule's own). Returns
    the created nodes that remain (those not folded away).
    """
    kept: list[Node] = []
    folded: set[int] = set()
    for new in created:
        if fold_node(graph, new, registry):
            folded.add(id(new))
        else:
            kept.append(new)
    for out, value in zip(node.outputs, results):
        if graph.types[value] != graph.types[out]:
            raise RewriteError(f"{what}: the replacement of node {node.name!r} ({node.op}) computes "
                               f"{graph.types[value]} for {out!r}, which is {graph.types[out]}")
    if list(results) == list(node.outputs[:len(results)]):
        raise RewriteError(f"{what}: replaces node {node.name!r} by itself")

    created_ids = {id(n) for n in created}
    position = next(k for k, n in enumerate(graph.nodes) if n is node)
    graph.nodes = [n for n in graph.nodes if n is not node and id(n) not in created_ids]
    new_outputs = {out: new for new in kept for out in new.outputs}

    for out, value in zip(node.outputs, results):
        if value in new_outputs:
            _rename_value(new_outputs[value], value, out, kept, graph)
            continue
        if value in graph.constants and value not in constants_before:
            graph.constants[out] = graph.constants.pop(value)
            del graph.types[value]
            _replace_inputs(kept, value, out)
            continue
        if out in graph.outputs:
            if value in graph.constants:
                graph.constants[out] = graph.constants[value]
                continue
            if value in graph.inputs or value in graph.outputs:
                raise RewriteError(f"{what}: graph output {out!r} would become {value!r}, which is a graph "
                                   f"{'input' if value in graph.inputs else 'output'} already")
            producer = next(n for n in graph.nodes if value in n.outputs)
            _rename_value(producer, value, out, graph.nodes, graph)
        else:
            _replace_inputs(graph.nodes, out, value)
            _replace_inputs(kept, out, value)
            del graph.types[out]
    # outputs nothing replaced (a replacement for fewer outputs than the node has)
    for out in node.outputs[len(results):]:
        graph.types.pop(out, None)
    graph.nodes[position:position] = kept
    # the node now computing the replaced node's first output takes its name too, so
    # names users know (explain, why_not, reports) survive a rewrite
    heir = next((n for n in kept if node.outputs and node.outputs[0] in n.outputs), None)
    if heir is not None and all(n.name != node.name for n in graph.nodes):
        heir.name = node.name
    return kept


def _rename_value(producer: Node, old: str, new: str, readers, graph: Graph) -> None:
    producer.outputs = [new if v == old else v for v in producer.outputs]
    _replace_inputs(readers, old, new)
    del graph.types[old]


def _replace_inputs(nodes, old: str, new: str) -> None:
    for n in nodes:
        if old in n.inputs:
            n.inputs = [new if v == old else v for v in n.inputs]
