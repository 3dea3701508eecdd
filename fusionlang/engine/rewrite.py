"""The rewriter: apply a rule set to a graph until nothing more applies.

``apply_rules`` copies the graph, then runs: constant folding, simplification (the
rule set's rewrites, by priority, on a worklist until a fixpoint), decomposition of
compound ops (then folding and simplification again over the opened ops), and cleanup
(common subexpressions, dead code). Every firing is counted against a budget, traced,
and stamped on the nodes it creates as provenance ("rule fold_conv_bn
(simplify.fuse:14)"). The argument graph is never modified. The result says why the run
stopped as a value (:class:`~fusionlang.engine.rewrite_stop.Stop`).
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field

from fusionlang.errors import RewriteError
from fusionlang.instrument import timed
from fusionlang.stages import REWRITE
from fusionlang.ir.graph import Graph, Node
from fusionlang.lang import load_rules
from fusionlang.lang.instantiate import InstantiateError, Instantiator, Scalar
from fusionlang.lang.patterns import POp
from fusionlang.lang.ruleset import RuleSet
from fusionlang.engine.match import Match, Matcher
from fusionlang.engine.passes import common_subexpressions, dead_code, decompose_pass, fold_pass
from fusionlang.engine.rewrite_index import GraphIndex
from fusionlang.engine.rewrite_stop import FIXPOINT, BudgetSpent, Stop, StopReason
from fusionlang.engine.rewrite_surgery import applicable, splice
from fusionlang.engine.rewrite_trace import Recorder, TraceEntry, decomposition_node_budget
# re-exported: the rewriter's documented companion (why a rule does not fire here);
# whynot.py imports the matcher and surgery, never this module
from fusionlang.engine.whynot import why_not


@dataclass
class RewriteResult:
    graph: Graph
    fired: Counter = field(default_factory=Counter)
    trace: list[TraceEntry] = field(default_factory=list)
    #: why the run stopped, with its data (a RewriteError's ``result`` holds the others)
    stop: Stop = FIXPOINT

    @property
    def stop_reason(self) -> str:
        """The stop reason's name: "fixpoint", "budget", "node budget" or "error"."""
        return self.stop.reason.value

    def summary(self) -> str:
        if not self.fired:
            return "no rule fired"
        return ", ".join(f"{name} x{count}" for name, count in self.fired.most_common())


def apply_rules(graph: Graph, ruleset, *, decompose: bool = True, simplify: bool = True, fold: bool = True,
                budget: int = 10_000) -> RewriteResult:
    """Rewrite a copy of ``graph`` with ``ruleset`` (a RuleSet or a name for load_rules).

    At most ``max(budget, 2 * len(graph.nodes))`` rewrite applications are made (big
    graphs legitimately need many); past that, RewriteError names the rules that kept
    firing. A rule that builds something ill-typed is a RewriteError too. The error's
    ``result`` holds the graph as far as it got and the Stop that ended the run.
    """
    if not isinstance(ruleset, RuleSet):
        ruleset = load_rules(ruleset)
    work = graph.copy()
    work.registry = ruleset.registry  # the rewritten graph may hold the rule set's own `def` ops
    recorder = Recorder(max(budget, 2 * len(graph.nodes)), node_budget=decomposition_node_budget(graph))
    try:
        _run(work, ruleset, recorder, decompose=decompose, simplify=simplify, fold=fold)
    except BudgetSpent as exc:
        exc.result = RewriteResult(work, recorder.fired, recorder.trace, exc.stop)
        raise
    except RewriteError as exc:
        exc.result = RewriteResult(work, recorder.fired, recorder.trace, Stop(StopReason.ERROR, message=str(exc)))
        raise
    return RewriteResult(work, recorder.fired, recorder.trace, FIXPOINT)


def _run(graph: Graph, ruleset: RuleSet, recorder: Recorder, *, decompose: bool, simplify: bool, fold: bool):
    def round_():
        if fold:
            with timed(REWRITE, "fold constants"):
                fold_pass(graph, ruleset)
        if simplify:
            with timed(REWRITE, "simplify"):
                simplify_pass(graph, ruleset, recorder)

    def decomposed() -> int:
        """How many nodes were opened (0: none left to open)."""
        with timed(REWRITE, "decompose"):
            return decompose_pass(graph, ruleset, recorder)

    round_()
    if decompose:
        while decomposed():
            round_()
    with timed(REWRITE, "common subexpressions"):
        shared = common_subexpressions(graph)
    if shared and simplify:
        with timed(REWRITE, "dead code"):
            dead_code(graph)
        with timed(REWRITE, "simplify"):
            simplify_pass(graph, ruleset, recorder)
    with timed(REWRITE, "dead code"):
        dead_code(graph)


def _depth(p) -> int:
    if isinstance(p, POp):
        return 1 + max((_depth(o) for o in p.operands), default=0)
    return 0


def simplify_pass(graph: Graph, ruleset: RuleSet, recorder: Recorder) -> int:
    """Apply rewrites until none matches. Priorities are phases: the rules of the highest
    priority reach a fixpoint on the whole graph first, then those of the next priority join
    them, and so on, so a rule of priority 10 sees every node before a rule of priority 0
    fires anywhere (an author's recognizer runs before a standard cleanup that would take
    its pattern apart). Within a phase, rules are tried per node in priority order (file
    order among equals); nodes come from a worklist seeded in graph order and fed with the
    neighbourhood of every change, then a full sweep confirms the fixpoint. Edits go
    through a GraphIndex, so one firing costs the same in any graph size."""
    if not ruleset.rewrites:
        return 0
    reach = max(_depth(r.compiled) for r in ruleset.rewrites)
    index = GraphIndex(graph)
    matcher = Matcher(graph, ruleset, index=index)
    fired = 0
    for level in sorted({r.priority for r in ruleset.rewrites}, reverse=True):
        by_op: dict[str, list] = defaultdict(list)
        for rule in ruleset.rewrites:  # already in priority order
            if rule.priority >= level:
                by_op[rule.root_op].append(rule)
        fired += _fixpoint(graph, index, matcher, ruleset, recorder, by_op, reach)
    return fired


def _fixpoint(graph: Graph, index: GraphIndex, matcher: Matcher, ruleset: RuleSet, recorder: Recorder,
              by_op: dict[str, list], reach: int) -> int:
    """Fire the rules of ``by_op`` (root op -> rules in priority order) until none matches."""
    work: deque[str] = deque()
    queued: set[str] = set()

    def push(names):
        for name in names:
            if name not in queued:
                queued.add(name)
                work.append(name)

    push(n.name for n in graph.nodes)
    fired = 0
    while True:
        while work:
            name = work.popleft()
            queued.discard(name)
            node = index.by_name.get(name)
            if node is None:
                continue
            for rule in by_op.get(node.op, ()):
                found = matcher.match(rule, node)
                if found is None or not applicable(graph, found):
                    continue
                touched = _neighbourhood_before(found)
                apply_match(index, ruleset, found, recorder)
                push(_neighbourhood_after(index, touched, reach))
                fired += 1
                break
        index.finalize()
        pending = [n.name for n in graph.nodes
                   if any((m := matcher.match(r, n)) is not None and applicable(graph, m) for r in by_op.get(n.op, ()))]
        if not pending:
            return fired
        push(pending)


def _neighbourhood_before(match: Match) -> tuple[str, set[str]]:
    """What a firing may change: the root's output (its new producer and its users),
    and the inputs of the matched nodes (which lose users, so may become one-use)."""
    inputs = set()
    for node in match.nodes:
        inputs.update(node.present_inputs())
    return match.root.outputs[0], inputs


def _neighbourhood_after(index: GraphIndex, touched: tuple[str, set[str]], reach: int) -> list[str]:
    """Nodes whose matches a firing may have changed: up to ``reach`` levels of users of
    the replaced value, and the sole remaining user of a value that lost users (a rule
    rooted there, or up to ``reach`` levels above, may now pass a one-use check)."""
    root_value, inputs = touched
    starts = [root_value] + [v for v in inputs if len(index.consumers.get(v, ())) == 1]
    names: list[str] = []
    producer = index.producers.get(root_value)
    if producer is not None:
        names.append(producer.name)
    frontier = set(starts)
    for _ in range(reach + 1):
        nxt = set()
        for value in frontier:
            for user in index.consumers.get(value, ()):
                names.append(user.name)
                nxt.update(user.outputs)
        frontier = nxt
    return names


def apply_match(index: GraphIndex, ruleset: RuleSet, match: Match, recorder: Recorder) -> list[Node]:
    """Replace the match's root by the rule's replacement; returns the nodes created."""
    graph = index.graph
    rule, root = match.rule, match.root
    recorder.fire(rule.name, rule.where, root.name, "simplify", priority=rule.priority,
                  covered=tuple(n.name for n in match.nodes))
    provenance = tuple(dict.fromkeys(p for node in match.nodes for p in node.provenance))
    provenance += (f"rule {rule.name} ({rule.where})",)
    inst = Instantiator(graph, ruleset.registry, match.bindings.copy(), provenance=provenance,
                        namer=index.fresh_name)
    out_type = graph.types[root.outputs[0]]
    try:
        value = inst.value(rule.replacement)
        if isinstance(value, Scalar):
            value = inst.materialize(value, out_type.dtype, out_type.shape)
    except InstantiateError as exc:
        raise RewriteError(f"{exc.span or rule.span}: rewrite {rule.name!r} at node {root.name!r}: {exc.message}") \
            from None
    created = splice(index, root, [value], inst.created, ruleset.registry,
                     what=f"{rule.where}: rewrite {rule.name!r}", new_constants=inst.new_constants)
    # matched nodes below the root, and what fed the root, may be dead now
    dead = [n for n in match.nodes[1:]] + [index.producers[v] for v in root.present_inputs() if v in index.producers]
    index.remove_dead(dead)
    return created
