"""The record of a rewrite run: what fired, where, how often, and the budget.

Every firing (a rewrite rule or a decomposition) goes through :meth:`Recorder.fire`.
Rewrite applications count against the budget; decompositions do not (the checker
proves they cannot reopen themselves, and a loop through a decomposition and a rewrite
still spends the budget on its rewrite half). A run past its budget stops with
:class:`~fusionlang.engine.rewrite_stop.BudgetSpent`, whose ``stop`` names the budget and
the rules that kept firing — the usual sign of a rule set that loops.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass

from fusionlang.engine.rewrite_stop import BudgetSpent, Stop, StopReason
from fusionlang.lang.diagnostics import Span
from fusionlang.lang.limits import MAX_EXPANSION_NODES


@dataclass(frozen=True)
class TraceEntry:
    step: int
    #: "decompose" | "simplify"
    pass_name: str
    rule: str
    #: where the rule is written: "simplify.fuse:14"
    where: str
    #: the node it replaced
    node: str
    #: the rewrite's priority: its phase (decompositions: 0)
    priority: int = 0
    #: the nodes its pattern matched (the node first), which the firing replaced or removed
    covered: tuple[str, ...] = ()

    def __str__(self) -> str:
        phase = f" priority {self.priority}" if self.priority else ""
        return f"{self.step:>5} {self.pass_name:<9} {self.rule}{phase} ({self.where}) at {self.node}"


def decomposition_node_budget(graph) -> int:
    """Nodes decompositions may build in one run on ``graph``: the expansion limit of one
    op, or 100 per node of the graph for big graphs (real decompositions build far fewer)."""
    return max(MAX_EXPANSION_NODES, 100 * len(graph.nodes))


class Recorder:
    #: how many of the latest firings a budget error summarizes
    WINDOW = 200

    def __init__(self, budget: int, node_budget: int | None = None):
        self.budget = budget
        self.spent = 0
        #: nodes decompositions may build in this run (None: no limit); the checker
        #: bounds each op's expansion, this bounds the run
        self.node_budget = node_budget
        self.nodes_built = 0
        self.fired: Counter[str] = Counter()
        self.trace: list[TraceEntry] = []
        self._recent: deque[str] = deque(maxlen=self.WINDOW)

    def fire(self, rule: str, where: str, node: str, pass_name: str, *, counted: bool = True,
             priority: int = 0, covered: tuple[str, ...] = ()) -> None:
        if counted:
            if self.spent >= self.budget:
                recent = tuple(Counter(self._recent).most_common())
                names = ", ".join(f"{name!r} x{count}" for name, count in recent[:6])
                raise BudgetSpent(Stop(
                    StopReason.REWRITE_BUDGET, limit=self.budget, rules=recent, rule=f"{rule} ({where})",
                    message=f"rewriting stopped: the budget of {self.budget} rewrite applications is spent; "
                            f"rules that kept firing (last {len(self._recent)} steps): {names}"))
            self.spent += 1
        self.fired[rule] += 1
        self._recent.append(rule)
        self.trace.append(TraceEntry(len(self.trace) + 1, pass_name, rule, where, node, priority, covered))

    def built(self, nodes: int, where: Span | str, what: str) -> None:
        """Count ``nodes`` a decomposition built; past the node budget, BudgetSpent at
        ``where`` (the decomposition that passed it)."""
        self.nodes_built += nodes
        if self.node_budget is not None and self.nodes_built > self.node_budget:
            raise BudgetSpent(Stop(
                StopReason.NODE_BUDGET, limit=self.node_budget, rule=str(where),
                message=f"{where}: decomposing stopped: {what} passes the budget of {self.node_budget} "
                        "nodes that decompositions may build in one run"))
