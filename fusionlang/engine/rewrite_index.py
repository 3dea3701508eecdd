"""GraphIndex: use-def maps kept up to date while a pass edits the graph.

A rewrite touches a handful of nodes, so its cost must not grow with the graph: the
index keeps producers, consumers, node names and taken value names current edit by
edit, removes dead nodes locally, and records where new nodes go. The node list itself
is rebuilt once, by :meth:`finalize`, at the end of a pass (a replaced node's
replacements take its place, so the order stays topological). It starts from copies of
the graph's own cached index (``Graph.index``) and drops that cache on every edit, so
nothing reads the graph's maps stale while a pass is under way.
"""

from __future__ import annotations

import itertools

from fusionlang.ir.graph import Graph, Node


class GraphIndex:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.base: list[Node] = list(graph.nodes)
        self.producers: dict[str, Node] = graph.producers()
        self.consumers: dict[str, list[Node]] = graph.consumers()
        self.by_name: dict[str, Node] = dict(graph.index.by_name)
        self.outputs = set(graph.outputs)
        self._taken = set(graph.types) | set(self.by_name)
        self._counter = itertools.count()
        self._removed: set[int] = set()
        self._inserted: dict[int, list[Node]] = {}

    # ----- names ----------------------------------------------------------------------
    def fresh_name(self, stem: str) -> str:
        """A node/value name unused in the graph (what Graph.fresh_name gives, in O(1))."""
        while True:
            candidate = f"{stem}_{next(self._counter)}"
            if candidate not in self._taken and candidate not in self.graph.types:
                self._taken.add(candidate)
                return candidate

    # ----- edits ----------------------------------------------------------------------
    def add(self, node: Node) -> None:
        self.graph.invalidate()
        for out in node.outputs:
            self.producers[out] = node
        for value in dict.fromkeys(node.present_inputs()):
            self.consumers.setdefault(value, []).append(node)
        self.by_name[node.name] = node
        self._taken.add(node.name)

    def remove(self, node: Node) -> None:
        self.graph.invalidate()
        for out in node.outputs:
            if self.producers.get(out) is node:
                del self.producers[out]
        for value in dict.fromkeys(node.present_inputs()):
            users = self.consumers.get(value)
            if users is not None:
                users[:] = [u for u in users if u is not node]
                if not users:
                    del self.consumers[value]
        if self.by_name.get(node.name) is node:
            del self.by_name[node.name]
        self._removed.add(id(node))

    def insert_at(self, old: Node, new_nodes: list[Node]) -> None:
        """``new_nodes`` take ``old``'s place in the node order."""
        self._inserted[id(old)] = list(new_nodes)

    def rename_node(self, node: Node, name: str) -> None:
        self.graph.invalidate()
        if self.by_name.get(node.name) is node:
            del self.by_name[node.name]
        node.name = name
        self.by_name[name] = node
        self._taken.add(name)

    def replace_uses(self, old: str, new: str) -> None:
        """Every node reading ``old`` reads ``new`` instead."""
        self.graph.invalidate()
        for user in self.consumers.pop(old, []):
            user.inputs = [new if v == old else v for v in user.inputs]
            users = self.consumers.setdefault(new, [])
            if not any(u is user for u in users):
                users.append(user)

    def rename_output(self, node: Node, old: str, new: str) -> None:
        """``node``'s output ``old`` is called ``new`` (readers follow)."""
        self.graph.invalidate()
        node.outputs = [new if v == old else v for v in node.outputs]
        if self.producers.get(old) is node:
            del self.producers[old]
        self.producers[new] = node
        self.replace_uses(old, new)
        self._taken.add(new)

    def remove_dead(self, candidates) -> int:
        """Remove candidates (and then their producers) that nothing reads any more."""
        removed = 0
        stack: list[Node] = list(candidates)
        while stack:
            node = stack.pop()
            if id(node) in self._removed or self.producers.get(node.outputs[0]) is not node:
                continue
            if any(out in self.outputs or self.consumers.get(out) for out in node.outputs):
                continue
            inputs = node.present_inputs()
            self.remove(node)
            for out in node.outputs:
                self.graph.types.pop(out, None)
            removed += 1
            stack.extend(self.producers[v] for v in inputs if v in self.producers)
        return removed

    def is_removed(self, node: Node) -> bool:
        return id(node) in self._removed

    # ----- end of a pass --------------------------------------------------------------
    def finalize(self) -> None:
        """Rebuild the node list: replacements where the replaced nodes were."""
        if not self._removed and not self._inserted:
            # a copy: nodes a later edit adds to the graph's list must not land in base too
            self.graph.nodes = list(self.base)
            return
        order: list[Node] = []
        for root in self.base:
            # replacements (themselves perhaps replaced) come where the node was
            stack = [(root, False)]
            while stack:
                node, expanded = stack.pop()
                if expanded:
                    if id(node) not in self._removed:
                        order.append(node)
                    continue
                stack.append((node, True))
                stack.extend((new, False) for new in reversed(self._inserted.get(id(node), ())))
        self.graph.nodes = order
        self.base = list(order)
        self._removed.clear()
        self._inserted.clear()
