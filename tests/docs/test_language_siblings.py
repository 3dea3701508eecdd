"""The sibling-fusion example of docs/language.md works as written: it lints clean, its
test block passes, the two reductions are one group only because of the sibling entry,
and the compiled C kernel computes what the reference interpreter does."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

import fusionlang
from fusionlang.testing.testblocks import run_test_blocks
from fusionlang.lang import lint
from fusionlang.ops import GraphBuilder
from fusionlang.ops.interpreter import run as reference_run

DOC = Path(__file__).resolve().parents[2] / "docs" / "language.md"


def example() -> str:
    text = DOC.read_text()
    start = text.index("### Sibling (multi-output) fusion")
    block = text[text.index("```\n", start) + 4:]
    return block[: block.index("```")]


def reductions_of_one_input():
    b = GraphBuilder("siblings")
    x = b.input("x", (16, 32))
    b.output(b.reduce_sum(x, axes=[1], name="s"))
    b.output(b.reduce_max(x, axes=[1], name="m"))
    return b.build()


def test_example_lints_and_its_test_passes(tmp_path):
    name = re.match(r"# (\S+\.fuse):", example()).group(1)
    path = tmp_path / name
    path.write_text(example())
    assert lint([path]) == []
    rules = fusionlang.load_rules(str(path))
    assert [(r.name, r.passed) for r in run_test_blocks(rules, names={"row_sum_and_row_max_read_x_once"})] == \
        [("row_sum_and_row_max_read_x_once", True)]


def test_the_entry_is_what_groups_them_and_c_agrees(tmp_path):
    path = tmp_path / "siblings.fuse"
    path.write_text(example())
    graph = reductions_of_one_input()
    plain = fusionlang.fuse(graph, "apollo", feedback=False)
    assert plain.group_of()["s"] != plain.group_of()["m"]
    plan = fusionlang.fuse(graph, str(path))
    (group,) = plan.groups
    assert group.rules == [f"{path}:4:1: fuse sibling reduce, reduce : reduce"]
    feeds = {"x": np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32)}
    got = fusionlang.compile(plan, "c").run(feeds)
    want = reference_run(graph, feeds)
    assert set(got) == set(want) == {"s", "m"}
    for value in want:
        np.testing.assert_allclose(got[value], want[value], rtol=1e-5, atol=1e-5)
