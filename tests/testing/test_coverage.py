"""Coverage of `check`: instances drawn for the guard, shape classes tried, and rules that
miss the target reported under-covered, never checked."""

from __future__ import annotations

import json
import textwrap
from collections import Counter

import pytest

from fusionlang.ir.types import TensorType
from fusionlang.lang import parse_text
from fusionlang.ops.builder import GraphBuilder
from fusionlang.testing.checker import check_rewrite
from fusionlang.testing.coverage import MISSING, Coverage, broadcast_class

# issue 16: a per-row scale c[N, 1] folded into the weight's columns; right only when
# every row has the same scale, which no shape guarantees when M == N > 1
ROW_SCALE = textwrap.dedent("""\
    import "std/algebra.fuse"

    rewrite fold_row_scale:
        r @ mul(m @ matmul(x, w), c) where const(w, c) and rank(w) == 2 and same_shape(r, m)
            and rank(c) == 2 and dim(c, 1) == 1 and dim(c, 0) == dim(w, 1)
        => matmul(x, w * reshape(c) {shape=[1, -1]})
    """)

# several shape conjuncts: rejection sampling drew rank 4 never, so no instance ever
# satisfied the guard and the sympy proof stood alone
CHANNEL_SCALE = textwrap.dedent("""\
    import "std/algebra.fuse"

    rewrite channel_scale_as_div:
        r @ mul(x, c) where const(c) and is_float(x) and rank(x) == 4 and rank(c) == 4 and dim(c, 0) == 1
            and dim(c, 2) == 1 and dim(c, 3) == 1 and dim(c, 1) == dim(x, 1) and same_shape(r, x)
        => div(x, 1 / c)
    """)


def _rule(text):
    rules = parse_text(text, "rules.fuse")
    return rules.rewrites[-1], rules


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_the_row_scale_folded_into_columns_fails_on_every_seed(seed):
    rule, rules = _rule(ROW_SCALE)
    check = check_rewrite(rule, rules, seed=seed)
    assert check.status == "failed", str(check)
    assert check.where == "rules.fuse:3" and "elements differ" in check.detail


def test_a_guard_of_several_shape_conjuncts_is_drawn_for_not_rejected():
    rule, rules = _rule(CHANNEL_SCALE)
    check = check_rewrite(rule, rules, max_examples=30, seed=0)
    assert check.status == "proved" and check.instances >= 30
    coverage = check.coverage
    # shapes are built for the guard: most draws satisfy it (the dtype is still drawn)
    assert coverage.satisfied * 2 >= coverage.drawn
    assert all(shape[0][1][1] == shape[1][1][1] for shape in coverage.shapes)


def test_a_rule_that_misses_the_target_is_under_covered_not_checked():
    # not a scalar rule (no proof to stand on): its verdict rests on the instances alone
    rule, rules = _rule('import "std/algebra.fuse"\nrewrite swap: matmul(neg(x), w) => neg(matmul(x, w))\n')
    check = check_rewrite(rule, rules, max_examples=4, seed=0, budget=1)
    assert check.status == "under-covered" and check.instances >= 4
    assert not check.coverage.reached and "target not met" in check.coverage.summary()
    assert str(check).startswith("rules.fuse:2: rewrite swap: under-covered (")
    assert check.detail == "the coverage target was not met in 1 rounds (--budget)"


def test_the_report_names_counts_shapes_classes_and_seed():
    rule, rules = _rule('import "std/algebra.fuse"\nrewrite neg2: neg(neg(x)) => x\n')
    check = check_rewrite(rule, rules, max_examples=20, seed=7)
    coverage = check.coverage
    assert coverage.reached and coverage.satisfied >= 20 and coverage.drawn >= coverage.satisfied
    line = str(check).splitlines()[1]
    assert line == (f"    coverage: {coverage.drawn} drawn, {coverage.satisfied} matched the pattern and guard, "
                    f"{len(coverage.shapes)} distinct shapes, {len(coverage.classes)} shape classes "
                    f"({coverage.broadcast_cases} broadcasting, {coverage.rank_cases} rank cases), seed 7")
    data = json.loads(json.dumps(check.to_dict()))
    assert data["coverage"]["seed"] == 7 and data["coverage"]["reached"] is True


def test_broadcast_class_tells_the_ways_an_operand_meets_the_result():
    b = GraphBuilder("g")
    x = b.input("x", (2, 3), "float32")
    row = b.input("row", (2, 1), "float32")
    vec = b.input("vec", (3,), "float32")
    same = b.input("same", (2, 3), "float32")
    b.op("mul", x, row)
    b.op("add", x, vec)
    b.op("sub", x, same)
    assert broadcast_class(b.graph) == ("mul:=,b", "add:=,-", "sub:=,=")


def test_the_target_needs_the_count_and_exhausted_classes():
    coverage = Coverage(seed=0, min_instances=4)
    for cls in ["a", "a", "b", "b"]:
        coverage.add((), (cls,), (), ())
    assert coverage.reached and coverage.missing == 0
    coverage.add((), ("c",), (), ())
    # one class seen once in five: an untried class is still likely
    assert coverage.missing == pytest.approx(1 / 5) and coverage.missing > MISSING and not coverage.reached
    assert Counter(coverage.classes.values()) == Counter({2: 2, 1: 1})


def test_the_class_records_which_named_dims_are_1_and_which_are_equal():
    from fusionlang.testing.guardshapes import shape_demands
    from fusionlang.testing.instances import Instance

    rule, _ = _rule(ROW_SCALE)
    b = GraphBuilder("g")
    w, c = b.input("w", (2, 3), "float32"), b.input("c", (3, 1), "float32")
    instance = Instance(b.graph, "", [], {}, {"w": w, "c": c})
    *_, relations = instance.shape_class(shape_demands(rule.guard))
    # the guard names dim(c, 1), dim(c, 0), dim(w, 1): sizes 1, 3, 3
    assert relations == (("unit", 0, True), ("unit", 1, False), ("unit", 2, False),
                         ("equal", 0, 1, False), ("equal", 0, 2, False), ("equal", 1, 2, True))
