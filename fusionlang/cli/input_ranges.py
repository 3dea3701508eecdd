"""Which integers a model accepts in an input, read off the graph, for seeded noise.

An integer input that ends up as an index (Gather, GatherElements, GatherND: token ids,
token types, positions) must stay below the size of the axis it indexes; one that the
model casts to bool or float or compares (an attention mask) is a mask of 0 and 1. The
value is followed through ops that only move or relabel elements (reshape, unsqueeze,
slice, integer casts...), so ``ids -> unsqueeze -> gather`` still counts.
"""

from __future__ import annotations

#: ops whose output elements are input elements: an index stays an index through them
_MOVES = {"reshape", "flatten", "squeeze", "unsqueeze", "transpose", "expand", "tile", "slice", "concat", "split",
          "identity", "pad"}
#: ops that read an integer input as a truth value (with cast to bool or float: a mask)
_MASK_READERS = {"equal", "not", "and", "or", "xor", "where", "less", "greater", "less_equal", "greater_equal"}
#: op -> position of its index input
_INDEXED = {"gather": 1, "gather_elements": 1, "gather_nd": 1}


def integer_range(graph, name: str) -> tuple[int, int]:
    """[low, high) for seeded integers of graph input ``name`` (by default [0, 4))."""
    consumers = graph.consumers()
    bound, mask = None, False
    frontier, seen = [name], {name}
    while frontier:
        value = frontier.pop()
        for node in consumers.get(value, []):
            if node.op in _INDEXED and node.inputs[_INDEXED[node.op]] == value:
                size = _indexed_size(graph, node)
                bound = size if bound is None else min(bound, size)
            elif node.op in _MASK_READERS or node.op == "cast" and not _is_integer(node.attrs["to"]):
                mask = True
            elif node.op in _MOVES or node.op == "cast":
                for out in node.outputs:
                    if out and out not in seen:
                        seen.add(out)
                        frontier.append(out)
    high = 2 if mask else 4
    if bound is not None:
        high = min(high, bound) if mask else bound
    return 0, max(high, 1)


def _is_integer(dtype: str) -> bool:
    return dtype.startswith(("int", "uint"))


def _indexed_size(graph, node) -> int:
    """The size of the axis (the smallest of the axes, for GatherND) ``node``'s index picks on."""
    data = graph.types[node.inputs[0]]
    if node.op == "gather_nd":
        tuples = graph.types[node.inputs[1]].shape[-1]
        b = node.attrs["batch_dims"]
        return min(data.shape[b:b + tuples])
    return data.shape[node.attrs["axis"] % data.rank]
