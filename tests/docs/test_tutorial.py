"""docs/tutorial.md works as written: its rule file is written out, its commands run in
a fresh directory, and their output matches what the page shows ("..." stands for text
that varies). Commands are split with shlex and run without a shell: ``fusionlang ...``
through the CLI's ``main`` in this process (what the ``fusionlang`` script calls),
``python ...`` as a subprocess."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from fusionlang.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def blocks(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(DOC.read_text()) if lang == language]


def sessions() -> list[tuple[str, list[str]]]:
    """(command, expected output lines) for every "$ " line of the console blocks."""
    out = []
    for body in blocks("console"):
        for line in body.splitlines():
            if line.startswith("$ "):
                out.append((line[2:], []))
            else:
                out[-1][1].append(line)
    return out


def run(command: str, cwd: Path) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of one tutorial command, run in ``cwd`` (the test
    has made it the current directory)."""
    words = shlex.split(command)
    if words[0] == "fusionlang":
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(words[1:])
        return status, out.getvalue(), err.getvalue()
    if words[0] == "python":
        result = subprocess.run([sys.executable, *words[1:]], cwd=cwd, capture_output=True, text=True, timeout=300)
        return result.returncode, result.stdout, result.stderr
    raise AssertionError(f"the tutorial runs only fusionlang and python, not {words[0]!r}")


def matches(expected: list[str], actual: list[str]) -> bool:
    """Every expected line matches an actual line, in order ("..." matches any text)."""
    patterns = [re.compile(".*".join(map(re.escape, line.split("..."))) + r"\Z") for line in expected]
    k = 0
    for line in actual:
        if k < len(patterns) and patterns[k].match(line):
            k += 1
    return k == len(patterns)


def test_tutorial_parts_are_found():
    assert len(blocks("fuse")) == 1
    commands = [c for c, _ in sessions()]
    assert any(c.startswith("fusionlang lint ") for c in commands)
    assert any(c.startswith("fusionlang check ") for c in commands)
    assert any(c.startswith("fusionlang fuse ") and "--report" in c for c in commands)
    assert any(c.startswith("fusionlang explain ") for c in commands)
    assert any(c.startswith("fusionlang sweep ") and "--report" in c for c in commands)


def test_matching():
    assert matches(["a ... s", "c"], ["a 1.5 s", "b", "c"])
    assert not matches(["c", "a ... s"], ["a 1.5 s", "c"])


def test_tutorial_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (rule_file,) = blocks("fuse")
    name = re.match(r"# (\S+\.fuse):", rule_file).group(1)
    (tmp_path / name).write_text(rule_file)
    for command, expected in sessions():
        status, out, err = run(command, tmp_path)
        assert status == 0, f"{command}\n{out}\n{err}"
        shown = [line for line in expected if line.strip()]
        assert matches(shown, out.splitlines()), f"{command}\n{out}"
    page = (tmp_path / "resnet50.html").read_text()
    assert "relu_after_max_pool (pool_relu.fuse:4)" in page
    assert "fuse reduce -&gt; broadcast|elemwise : reduce [stitch]" in page
    sweep = json.loads((tmp_path / "sweep.json").read_text())
    assert [row["name"] for row in sweep["rows"]] == ["light_resnet50", "light_squeezenet"]
    assert all(row["a"]["rewrites"].get("relu_after_max_pool") == 1 for row in sweep["rows"])
    assert "<svg" in (tmp_path / "sweep.html").read_text()
