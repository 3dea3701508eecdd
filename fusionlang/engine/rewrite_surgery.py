"""Graph surgery: put the values a rule built in place of the node it replaces.

Shared by rewrites and decompositions. New nodes whose inputs are all constants are
folded on the spot through the reference interpreter (``fusionlang.ops.evaluate``), so
a replacement such as ``w * reshape(g / sqrt(var + eps))`` over constant weights leaves a
single new constant. The replaced node's output names survive (consumers and graph
outputs keep reading the same names), and the node computing its first output takes its
name. New nodes take the replaced node's place in the order (see GraphIndex.finalize).
Every edit goes through the GraphIndex, so its cost does not depend on the graph's size.
:func:`applicable` says beforehand whether a match may be spliced in at all (the rewriter
and why_not both ask it).
"""

from __future__ import annotations

from fusionlang.engine.match import Match
from fusionlang.errors import RewriteError
from fusionlang.ir.graph import Graph, Node
from fusionlang.lang import ast as A
from fusionlang.ops.evaluate import fold_node
from fusionlang.ops.registry import OpRegistry
from fusionlang.engine.rewrite_index import GraphIndex


def splice(index: GraphIndex, node: Node, results: list[str], created: list[Node], registry: OpRegistry,
           *, what: str, new_constants: set[str]) -> list[Node]:
    """Replace ``node`` by ``results`` (one value per output of ``node``).

    ``created``: the nodes the rule added (in creation order); ``new_constants``: the
    constants it added. Returns the created nodes that remain (those not folded away).
    """
    graph = index.graph
    kept: list[Node] = []
    new_constants = set(new_constants)
    for new in created:
        if fold_node(graph, new, registry):
            new_constants.update(new.outputs)
        else:
            kept.append(new)
    for out, value in zip(node.outputs, results):
        if graph.types[value] != graph.types[out]:
            raise RewriteError(f"{what}: the replacement of node {node.name!r} ({node.op}) computes "
                               f"{graph.types[value]} for {out!r}, which is {graph.types[out]}")
    if list(results) == list(node.outputs[:len(results)]):
        raise RewriteError(f"{what}: replaces node {node.name!r} by itself")
    twice = next((value for k, value in enumerate(results) if value in results[:k]), None)
    if twice is not None:
        # one graph value cannot carry two of the node's output names
        raise RewriteError(f"{what}: gives {twice!r} for two outputs of node {node.name!r} ({node.op}); "
                           "return identity(...) of it for the second")

    index.remove(node)
    for new in kept:
        index.add(new)
    index.insert_at(node, kept)
    made_here = {out: new for new in kept for out in new.outputs}
    for out, value in zip(node.outputs, results):
        if value in made_here:
            index.rename_output(made_here[value], value, out)
            del graph.types[value]
        elif value in graph.constants and value in new_constants:
            graph.constants[out] = graph.constants.pop(value)
            del graph.types[value]
            index.replace_uses(value, out)
        elif out in index.outputs:
            if value in graph.constants:
                graph.constants[out] = graph.constants[value]
            elif value in graph.inputs or value in index.outputs:
                raise RewriteError(f"{what}: graph output {out!r} would become {value!r}, which is a graph "
                                   f"{'input' if value in graph.inputs else 'output'} already")
            else:
                index.rename_output(index.producers[value], value, out)
                del graph.types[value]
        else:
            index.replace_uses(out, value)
            del graph.types[out]
    for out in node.outputs[len(results):]:
        graph.types.pop(out, None)
    heir = index.producers.get(node.outputs[0]) if node.outputs else None
    if heir is not None and heir is not node and any(heir is n for n in kept) and node.name not in index.by_name:
        index.rename_node(heir, node.name)
    return kept


def applicable(graph: Graph, match: Match) -> bool:
    """False when applying would rename a graph output to a graph input or another
    output (a replacement that is just such a value, for a node computing an output)."""
    replacement = match.rule.replacement
    if not isinstance(replacement, A.Var):
        return True
    value = match.bindings.tensors.get(replacement.name)
    root_out = match.root.outputs[0]
    if value is None or root_out not in graph.outputs:
        return True
    return value not in graph.inputs and value not in graph.outputs
