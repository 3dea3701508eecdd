"""The test tree's own invariants: pytest's default import mode keys test modules by basename."""

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).parent


def test_test_module_basenames_are_unique():
    names = Counter(p.name for p in TESTS.rglob("*.py") if p.name != "__init__.py" and p.name != "conftest.py")
    assert [n for n, c in names.items() if c > 1] == []
