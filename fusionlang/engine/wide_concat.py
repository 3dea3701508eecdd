"""A concat of more inputs than one kernel may take becomes a tree of narrower concats.

The strategies bound a kernel's arguments (``max_args``) when they merge groups, but a
single node is a group whatever it reads: a concat of 5,000 values was one kernel with
5,001 pointers, one isl problem of 5,000 statements (one per input, see ops/concat.py)
and one C function that gcc -O3 took 243 s to compile at 1,000 inputs (its alias analysis
of ``restrict`` pointers grows with their square; 95 pointers take 0.4 s). Concat is
associative along its axis, so concat(x0..xN) = concat(concat(x0..xK), concat(...), ...)
holds bit for bit, and each concat of the tree reads at most ``fan_in`` values. The
backend lays every level end to end in the next where it can (backend/concat_inplace.py),
so the tree adds no copy there.

A split into more outputs than a kernel may write is the mirror image, and gets the same
treatment (:func:`split_wide_splits`): split(x) into y0..yN is split(x) into parts, each
split again into its outputs (a Split into 1,000 outputs was one kernel with 1,001
pointers that did not compile in minutes).

Each split is a recorded decision: the nodes of the tree carry it in their provenance and
their groups in ``Group.rules`` (see :func:`concat_split_notes`).
"""

from __future__ import annotations

import itertools

from fusionlang.ir.graph import Graph, Node
from fusionlang.ir.types import TensorType

#: the most inputs of one concat whatever ``max_args`` allows: it bounds the statements of
#: one isl problem and the pointers of one C function (256 pointers: gcc takes 2.1 s)
WIDEST_CONCAT = 128

#: the provenance entry that marks a node of a split concat's (or split's) tree
SPLIT_MARK = "split: concat of "
WIDE_SPLIT_MARK = "split: split into "


def concat_fan_in(options: dict) -> int:
    """The most inputs one concat may read under a strategy's ``options``: one argument of
    ``max_args`` is the output; never more than :data:`WIDEST_CONCAT`, never fewer than 2."""
    max_args = options.get("max_args", WIDEST_CONCAT + 1)
    return max(2, min(max_args - 1, WIDEST_CONCAT))


def split_wide_concats(graph: Graph, fan_in: int) -> Graph:
    """``graph`` itself when no concat reads more than ``fan_in`` values, else a copy in
    which each such concat is a tree of concats of at most ``fan_in`` inputs (the root
    keeps the node's name and output)."""
    return _with_trees(graph, lambda node: node.op == "concat" and len(node.inputs) > fan_in,
                       lambda g, node, taken: _tree(g, node, fan_in, taken), before=True)


def _with_trees(graph: Graph, wide, tree, *, before: bool) -> Graph:
    """``graph``, or a copy with each node ``wide`` says is too wide replaced by ``tree``'s
    nodes (put ``before`` the narrowed node when they feed it, after it when it feeds them)."""
    if not any(wide(node) for node in graph.nodes):
        return graph
    copy = graph.copy()
    taken = set(copy.types) | {node.name for node in copy.nodes}
    nodes: list[Node] = []
    for node in copy.nodes:
        parts = tree(copy, node, taken) if wide(node) else []
        nodes.extend([*parts, node] if before else [node, *parts])
    copy.nodes = nodes
    return copy


def _tree(graph: Graph, root: Node, fan_in: int, taken: set[str]) -> list[Node]:
    """The part concats below ``root``, in a topological order; ``root`` is narrowed in
    place to read the top level of the tree."""
    note = (f"{SPLIT_MARK}{len(root.inputs)} inputs into a tree of concats of at most {fan_in} inputs "
            f"(max_args - 1, at most {WIDEST_CONCAT})")
    axis = root.attrs["axis"] % graph.types[root.outputs[0]].rank
    parts: list[Node] = []
    names = _Names(taken)
    level = list(root.inputs)
    while len(level) > fan_in:
        chunks = [level[k:k + fan_in] for k in range(0, len(level), fan_in)]
        level = [chunk[0] if len(chunk) == 1 else _part(graph, root, chunk, axis, note, names, parts)
                 for chunk in chunks]
    root.inputs = level
    root.provenance = (*root.provenance, note)
    graph.invalidate()
    return parts


def _part(graph: Graph, root: Node, chunk: list[str], axis: int, note: str, names: "_Names",
          parts: list[Node]) -> str:
    """Add the concat of ``chunk`` to ``graph`` (appended to ``parts``); returns its output."""
    name, value = names.fresh(root.name, root.outputs[0])
    first = graph.types[chunk[0]]
    shape = list(first.shape)
    shape[axis] = sum(graph.types[v].shape[axis] for v in chunk)
    node = Node(name, "concat", list(chunk), [value], dict(root.attrs), (*root.provenance, note))
    graph.types[value] = TensorType(tuple(shape), first.dtype)
    parts.append(node)
    return value


class _Names:
    """Fresh names ``<node>_part<k>`` and ``<value>_part<k>`` for the parts of one concat: a
    set lookup per name, not a scan of the graph's names (Graph.fresh_name) per part."""

    def __init__(self, taken: set[str]):
        self.taken = taken
        self.counter = itertools.count()

    def fresh(self, node: str, value: str) -> tuple[str, str]:
        while True:
            k = next(self.counter)
            names = f"{node}_part{k}", f"{value}_part{k}"
            if names[0] not in self.taken and names[1] not in self.taken:
                self.taken.update(names)
                return names


def split_wide_splits(graph: Graph, fan_out: int) -> Graph:
    """``graph`` itself when no split writes more than ``fan_out`` values, else a copy in
    which each such split is a tree of splits of at most ``fan_out`` outputs (the root
    keeps the node's name and input; each original output keeps its name)."""
    return _with_trees(graph, lambda node: node.op == "split" and len(node.outputs) > fan_out,
                       lambda g, node, taken: _split_tree(g, node, fan_out, taken), before=False)


def _split_tree(graph: Graph, root: Node, fan_out: int, taken: set[str]) -> list[Node]:
    """The part splits below ``root``, in a topological order; ``root`` is narrowed in
    place to write the top level of the tree."""
    note = (f"{WIDE_SPLIT_MARK}{len(root.outputs)} outputs as a tree of splits of at most {fan_out} outputs "
            f"(max_args - 1, at most {WIDEST_CONCAT})")
    x = graph.types[root.inputs[0]]
    axis = root.attrs["axis"] % x.rank
    names = _Names(taken)
    levels: list[list[Node]] = []  # the deepest level first
    level = list(zip(root.outputs, root.attrs["split"]))
    while len(level) > fan_out:
        made: list[Node] = []
        chunks = [level[k:k + fan_out] for k in range(0, len(level), fan_out)]
        level = [chunk[0] if len(chunk) == 1 else _split_part(graph, root, chunk, x, axis, note, names, made)
                 for chunk in chunks]
        levels.append(made)
    root.outputs = [value for value, _ in level]
    root.attrs = {**root.attrs, "split": [size for _, size in level]}
    root.provenance = (*root.provenance, note)
    graph.invalidate()
    # each level reads what the level above writes: the top level first
    return [node for made in reversed(levels) for node in made]


def _split_part(graph: Graph, root: Node, chunk: list[tuple[str, int]], x: TensorType, axis: int, note: str,
                names: "_Names", made: list[Node]) -> tuple[str, int]:
    """Add the split of a new value into ``chunk``'s outputs (appended to ``made``); returns
    (the new value, its size along ``axis``), which the level above writes."""
    name, value = names.fresh(root.name, root.inputs[0])
    size = sum(n for _, n in chunk)
    shape = list(x.shape)
    shape[axis] = size
    graph.types[value] = TensorType(tuple(shape), x.dtype)
    attrs = {**root.attrs, "split": [n for _, n in chunk]}
    made.append(Node(name, "split", [value], [v for v, _ in chunk], attrs, (*root.provenance, note)))
    return value, size


def concat_split_notes(graph: Graph, members: list[str]) -> list[str]:
    """The split decisions recorded on the nodes ``members`` (a group's), each once."""
    by_name = graph.index.by_name
    notes = [entry for name in members for entry in by_name[name].provenance
             if entry.startswith((SPLIT_MARK, WIDE_SPLIT_MARK))]
    return list(dict.fromkeys(notes))


__all__ = ["WIDEST_CONCAT", "concat_fan_in", "concat_split_notes", "split_wide_concats", "split_wide_splits"]
