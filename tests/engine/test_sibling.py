"""Sibling (multi-output) fusion under apollo: readers of one value merge by a `fuse
sibling` entry, never through a path via a third group, within max_ops, and split again
when the backend refuses; the compiled C program agrees with the reference."""

from __future__ import annotations

import numpy as np
import pytest

import fusionlang
from fusionlang.engine.decisions import Verdict
from fusionlang.engine.explain import explain
from fusionlang.engine.partition import partition
from fusionlang.ops import GraphBuilder
from fusionlang.testing.equivalence import check_equivalence

APOLLO_WITH_SIBLINGS = 'import "apollo.fuse"\nfuse sibling reduce, reduce : reduce\n'

#: only sibling entries, so every other pair of ops stays apart
SIBLINGS_ONLY = 'import "std/ops.fuse"\nfuse sibling reduce, broadcast|reduce : reduce\n'


def load(tmp_path, text: str, name: str = "siblings.fuse"):
    path = tmp_path / name
    path.write_text(text)
    return fusionlang.load_rules(str(path))


def matmul_then_reductions():
    """A matmul (complex: no table entry fuses it into a reduction) read by two row
    reductions, and a graph input read by two more."""
    b = GraphBuilder("siblings")
    x = b.input("x", (16, 32))
    w = b.constant(np.random.default_rng(1).standard_normal((32, 32)).astype(np.float32))
    mm = b.matmul(x, w, name="mm")
    b.output(b.relu(b.reduce_sum(mm, axes=[1], name="s"), name="rs"))
    b.output(b.reduce_max(mm, axes=[1], name="m"))
    b.output(b.reduce_min(x, axes=[1], name="q"))
    b.output(b.reduce_sum(x, axes=[0], name="t"))
    return b.build()


def test_readers_of_one_value_become_one_group(tmp_path):
    rules = load(tmp_path, APOLLO_WITH_SIBLINGS)
    graph = matmul_then_reductions()
    plain = fusionlang.fuse(graph, "apollo", feedback=False).group_of()
    owner = fusionlang.fuse(graph, rules, feedback=False).group_of()
    assert plain["s"] != plain["m"] and plain["q"] != plain["t"]
    assert owner["s"] == owner["m"] == owner["rs"] and owner["q"] == owner["t"]
    assert owner["mm"] != owner["s"] and owner["s"] != owner["q"]


def test_merges_are_recorded_with_the_shared_value(tmp_path):
    rules = load(tmp_path, APOLLO_WITH_SIBLINGS)
    plan = fusionlang.fuse(matmul_then_reductions(), rules, feedback=False)
    shared = {(d.producer, d.consumer): (d.verdict, d.shared) for d in plan.decisions if d.shared}
    assert shared == {("s", "m"): (Verdict.MERGED, "mm"), ("q", "t"): (Verdict.MERGED, "x")}


def test_compiled_c_matches_the_reference(tmp_path):
    rules = load(tmp_path, APOLLO_WITH_SIBLINGS)
    result = check_equivalence(matmul_then_reductions(), rules, "apollo", target="c")
    assert result.ok, str(result)
    assert result.groups == 3  # matmul; s, m and relu; q and t


def test_no_merge_through_a_third_group(tmp_path):
    """a and b both read x, but b also reads c, which a feeds: one group of a and b
    would feed c and read it, a cycle."""
    rules = load(tmp_path, SIBLINGS_ONLY)
    b = GraphBuilder("path")
    x = b.input("x", (16, 32))
    a = b.reduce_sum(x, axes=[1], keepdims=1, name="a")
    c = b.exp(a, name="c")
    b.output(b.add(x, c, name="b"))
    plan = partition(b.build(), rules, "apollo")
    owner = plan.group_of()
    assert len({owner["a"], owner["b"], owner["c"]}) == 3
    (decision,) = [d for d in plan.decisions if d.shared]
    assert (decision.producer, decision.consumer, decision.verdict) == ("a", "b", Verdict.CYCLE)


def test_max_ops_bounds_sibling_groups(tmp_path):
    rules = load(tmp_path, SIBLINGS_ONLY)
    b = GraphBuilder("many")
    x = b.input("x", (16, 32))
    for k in range(5):
        b.output(b.reduce_sum(x, axes=[1], name=f"r{k}"))
    plan = partition(b.build(), rules, "apollo", options={"max_ops": 2})
    assert sorted(len(g.nodes) for g in plan.groups) == [1, 2, 2]
    capped = [d for d in plan.decisions if d.verdict is Verdict.MAX_OPS]
    assert capped and all(d.limit == 2 and d.shared == "x" for d in capped)


def test_backend_refusal_splits_a_sibling_group(tmp_path):
    rules = load(tmp_path, SIBLINGS_ONLY)
    b = GraphBuilder("refused")
    x = b.input("x", (16, 32))
    b.output(b.reduce_sum(x, axes=[1], name="s"))
    b.output(b.reduce_max(x, axes=[1], name="m"))
    graph = b.build()

    def feedback(g, members):
        return "test backend refuses multi-output kernels" if len(members) > 1 else None

    plan = partition(graph, rules, "apollo", feedback=feedback)
    assert len(plan.groups) == 2
    assert plan.stats.feedback == ["backend refused the merge s -> m: test backend refuses multi-output kernels"]
    (refusal,) = explain(plan, rules, "m").refusals
    assert str(refusal) == ("~ s (reduce_sum, group 0): both read x: backend refused the merge s -> m: "
                            "test backend refuses multi-output kernels")


def test_explain_names_the_limit_between_siblings(tmp_path):
    rules = load(tmp_path, SIBLINGS_ONLY + "strategy apollo { max_ops = 2 }\n")
    b = GraphBuilder("many")
    x = b.input("x", (16, 32))
    for k in range(3):
        b.output(b.reduce_sum(x, axes=[1], name=f"r{k}"))
    plan = partition(b.build(), rules, "apollo")
    assert [g.nodes for g in plan.groups] == [["r0", "r1"], ["r2"]]
    lines = explain(plan, rules, "r2").lines()
    path = tmp_path / "siblings.fuse"
    assert (f"    ~ r0 (reduce_sum, group 0): both read x: {path}:2:1: fuse sibling reduce, broadcast|reduce : "
            f"reduce applies, but max_ops = 2 ({path}:3:19: strategy apollo) (2 + 1 ops)") in lines


@pytest.mark.parametrize("strategy", ["apollo", "dp"])
def test_a_sibling_entry_is_no_producer_consumer_entry(tmp_path, strategy):
    rules = load(tmp_path, SIBLINGS_ONLY)
    b = GraphBuilder("chain")
    s = b.reduce_sum(b.input("x", (16, 32)), axes=[1], keepdims=1, name="s")
    b.output(b.reduce_max(s, axes=[0], name="m"))
    owner = partition(b.build(), rules, strategy).group_of()
    assert owner["s"] != owner["m"]


def test_tvm_ignores_sibling_entries(tmp_path):
    rules = load(tmp_path, 'import "tvm.fuse"\nfuse sibling comm_reduce, comm_reduce : comm_reduce\n')
    plan = partition(matmul_then_reductions(), rules, "tvm")
    assert plan.group_of()["q"] != plan.group_of()["t"]
