"""Pattern-scoped fusion in the partitioner: a `fuse pattern` match becomes one group before
the category pairs, and every refusal (overlap, cycle, backend) is a decision naming the entry."""

from __future__ import annotations

import numpy as np
import pytest

from fusionlang.engine.decisions import Verdict
from fusionlang.engine.explain import explain
from fusionlang.engine.partition import partition
from fusionlang.engine.policy import describe_entry
from fusionlang.errors import FuseError
from fusionlang.lang import parse_text
from fusionlang.ops import GraphBuilder

# no fuse table at all: whatever is grouped, a pattern grouped it
HEAD = 'import "std/ops.fuse"\nstrategy apollo { max_ops = 64 }\n'


def rules(tmp_path, text: str):
    path = tmp_path / "p.fuse"
    path.write_text(HEAD + text)
    return parse_text(path.read_text(), str(path))


def chain():
    b = GraphBuilder("chain")
    x = b.input("x", (4, 8))
    t = b.tanh(x, name="t")
    e = b.exp(t, name="e")
    r = b.relu(e, name="r")
    b.output(b.sigmoid(r, name="s"))
    return b.build()


def test_a_match_is_one_group_named_by_its_entry(tmp_path):
    rs = rules(tmp_path, "fuse pattern exp_relu: relu(exp(x)) as elemwise\n")
    plan = partition(chain(), rs)
    owner = plan.group_of()
    assert owner["e"] == owner["r"] and len({owner["t"], owner["e"], owner["s"]}) == 3
    group = plan.group(owner["r"])
    where = f"{tmp_path / 'p.fuse'}:3:1: fuse pattern exp_relu"
    assert describe_entry(rs.fuse_patterns[0]) == where and group.rules == [where]
    assert group.category == "elemwise"
    merged = [d for d in plan.decisions if d.verdict is Verdict.MERGED]
    assert [(d.producer, d.consumer, d.entry.name) for d in merged] == [("e", "r", "exp_relu")]


def test_without_as_the_group_takes_its_highest_category(tmp_path):
    b = GraphBuilder("mm")
    x = b.input("x", (4, 8))
    w = b.constant(np.ones((8, 3), np.float32), name="w")
    b.output(b.matmul(b.relu(x, name="r"), w, name="m"))
    plan = partition(b.build(), rules(tmp_path, "fuse pattern relu_matmul: matmul(relu(x), w)\n"))
    assert plan.launches == 1 and plan.groups[0].category == "complex"


def test_a_match_that_overlaps_an_earlier_group_is_refused_with_a_reason(tmp_path):
    rs = rules(tmp_path, "fuse pattern exp_relu: relu(exp(x))\nfuse pattern relu_sigmoid: sigmoid(relu(x))\n")
    plan = partition(chain(), rs)
    owner = plan.group_of()
    assert owner["e"] == owner["r"] != owner["s"]
    (overlap,) = [d for d in plan.decisions if d.verdict is Verdict.PATTERN_OVERLAP]
    assert overlap.entry.name == "relu_sigmoid" and overlap.edge == ("r", "s")
    assert "node 'r' is already in a group of fuse pattern 'exp_relu'" in overlap.detail


def test_a_match_joined_by_a_path_through_an_outside_node_is_refused(tmp_path):
    # e feeds c directly and through r, which the pattern does not cover: one group would be a cycle
    b = GraphBuilder("diamond")
    x = b.input("x", (4, 8))
    e = b.exp(x, name="e")
    r = b.relu(e, name="r")
    b.output(b.add(e, r, name="c"))
    plan = partition(b.build(), rules(tmp_path, "fuse pattern exp_add: add(exp(x), y)\n"))
    owner = plan.group_of()
    assert len({owner["e"], owner["r"], owner["c"]}) == 3
    (cycle,) = [d for d in plan.decisions if d.verdict is Verdict.CYCLE]
    assert cycle.entry.name == "exp_add" and "re-enters it through node 'r'" in cycle.detail


def test_a_group_the_backend_refuses_is_dropped_with_the_backends_reason(tmp_path):
    rs = rules(tmp_path, "fuse pattern exp_relu: relu(exp(x))\n")

    def refuse_exp_with_relu(graph, names):
        return "no exp and relu together" if {"e", "r"} <= set(names) else None

    plan = partition(chain(), rs, feedback=refuse_exp_with_relu)
    owner = plan.group_of()
    assert owner["e"] != owner["r"]
    refused = [d for d in plan.decisions if d.verdict is Verdict.FEEDBACK_REFUSED]
    assert [d.detail for d in refused] == ["no exp and relu together", "the backend refused a merge inside this match"]


def test_a_refused_producer_merged_into_a_match_later_is_split_off_not_the_match(tmp_path):
    # e, r, s match; the table then merges t into them. The backend refuses t with e, and
    # would refuse the match half built: the split falls on (t, e), not inside the match
    rs = rules(tmp_path, "fuse elemwise -> elemwise : elemwise\nfuse pattern tail: sigmoid(relu(exp(x)))\n")

    def refuse(graph, names):
        if {"t", "e"} <= set(names):
            return "no tanh with exp"
        return "half a match" if len({"e", "r", "s"} & set(names)) == 2 else None

    plan = partition(chain(), rs, feedback=refuse)
    owner = plan.group_of()
    assert owner["e"] == owner["r"] == owner["s"] != owner["t"]
    refused = [d for d in plan.decisions if d.verdict is Verdict.FEEDBACK_REFUSED]
    assert [(d.edge, d.detail) for d in refused] == [(("t", "e"), "no tanh with exp")]


def test_strategies_that_cannot_honour_pattern_entries_refuse_them(tmp_path):
    rs = rules(tmp_path, "fuse pattern exp_relu: relu(exp(x))\n")
    with pytest.raises(FuseError, match=r"p.fuse:3:1: fuse pattern entries are not supported by the tvm strategy"):
        partition(chain(), rs, "tvm")


def test_explain_gives_the_overlap_as_the_reason_the_nodes_stay_apart(tmp_path):
    rs = rules(tmp_path, "fuse pattern exp_relu: relu(exp(x))\nfuse pattern relu_sigmoid: sigmoid(relu(x))\n")
    plan = partition(chain(), rs)
    (refusal,) = [r for r in explain(plan, rs, "s").refusals if r.neighbour == "r"]
    assert refusal.reason == (f"{tmp_path / 'p.fuse'}:4:1: fuse pattern relu_sigmoid matches, but node 'r' is "
                              f"already in a group of fuse pattern 'exp_relu' ({tmp_path / 'p.fuse'}:3)")
