"""The README's rule example works as shown: its rule file lints clean, checks (the
rule is proved), and the commands that need only that file succeed."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

from fusionlang.cli import COMMANDS, main

README = Path(__file__).resolve().parents[2] / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def test_readme_rule_example(tmp_path, monkeypatch):
    text = README.read_text()
    (rule,) = [body for lang, body in FENCE.findall(text) if lang == "fuse"]
    name = re.match(r"# (\S+\.fuse)\n", rule).group(1)
    (tmp_path / name).write_text(rule)
    monkeypatch.chdir(tmp_path)
    commands = [line[2:] for lang, body in FENCE.findall(text) if lang == "console"
                for line in body.splitlines() if line.startswith("$ ") and name in line and "model.onnx" not in line]
    assert [c.split()[1] for c in commands] == ["lint", "check"]
    for command in commands:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(shlex.split(command)[1:]) == 0, command
        if " check " in f" {command} ":
            assert "rewrite to_silu: proved" in out.getvalue()


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
