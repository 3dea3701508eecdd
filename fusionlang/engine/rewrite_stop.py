"""Why a rewrite run stopped, as a value (egg's StopReason): the kind, and its data.

A run ends at a fixpoint, or because it spent one of its two budgets (rewrite
applications, nodes built by decompositions), or because a rule built something it
must not. The code that stops the run says which, by raising :class:`BudgetSpent` with
the :class:`Stop`; nobody reads the reason back out of an error message.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from fusionlang.errors import RewriteError


class StopReason(Enum):
    #: nothing more applies
    FIXPOINT = "fixpoint"
    #: the budget of rewrite applications is spent (``Stop.limit``; ``Stop.rules`` kept firing)
    REWRITE_BUDGET = "budget"
    #: decompositions built more nodes than one run may (``Stop.limit``; ``Stop.rule`` passed it)
    NODE_BUDGET = "node budget"
    #: a rule failed (built an ill-typed value, replaced a node by itself...; ``Stop.message``)
    ERROR = "error"


@dataclass(frozen=True)
class Stop:
    reason: StopReason
    #: the budget that was spent (REWRITE_BUDGET, NODE_BUDGET)
    limit: int | None = None
    #: (rule, firings) among the latest steps, most frequent first (REWRITE_BUDGET)
    rules: tuple[tuple[str, int], ...] = ()
    #: the rule where the run stopped, as "name (file:line)" or the file:line it is written at
    rule: str = ""
    #: the error's text (ERROR, and the budgets' own one-line explanation)
    message: str = ""

    def __str__(self) -> str:
        return self.reason.value if not self.message else f"{self.reason.value}: {self.message}"


FIXPOINT = Stop(StopReason.FIXPOINT)


class BudgetSpent(RewriteError):
    """A run stopped by one of its budgets; ``stop`` says which and holds the numbers."""

    def __init__(self, stop: Stop):
        super().__init__(stop.message)
        self.stop = stop
