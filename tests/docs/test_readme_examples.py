"""The README lists every command and quotes lint's warning as lint gives it (its rule
workflow runs as written in tests/test_readme.py)."""

from __future__ import annotations

import re
from pathlib import Path

from fusionlang.cli import COMMANDS

README = Path(__file__).resolve().parents[2] / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def test_readme_lists_every_command():
    text = README.read_text()
    for command in COMMANDS:
        assert f"| `fusionlang {command}" in text, command


def test_readme_quotes_the_warning_lint_gives_under_apollo(tmp_path, monkeypatch):
    text = README.read_text()
    (rule,) = [body for lang, body in FENCE.findall(text) if lang == "fuse"]
    quoted = re.search(r"lint says `(silu\.fuse:[^`]+)`", " ".join(text.split())).group(1)
    under_apollo = re.sub(r'import "[^"]+"[^\n]*', 'import "apollo.fuse"', rule, count=1)
    (tmp_path / "silu.fuse").write_text(under_apollo)
    monkeypatch.chdir(tmp_path)
    from fusionlang.lang import lint

    assert [str(d) for d in lint(["silu.fuse"])] == [quoted]
