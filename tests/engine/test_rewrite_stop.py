"""Why a rewrite run stopped is a value with its data (StopReason and Stop), decided
where the run stops, never read back out of an error message."""

from __future__ import annotations

import pytest

from fusionlang.engine.rewrite import apply_rules
from fusionlang.engine.rewrite_stop import BudgetSpent, StopReason
from fusionlang.engine.rewrite_trace import Recorder
from fusionlang.errors import RewriteError
from fusionlang.lang import load_rules, parse_text
from fusionlang.ops import GraphBuilder


def sigmoid_graph():
    b = GraphBuilder()
    b.output(b.sigmoid(b.input("x", (4,)), name="s"))
    return b.build()


def test_a_fixpoint_says_so():
    result = apply_rules(sigmoid_graph(), load_rules("simplify"))
    assert result.stop.reason is StopReason.FIXPOINT and result.stop_reason == "fixpoint"


def test_the_rewrite_budget_stop_carries_the_budget_and_the_rules_that_kept_firing():
    rules = parse_text('import "decompose.fuse"\n'
                       "rewrite fuse_sigmoid: div(1, add(1, exp(neg(x)))) => sigmoid(x)\n", "loop.fuse")
    with pytest.raises(BudgetSpent) as info:
        apply_rules(sigmoid_graph(), rules, budget=50)
    stop = info.value.result.stop
    assert (stop.reason, stop.limit, info.value.result.stop_reason) == (StopReason.REWRITE_BUDGET, 50, "budget")
    assert dict(stop.rules)["fuse_sigmoid"] == info.value.result.fired["fuse_sigmoid"] == 50
    assert stop.message == str(info.value)


def test_a_failing_rule_is_an_error_stop_even_when_its_message_says_budget():
    # the rule's name is in the message: a stop reason read from the text called this "budget"
    rules = parse_text("rewrite over_budget: relu(x) => reduce_sum(x) {axes=[0]}\n", "w.fuse")
    b = GraphBuilder()
    b.output(b.relu(b.input("x", (2, 3)), name="r"))
    with pytest.raises(RewriteError) as info:
        apply_rules(b.build(), rules)
    assert "over_budget" in str(info.value) and not isinstance(info.value, BudgetSpent)
    stop = info.value.result.stop
    assert stop.reason is StopReason.ERROR and stop.message == str(info.value) and stop.limit is None


def test_the_node_budget_stop_names_the_budget_and_the_decomposition():
    recorder = Recorder(budget=10, node_budget=5)
    recorder.built(5, "d.fuse:3:1", "the decomposition of 'gelu'")
    with pytest.raises(BudgetSpent, match=r"^d.fuse:3:1: decomposing stopped: .* budget of 5 nodes") as info:
        recorder.built(1, "d.fuse:3:1", "the decomposition of 'gelu'")
    assert (info.value.stop.reason, info.value.stop.limit, info.value.stop.rule) == \
        (StopReason.NODE_BUDGET, 5, "d.fuse:3:1")
