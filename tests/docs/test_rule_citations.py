"""Where the docs cite a shipped rule file's line (``apollo_patterns.fuse:17``), that line
holds the entry they name: a rule file that grows moves its entries, and a stale citation
sent readers to the wrong one (two such were found by hand)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "fusionlang" / "rules"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: (regex, what the cited line must contain): the entry named beside the citation
FORMS = [
    (r"fuse pattern (?P<name>\w+) \((?P<file>[\w/]+\.fuse):(?P<line>\d+)\)", "fuse pattern {name}"),
    (r"(?P<file>[\w/]+\.fuse):(?P<line>\d+):\d+: fuse pattern (?P<name>\w+)", "fuse pattern {name}"),
    (r"(?P<name>\w+) \((?P<file>[\w/]+\.fuse):(?P<line>\d+), priority", "{name}"),
    (r"decompose (?P<name>\w+) \((?P<file>[\w/]+\.fuse):(?P<line>\d+)\)", "decompose {name}"),
]


def _shipped(file: str) -> Path | None:
    path = RULES / file
    return path if path.is_file() else None


def citations():
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for pattern, wanted in FORMS:
            for m in re.finditer(pattern, text):
                path = _shipped(m["file"])
                if path is not None:
                    line = text.count("\n", 0, m.start()) + 1
                    found.append(pytest.param(path, int(m["line"]), wanted.format(name=m["name"]),
                                              id=f"{doc.name}:{line}"))
    return found


@pytest.mark.parametrize("path, line, wanted", citations())
def test_a_cited_line_holds_the_entry_it_names(path, line, wanted):
    lines = path.read_text(encoding="utf-8").splitlines()
    assert line <= len(lines) and wanted in lines[line - 1], \
        f"{path.name}:{line} is {lines[line - 1] if line <= len(lines) else 'past the end'!r}, not {wanted!r}"


def test_the_citations_are_found():
    # the docs cite shipped entries in each form at least once; an empty list tests nothing
    assert len(citations()) >= 2
