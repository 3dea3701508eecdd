"""docs/language.md's policy examples work as written: the "Extending a policy" file
lints clean (language and policy checks) and its test blocks pass, and the guarded
entries shown under "fuse" load on top of apollo."""

from __future__ import annotations

import re
from pathlib import Path

from fusionlang.engine.policy_check import policy_diagnostics
from fusionlang.testing.testblocks import run_test_blocks
from fusionlang.lang import lint, load_rules

DOC = Path(__file__).resolve().parents[2] / "docs" / "language.md"


def _block_after(heading: str, fence: str) -> str:
    text = DOC.read_text()
    start = text.index(heading)
    body = text[text.index(fence, start) + len(fence):]
    return body[: body.index("```")]


def test_extending_a_policy_example(tmp_path):
    source = _block_after("## Extending a policy", "```fuse\n")
    name = re.match(r"# (\S+\.fuse):", source).group(1)
    path = tmp_path / name
    path.write_text(source)
    assert lint([path]) == []
    rules = load_rules(str(path))
    assert policy_diagnostics(rules) == []
    own = [r for r in run_test_blocks(rules) if name in str(r)]
    assert own and all(r.passed for r in own), [str(r) for r in own]


def test_guarded_entries_example(tmp_path):
    text = DOC.read_text()
    start = text.index("# stitch only reductions over few rows")
    example = text[start: text.index("```", start)]
    path = tmp_path / "guards.fuse"
    path.write_text('import "apollo.fuse"\n' + example)
    rules = load_rules(str(path))
    imported = sum(entry.guard is not None for entry in load_rules("apollo").fuse_entries)
    assert sum(entry.guard is not None for entry in rules.fuse_entries) == imported + 2
    assert policy_diagnostics(rules) == []
