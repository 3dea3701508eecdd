"""Run every in-file `test` block of the standard library (like egglog's check).

Each block runs in the rule set of the file that states it, and again in every
standard rule set that imports that file, so a rule added elsewhere cannot silently
break it.
"""

from __future__ import annotations

import pytest

from fusionlang.testing.testblocks import run_block, run_test_blocks
from fusionlang.lang import load_rules, standard_names


def _cases():
    cases = []
    for name in standard_names():
        rules = load_rules(name)
        for block in rules.tests:
            cases.append(pytest.param(name, block.name, id=f"{name}::{block.span.file}::{block.name}"))
    return cases


@pytest.mark.parametrize("ruleset,test_name", _cases())
def test_block(ruleset, test_name):
    rules = load_rules(ruleset)
    block = next(b for b in rules.tests if b.name == test_name)
    result = run_block(rules, block)
    assert result.passed, str(result)


def test_every_standard_file_with_rules_has_tests():
    files = {b.span.file for name in standard_names() for b in load_rules(name).tests}
    assert files >= {"apollo.fuse", "tvm.fuse", "dnnfusion.fuse", "decompose.fuse", "simplify.fuse",
                      "std/ops.fuse", "std/normalize.fuse", "std/compound.fuse", "std/batch_norm.fuse"}


def test_a_failing_block_reports_the_expectation(tmp_path):
    path = tmp_path / "t.fuse"
    path.write_text("rewrite drop: identity(x) => x\n"
                    "test t {\n    input x: f32[3]\n    y = exp(identity(x))\n    output y\n"
                    "    expect fired(drop) == 2\n}\n")
    (result,) = run_test_blocks(str(path))
    assert not result.passed
    assert str(result) == (f"{path}:6:5: test t.fuse::t: FAILED: expect fired(drop) == 2 failed: fired(drop) is 1")
