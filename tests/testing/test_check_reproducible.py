"""`check --seed N` draws the same instances whatever modules happen to be loaded:
hypothesis mixes numbers from loaded local modules into its draws, which the checker
turns off."""

from __future__ import annotations

import importlib
import sys

from hypothesis import strategies as st

from fusionlang.testing.checker import run_property


def _draws(seed: int) -> list:
    seen = []

    def trial(draw):
        seen.append((draw(st.integers(-10**6, 10**6)), draw(st.floats(-1e6, 1e6))))

    run_property(trial, max_examples=200, seed=seed)
    return seen


def test_the_same_seed_draws_the_same_values_after_more_modules_load(tmp_path, monkeypatch):
    before = _draws(3)
    module = tmp_path / "fusionlang_constants_probe.py"
    module.write_text("".join(f"C{k} = {k * 7919 + 13}\nF{k} = {k * 104.729 + 0.5}\n" for k in range(200)))
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("fusionlang_constants_probe")
    try:
        assert _draws(3) == before
    finally:
        sys.modules.pop("fusionlang_constants_probe", None)
