"""The README's demo block is what `fusionlang demo` prints: every line that does not
depend on the machine (ops, kernels, bytes, the check, the groups shown) verbatim, the
stage line with the same stages in the same order, times aside."""

from __future__ import annotations

import re
from pathlib import Path

from fusionlang.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"
#: a time as the demo prints it: "6.2 ms", "1.60 s"
TIME = re.compile(r"\d+(\.\d+)? m?s")


def readme_demo_lines() -> list[str]:
    text = README.read_text()
    block = re.search(r"```console\n\$ fusionlang demo\n(.*?)```", text, re.S).group(1)
    return [line for line in block.splitlines() if line.strip() != "..."]


def printed_demo_lines(capsys, monkeypatch) -> list[str]:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["--no-color", "demo", "--repeat", "1"]) == 0
    return [line.rstrip() for line in capsys.readouterr().out.splitlines()]


def test_the_readme_shows_what_the_demo_prints(capsys, monkeypatch):
    printed = printed_demo_lines(capsys, monkeypatch)
    for line in readme_demo_lines():
        if line.startswith(("time ", "oracle ")):
            (twin,) = [p for p in printed if p.split()[:1] == line.split()[:1]]
            assert TIME.sub("T", twin) == TIME.sub("T", line)
        elif line.startswith("max error"):
            assert any(p.startswith("max error") and p.split()[3:] == line.split()[3:] for p in printed)
        else:
            assert line.rstrip() in printed, line
