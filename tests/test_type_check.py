"""The library type-checks: mypy, as pyproject.toml's [tool.mypy] configures it, finds no
error in fusionlang/. Its cache (.mypy_cache, in the checkout) makes a rerun take seconds;
a fresh clone checks everything once (about 20 s)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_mypy_finds_no_error_in_the_library():
    run = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
