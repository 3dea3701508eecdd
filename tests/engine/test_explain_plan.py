"""explain(): the class rule that applied, the group's rules, and each refusal's reason."""

import json

import numpy as np
import pytest

import fusionlang
from fusionlang.engine.explain import explain
from fusionlang.errors import FuseError


@pytest.fixture(scope="module")
def rules():
    return fusionlang.load_rules("apollo")


def conv_then_pool():
    b = fusionlang.GraphBuilder("near_miss")
    x = b.input("x", (1, 3, 8, 8))
    w = b.constant(np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32))
    c = b.conv(x, w, pads=(1, 1, 1, 1), name="c")
    scaled = b.div(c, b.constant(np.full((1, 4, 1, 1), 3, np.float32)), name="d")
    p = b.max_pool(b.relu(scaled, name="r"), kernel_shape=(2, 2), strides=(2, 2), name="p")
    b.output(p)
    return b.build()


def test_names_the_guarded_class_that_applied(rules):
    plan = fusionlang.fuse(conv_then_pool(), rules, feedback=False)
    first = explain(plan, rules, "d").lines()[0]
    assert first.startswith("node d (div) is broadcast by std/ops.fuse:")
    assert first.endswith("class div : broadcast when broadcasting")


def test_refusal_names_the_missing_table_entry(rules):
    plan = fusionlang.fuse(conv_then_pool(), rules, feedback=False)
    text = str(explain(plan, rules, "r"))
    assert "formed by apollo.fuse:" in text and "fuse complex -> broadcast|elemwise : complex" in text
    assert "-> p (max_pool, group 1): no fuse entry for complex -> reduce in rules 'apollo'" in text


def test_unknown_node_is_a_clear_error(rules):
    plan = fusionlang.fuse(conv_then_pool(), rules, feedback=False)
    with pytest.raises(FuseError, match=r"no node named 'nope' in the model or its rewritten graph"):
        explain(plan, rules, "nope")


def test_plan_json_keeps_the_group_list(rules):
    plan = fusionlang.fuse(conv_then_pool(), rules, feedback=False)
    data = json.loads(plan.to_json())
    assert isinstance(data["groups"], list) and len(data["groups"]) == len(plan.groups)
    assert {"kernels_before", "kernels_after", "bytes_before", "bytes_after", "rewrite_seconds", "partition_seconds"} <= set(data)


CAPPED_RULES = """\
import "std/ops.fuse"

fuse elemwise -> elemwise : elemwise
fuse complex -> elemwise : complex
fuse elemwise -> complex : complex

strategy apollo { max_ops = 8 }
"""


def conv_chain_conv(chain: int = 10):
    """conv -> `chain` elementwise ops -> conv: under an 8-op cap the chain is cut, and
    both halves later become complex (epilogue of one conv, prologue of the other)."""
    b = fusionlang.GraphBuilder("capped")
    rng = np.random.default_rng(0)
    v = b.conv(b.input("x", (1, 4, 8, 8)), b.constant(rng.standard_normal((4, 4, 1, 1)).astype(np.float32)),
               name="c1")
    for k in range(chain):
        v = (b.relu if k % 2 == 0 else b.exp)(v, name=f"e{k}")
    b.output(b.conv(v, b.constant(rng.standard_normal((4, 4, 1, 1)).astype(np.float32)), name="c2"))
    return b.build()


def cut_edge(plan):
    """The chain edge whose two ends are in different groups."""
    owner = plan.group_of()
    names = [n.name for n in plan.graph.nodes if n.name.startswith("e")]
    return next((a, b) for a, b in zip(names, names[1:]) if owner[a] != owner[b])


def test_refusal_names_the_cap_not_the_table_the_grown_groups_meet(tmp_path):
    path = tmp_path / "capped.fuse"
    path.write_text(CAPPED_RULES)
    rules = fusionlang.load_rules(str(path))
    plan = fusionlang.fuse(conv_chain_conv(), rules, feedback=False)
    producer, consumer = cut_edge(plan)
    owner = plan.group_of()
    # the groups on both sides of the cut are complex now: the table does not pair them
    assert {plan.group(owner[producer]).category, plan.group(owner[consumer]).category} == {"complex"}
    refusals = {r.neighbour: r.reason for r in explain(plan, rules, consumer).refusals}
    assert refusals[producer].startswith(f"{path}:4:1: fuse complex -> elemwise : complex applies, but max_ops = 8 "
                                         f"({path}:7:19: strategy apollo) (8 + ")
    # with room for the whole chain the same two nodes fuse: the cap was the cause
    wide = fusionlang.fuse(conv_chain_conv(), rules, options={"max_ops": 64}, feedback=False)
    assert wide.group_of()[producer] == wide.group_of()[consumer]


def test_limit_given_as_an_option_says_so():
    rules = fusionlang.load_rules("apollo")
    plan = fusionlang.fuse(conv_chain_conv(), rules, options={"max_ops": 8}, feedback=False)
    producer, consumer = cut_edge(plan)
    reason = {r.neighbour: r.reason for r in explain(plan, rules, consumer, options={"max_ops": 8}).refusals}[producer]
    assert "max_ops = 8 (set by an option)" in reason


def test_decisions_are_values_with_the_entry_and_its_span(rules):
    from fusionlang.engine.decisions import MergeDecision, Verdict

    plan = fusionlang.fuse(conv_then_pool(), rules, feedback=False)
    assert plan.decisions and all(isinstance(d, MergeDecision) for d in plan.decisions)
    merged = [d for d in plan.decisions if d.verdict is Verdict.MERGED]
    assert merged and all(d.entry is not None and d.entry.span.file.endswith("apollo.fuse") for d in merged)
    owner = plan.group_of()
    assert all(owner[d.producer] == owner[d.consumer] for d in merged)
    refused = [d for d in plan.decisions if d.edge == ("r", "p")]
    assert refused[-1].verdict is Verdict.NO_ENTRY and refused[-1].entry is None
    recorded = [d for d in json.loads(plan.to_json())["decisions"] if (d["producer"], d["consumer"]) == ("r", "p")]
    assert recorded[-1]["verdict"] == "no entry" and recorded[-1]["entry"] is None
