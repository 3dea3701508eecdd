"""Static evaluation (guards, attribute values) is bounded: integers of at most
MAX_INT_BITS bits, lists of at most MAX_LIST_ELEMENTS elements, MAX_EVAL_STEPS steps.
Past a limit the guard fails with a located reason, or the rewrite stops with a located
RewriteError; nothing hangs or runs out of memory."""

from __future__ import annotations

import pytest

from fusionlang.engine.rewrite import apply_rules, why_not
from fusionlang.errors import RewriteError
from fusionlang.lang import parse_text
from fusionlang.lang.limits import MAX_EVAL_STEPS, MAX_INT_BITS, MAX_LIST_ELEMENTS
from fusionlang.ops import GraphBuilder

TOO_LARGE = f"is too large: integers have at most {MAX_INT_BITS} bits"
TOO_LONG = f"is too long: lists have at most {MAX_LIST_ELEMENTS} elements"


def _graph():
    b = GraphBuilder()
    x, y = b.input("x", (4,)), b.input("y", (4,))
    b.output(b.add(x, y, name="m"))
    return b.build()


def _guard_failure(guard: str):
    rules = parse_text(f"rewrite r: add(x, y)\n    where {guard}\n    => x\n", "g.fuse")
    result = apply_rules(_graph(), rules)
    assert dict(result.fired) == {}
    return why_not(_graph(), "m", rules, "r").message


# rank(x) is 1: each guard depends on the graph, so lint (which reports constant
# expressions past a limit) accepts it and the limit is met at rewrite time
@pytest.mark.parametrize("guard, culprit, reason", [
    ("10 ** 10 ** 10 ** rank(x) > 1", "10 ** 10 ** 10 ** rank(x)", TOO_LARGE),
    ("2 ** (1024 + rank(x)) > 1", "2 ** (1024 + rank(x))", TOO_LARGE),
    ("2 ** 1000 * 2 ** (999 + rank(x)) > 1", "2 ** 1000 * 2 ** (999 + rank(x))", TOO_LARGE),
    ("prod([2 ** 600, 2 ** (599 + rank(x))]) > 1", "prod([2 ** 600, 2 ** (599 + rank(x))])", TOO_LARGE),
    ("len([1] * (100000000000 * rank(x))) > 1", "[1] * (100000000000 * rank(x))", TOO_LONG),
    ("len(range(0, 100000000000 * rank(x))) > 1", "range(0, 100000000000 * rank(x))", TOO_LONG),
    ("len([[[rank(x)] * 1000] * 1000] * 1000) > 1", "[[rank(x)] * 1000] * 1000", TOO_LONG),
    ("len(range(0, 9000 * rank(x)) + range(0, 9000)) > 1", "range(0, 9000 * rank(x)) + range(0, 9000)", TOO_LONG),
])
def test_oversized_values_fail_the_guard_at_their_span(guard, culprit, reason):
    message = why_not(_graph(), "m", parse_text(f"rewrite r: add(x, y) where {guard} => x\n", "g.fuse"), "r").message
    assert message == f"guard {guard} failed: {culprit} {reason}"


def test_evaluation_steps_are_bounded():
    # each term builds a list of 9,000 elements, within the list limit; together they
    # pass the step limit
    terms = -(-MAX_EVAL_STEPS // 9000) + 1
    guard = " + ".join(["len(range(0, 9000 * rank(x)))"] * terms) + " > 1"
    message = _guard_failure(guard)
    assert message.endswith(f"failed: evaluation takes more than {MAX_EVAL_STEPS} steps")


def test_values_within_the_limits_still_compute():
    assert _guard_failure(f"2 ** {MAX_INT_BITS - 1} < 0").endswith("2 ** 1023 < 0 failed: 2 ** 1023 is "
                                                                  f"{2 ** (MAX_INT_BITS - 1)!r}")
    rules = parse_text(f"rewrite r: add(x, y) where len([1] * {MAX_LIST_ELEMENTS}) == {MAX_LIST_ELEMENTS} "
                       "and prod(shape(x)) == 4 => mul(x, y)\n", "g.fuse")
    assert dict(apply_rules(_graph(), rules).fired) == {"r": 1}


def test_oversized_attribute_stops_the_rewrite_with_a_located_error():
    rules = parse_text("rewrite r: add(x, y)\n    => reshape(x) {shape=[1] * (100000000000 * rank(x))}\n",
                       "attr.fuse")
    with pytest.raises(RewriteError) as info:
        apply_rules(_graph(), rules)
    assert str(info.value) == f"attr.fuse:2:26: rewrite 'r' at node 'm': [1] * (100000000000 * rank(x)) {TOO_LONG}"
