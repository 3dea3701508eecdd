"""`check --seed N` draws the same instances whatever modules happen to be loaded:
hypothesis mixes numbers from loaded local modules into its draws, which the checker
turns off."""

from __future__ import annotations

import importlib
import sys

import pytest
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


# ----- verdicts do not depend on time -------------------------------------------------------
#: rules that take several rounds to meet the coverage target (reshape_chain: 4 rounds at
#: seed 0), so a time budget would cut them short on a slow machine
MULTI_ROUND = ["check", "simplify", "--kinds", "rewrite", "--rule", "reshape_chain", "--rule", "add_zero"]


def _check_output(args, capsys) -> str:
    from fusionlang.cli import main

    assert main(args) == 0
    return capsys.readouterr().out


def test_a_slow_cpu_gives_the_same_verdict_lines(monkeypatch, capsys):
    import itertools
    import time

    fast = _check_output(MULTI_ROUND, capsys)
    ticks = itertools.count()
    monkeypatch.setattr(time, "perf_counter", lambda: next(ticks) * 100.0)  # 100 s pass per reading
    slow = _check_output(MULTI_ROUND, capsys)
    assert "rewrite reshape_chain: checked" in fast and "add_zero: proved" in fast
    assert slow == fast


@pytest.mark.parametrize("budget, least, most", [(1, 12, 12), (2, 13, 12 + 10)])
def test_examples_draw_within_the_budget_of_rounds(capsys, budget, least, most):
    # a first round of --examples instances, then rounds of at least 10, --budget rounds in all
    import json

    out = _check_output(["--json", *MULTI_ROUND[:-2], "--examples", "12", "--budget", str(budget)], capsys)
    (check,) = json.loads(out)["reports"][0]["checks"]
    assert check["status"] == "under-covered"
    assert least <= check["coverage"]["satisfied"] <= most
