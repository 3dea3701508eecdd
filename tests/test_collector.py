"""The public entry points pause Python's cyclic collector while they work and always
switch it back on; a caller that switched it off keeps it off."""

from __future__ import annotations

import gc

import pytest

import fusionlang
from fusionlang.collector import paused
from fusionlang.errors import RuleError
from fusionlang.ops import GraphBuilder


def _graph():
    b = GraphBuilder("g")
    b.output(b.relu(b.input("x", (2, 3))))
    return b.build()


def test_the_collector_is_off_during_a_call_and_on_after_it():
    seen = []
    paused(lambda: seen.append(gc.isenabled()))()
    assert seen == [False] and gc.isenabled()


def test_a_failing_call_switches_the_collector_back_on():
    with pytest.raises(RuleError):
        fusionlang.load_rules("no-such-rule-set")
    assert gc.isenabled()


def test_a_caller_that_switched_it_off_keeps_it_off():
    gc.disable()
    try:
        plan = fusionlang.fuse(_graph(), "apollo")
        fusionlang.compile(plan, "c")
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_cycles_made_during_a_call_are_collected_after_it():
    class Node:
        pass

    def make_cycle():
        a, b = Node(), Node()
        a.other, b.other = b, a

    gc.collect()
    paused(make_cycle)()
    assert gc.collect() >= 2  # the pair was garbage, not kept
