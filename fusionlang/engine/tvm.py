"""TVM Relax FuseOps, driven by a rule file (rules/tvm.fuse).

This mirrors src/relax/analysis/graph_partitioner.cc (TVM 0.27): a post-dominator tree
whose nodes carry the combined pattern of the edges on the way to their dominator; then
RunFuse in three phases over nodes in topological order, fusing a node with everything
on every path to its immediate post-dominator when a condition holds on each op along
the paths. Groups are TVM's union-find groups: a group's pattern changes only when a
group holding an "anchor" (an op of the rule set's anchor category, TVM's
kOutEWiseFusable) merges into it.

What TVM hard-codes as branches of RunFuse is read from the rule set's fuse entries:
``fuse GROUP -> RELATION : RESULT [phase=N, path=CAT, sink=CAT]`` fires for a node whose
group pattern is in GROUP when its relation to its post-dominator is in RELATION, during
phase N (every phase 0-1 when absent), if every op after it on every path has a pattern
<= ``path`` and the post-dominator's group a pattern <= ``sink`` (default ``path``). The
first matching entry decides, as TVM's if/else chain does.

Relax passes the operands of ops such as concat through a Tuple node (pattern kTuple);
ops named by the strategy option ``tuple_inputs`` get such a virtual tuple node here, so
the relation of a producer to them is ``tuple``, as in TVM. Phase 2 fuses injective ops
into such tuples when the tuple was itself fused into an injective consumer.
"""

from __future__ import annotations

from typing import cast

from fusionlang.engine.decisions import MergeDecision, Verdict
from fusionlang.engine.grouping import Grouping
from fusionlang.engine.policy import describe_entry, node_categories
from fusionlang.errors import FuseError
from fusionlang.ir.graph import Graph
from fusionlang.lang.ruleset import SPECIAL_FLAGS

DEFAULTS = {"max_depth": 256, "tuple_inputs": "concat", "anchor": "out_ewise_fusable"}


class _Rule:
    def __init__(self, entry, rank):
        self.producers = {rank(c) for c in entry.producers}
        self.relations = {rank(c) for c in entry.consumers}
        phase = entry.options.get("phase")
        self.phase = None if phase in (None, "any") else int(phase)
        if "path" not in entry.options:
            raise FuseError(f"{entry.span}: tvm fuse entries need a path=CATEGORY option")
        self.path = rank(str(entry.options["path"]))
        self.sink = rank(str(entry.options.get("sink", entry.options["path"])))
        self.why = describe_entry(entry)
        self.entry = entry

    def fires(self, group_pattern: int, relation: int, phase: int) -> bool:
        phase_ok = phase in (0, 1) if self.phase is None else phase == self.phase
        return phase_ok and group_pattern in self.producers and relation in self.relations


class _IndexedGraph:
    """TVM's IndexedForwardGraph: nodes in topological order with consumer edges.

    An edge carries the consumer's pattern, except that an operand of a broadcast op
    that already has the output's shape is an elemwise edge, and edges into a tuple are
    injective (IndexedForwardGraph::Creator in TVM).
    """

    def __init__(self, graph: Graph, kind: dict[str, int], tuple_ops: set[str], ranks: dict[str, int]):
        self.names: list[str | None] = []  # None for a virtual tuple node
        self.pattern: list[int] = []
        self.outputs: list[list[tuple[int, int]]] = []
        self.extern: list[bool] = []
        index: dict[str, int] = {}
        producers = {out: n.name for n in graph.nodes for out in n.outputs}
        graph_outputs = set(graph.outputs)
        for node in graph.nodes:
            out_shape = graph.types[node.outputs[0]].shape
            sources = []
            for value in node.present_inputs():
                if value in producers:
                    edge = kind[node.name]
                    if edge == ranks["broadcast"] and graph.types[value].shape == out_shape:
                        edge = ranks["elemwise"]
                    sources.append((index[producers[value]], edge))
            if node.op in tuple_ops:
                tup = self._add(None, ranks["tuple"], False)
                for s, _ in sources:
                    self.outputs[s].append((tup, ranks["injective"]))
                sources = [(tup, kind[node.name])]
            me = self._add(node.name, kind[node.name], any(v in graph_outputs for v in node.outputs))
            index[node.name] = me
            for s, edge in sources:
                self.outputs[s].append((me, edge))

    def _add(self, name, pattern, extern) -> int:
        self.names.append(name)
        self.pattern.append(pattern)
        self.outputs.append([])
        self.extern.append(extern)
        return len(self.names) - 1


class _PostDomTree:
    """DominatorTree::PostDom: parents, depths and combined edge patterns."""

    def __init__(self, g: _IndexedGraph, opaque: int):
        n = len(g.names)
        self.parent: list[int | None] = [None] * n
        self.depth = [1] * n
        self.pattern = [opaque] * n
        for i in reversed(range(n)):
            if g.extern[i] or not g.outputs[i]:
                continue
            pattern = 0
            parent = None
            for k, (node, edge_pattern) in enumerate(g.outputs[i]):
                if k == 0:
                    parent = node
                else:
                    parent, pattern = self._lca(parent, node, pattern)
                pattern = max(pattern, edge_pattern)
            self.parent[i] = parent
            self.pattern[i] = pattern
            self.depth[i] = self.depth[parent] + 1 if parent is not None else 1

    def _lca(self, lhs, rhs, pattern):
        while lhs != rhs:
            if lhs is None or rhs is None:
                return None, pattern
            if self.depth[lhs] < self.depth[rhs]:
                pattern = max(pattern, self.pattern[rhs])
                rhs = self.parent[rhs]
            elif self.depth[rhs] < self.depth[lhs]:
                pattern = max(pattern, self.pattern[lhs])
                lhs = self.parent[lhs]
            else:
                pattern = max(pattern, self.pattern[lhs], self.pattern[rhs])
                lhs, rhs = self.parent[lhs], self.parent[rhs]
        return lhs, pattern


class _Partitioner:
    """GraphPartitioner: union-find groups and RunFuse."""

    def __init__(self, g: _IndexedGraph, tree: _PostDomTree, rules: list[_Rule], ranks: dict[str, int],
                 max_depth: int, anchor: int, categories: tuple[str, ...]):
        self.g, self.tree, self.rules, self.max_depth = g, tree, rules, max_depth
        self.injective, self.tuple, self.opaque = ranks["injective"], ranks["tuple"], ranks["opaque"]
        n = len(g.names)
        self.parent: list[int | None] = [None] * n
        self.pattern = list(g.pattern)
        self.anchor = [p == anchor for p in g.pattern]
        self.num_nodes = [1] * n
        self.why: dict[int, list[str]] = {}
        self.visited: set[int] = set()
        self.categories = categories
        #: (node, post-dominator, verdict, rule or None) per weighed fusion, in order
        self.weighed: list[tuple[int, int, Verdict, _Rule | None]] = []

    def find(self, i: int) -> int:
        root = i
        while (up := self.parent[root]) is not None:
            root = up
        while (up := self.parent[i]) is not None and up != root:
            self.parent[i], i = root, up
        return root

    def check_path(self, src: int, sink: int, fcond) -> bool:
        self.visited = set()
        return all(self._check(node, sink, fcond) for node, _ in self.g.outputs[src])

    def _check(self, src: int, sink: int, fcond) -> bool:
        if src in self.visited:
            return True
        self.visited.add(src)
        if not fcond(self.pattern[self.find(src)], src == sink):
            return False
        if src == sink:
            return True
        return all(self._check(node, sink, fcond) for node, _ in self.g.outputs[src])

    def merge(self, child: int, parent: int) -> None:
        child, parent = self.find(child), self.find(parent)
        if child == parent:
            return
        self.num_nodes[parent] += self.num_nodes[child]
        self.parent[child] = parent
        if self.anchor[child]:
            self.anchor[parent] = True
            self.pattern[parent] = max(self.pattern[child], self.pattern[parent])
        self.why.setdefault(parent, []).extend(r for r in self.why.pop(child, []) if r not in self.why.get(parent, []))

    def commit(self, src: int, sink: int, why: str) -> None:
        target = sink
        self.visited = set()
        self._commit(src, sink, target)
        root = self.find(target)
        if why not in self.why.setdefault(root, []):
            self.why[root].append(why)

    def _commit(self, src: int, sink: int, target: int) -> None:
        if src == sink or src in self.visited:
            return
        self.visited.add(src)
        self.merge(src, target)
        for node, _ in self.g.outputs[src]:
            self._commit(node, sink, target)

    def count_with_child(self, child: int, dom_parent: int) -> int:
        self.visited = set()
        return self.num_nodes[self.find(dom_parent)] + self._count(child, dom_parent)

    def _count(self, src: int, sink: int) -> int:
        if src == sink or src in self.visited:
            return 0
        self.visited.add(src)
        return self.num_nodes[src] + sum(self._count(node, sink) for node, _ in self.g.outputs[src])

    def run(self, phase: int) -> None:
        for nid in range(len(self.g.names)):
            dom = self.tree.parent[nid]
            own = self.pattern[nid]  # TVM reads the node's own group object, not its root
            if own == self.opaque or dom is None:
                continue
            if self.count_with_child(nid, dom) > self.max_depth:
                self.weighed.append((nid, dom, Verdict.MAX_DEPTH, None))
                continue
            if phase == 2:
                self._phase2(nid, dom, own)
                continue
            if self.find(nid) == self.find(dom) or self.pattern[dom] == self.tuple:
                continue
            rule = next((r for r in self.rules if r.fires(own, self.tree.pattern[nid], phase)), None)
            if rule is None:
                self.weighed.append((nid, dom, Verdict.NO_ENTRY, None))
                continue
            if self.check_path(nid, dom, lambda kind, is_sink, r=rule: kind <= (r.sink if is_sink else r.path)):
                self.commit(nid, dom, rule.why)
                self.weighed.append((nid, dom, Verdict.MERGED, rule))
            else:
                self.weighed.append((nid, dom, Verdict.PATH_REFUSED, rule))

    def decisions(self) -> list[MergeDecision]:
        """The weighed fusions as decisions between named nodes (a virtual tuple stands for
        the op it feeds, the next node)."""
        def name(k: int) -> str:
            # (a virtual tuple is named by the node after it, which is real)
            return cast(str, self.g.names[k] if self.g.names[k] is not None else self.g.names[k + 1])

        return [MergeDecision(name(nid), name(dom), verdict, self.categories[self.g.pattern[nid]],
                              self.categories[self.g.pattern[dom]], rule.entry if rule is not None else None,
                              self.max_depth if verdict is Verdict.MAX_DEPTH else None)
                for nid, dom, verdict, rule in self.weighed if self.g.names[nid] is not None]

    def _phase2(self, nid: int, dom: int, own: int) -> None:
        if own > self.injective:
            return
        dom_root = self.find(dom)
        if self.pattern[dom_root] == self.tuple:
            return
        if self.pattern[dom] == self.tuple and self.pattern[dom_root] <= self.injective:
            if self.check_path(nid, dom, lambda kind, is_sink: kind <= self.injective):
                self.commit(nid, dom, "TVM phase 2: injective op fused into a tuple feeding an injective group")


def partition_tvm(graph: Graph, ruleset, options: dict, forbidden: set[tuple[str, str]]) -> Grouping:
    categories = node_categories(graph, ruleset)
    for needed in ("elemwise", "broadcast", "injective", "tuple", "opaque", options["anchor"]):
        if needed not in ruleset.categories:
            raise FuseError(f"strategy tvm needs a category {needed!r} in the rule set's lattice")
    ranks = {c: ruleset.rank(c) for c in ruleset.categories}
    kind = {name: ranks[c] for name, c in categories.items()}
    tuple_ops = {op.strip() for op in str(options["tuple_inputs"]).split(",") if op.strip()}
    g = _IndexedGraph(graph, kind, tuple_ops, ranks)
    tree = _PostDomTree(g, ranks["opaque"])
    rules = [_Rule(e, ruleset.rank) for e in ruleset.fuse_entries if not e.flags & SPECIAL_FLAGS]
    tvm = _Partitioner(g, tree, rules, ranks, options["max_depth"], ranks[options["anchor"]], ruleset.categories)
    if forbidden:
        _forbid(tvm, g, forbidden)
    for phase in range(3):
        tvm.run(phase)
    return _to_grouping(graph, categories, g, tvm, ruleset)


def _forbid(tvm: _Partitioner, g: _IndexedGraph, forbidden) -> None:
    """Backend feedback: a refused edge makes its consumer a fusion barrier (opaque)."""
    index = {name: k for k, name in enumerate(g.names) if name is not None}
    for _, consumer in forbidden:
        if consumer in index:
            tvm.pattern[index[consumer]] = tvm.opaque
            tvm.tree.parent[index[consumer]] = None


def _to_grouping(graph, categories, g: _IndexedGraph, tvm: _Partitioner, ruleset) -> Grouping:
    grouping = Grouping(graph, categories)
    members: dict[int, list[str]] = {}
    for k, name in enumerate(g.names):
        if name is not None:
            members.setdefault(tvm.find(k), []).append(name)
    for root, names in members.items():
        target = grouping.group_of[names[-1]]
        category = ruleset.categories[tvm.pattern[root]]
        for name in names[:-1]:
            target = grouping.merge(grouping.group_of[name], target, category, edge=(name, names[-1]))
        grouping.groups[target].category = category
        grouping.groups[target].rules = list(tvm.why.get(root, []))
    for decision in tvm.decisions():
        grouping.decide(decision)
    return grouping
