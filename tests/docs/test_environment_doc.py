"""Every environment variable fusionlang reads is in the README's table."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def variables_read() -> set[str]:
    names = set()
    for path in (ROOT / "fusionlang").rglob("*.py"):
        names |= set(re.findall(r"\bFUSIONLANG_[A-Z0-9_]+\b", path.read_text()))
    return names


def test_every_variable_is_documented():
    section = (ROOT / "README.md").read_text().split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([A-Z_]+)`", section, re.M))
    assert variables_read() and variables_read() <= documented, variables_read() - documented
