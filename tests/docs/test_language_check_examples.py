"""The "Checking rules" section of docs/language.md works as written: its rule files are
written out, its `fusionlang check` commands run in a fresh directory, and their output
matches what the page shows ("..." stands for text that varies)."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

from fusionlang.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "language.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def section() -> str:
    text = DOC.read_text()
    start = text.index("## Checking rules")
    return text[start:text.index("\n## ", start + 1)]


def blocks(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(section()) if lang == language]


def matches(expected: list[str], actual: list[str]) -> bool:
    """Every expected line matches an actual line, in order ("..." matches any text)."""
    patterns = [re.compile(".*".join(map(re.escape, line.split("..."))) + r"\Z") for line in expected]
    k = 0
    for line in actual:
        if k < len(patterns) and patterns[k].match(line):
            k += 1
    return k == len(patterns)


def test_the_section_shows_rules_and_commands():
    assert len(blocks("fuse")) == 4 and len(blocks("console")) == 4


def test_the_check_examples_run_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for body in blocks("fuse"):
        name = re.match(r"# (\S+\.fuse):", body).group(1)
        (tmp_path / name).write_text(body)
    for body in blocks("console"):
        command, *expected = body.splitlines()
        words = shlex.split(command.removeprefix("$ "))
        assert words[0] == "fusionlang"
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = main(words[1:])
        # a console block that shows a failed rule shows exit status 1
        assert status == (1 if any(line.endswith(": failed") for line in expected) else 0), out.getvalue()
        assert matches(expected, out.getvalue().splitlines()), f"{command}\n{out.getvalue()}"
