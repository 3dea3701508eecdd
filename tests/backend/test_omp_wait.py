"""OpenMP builds that load their compiler's OpenMP runtime (not GCC's: those carry
backend.thread_pool, tested in test_thread_pool.py) load with idle threads that sleep."""
from __future__ import annotations

import os

import pytest


def test_the_policy_is_only_in_the_environment_while_the_library_loads(monkeypatch):
    from fusionlang.backend import omp_wait

    monkeypatch.setattr(omp_wait._State, "loaded_by_us", False)
    monkeypatch.setattr(omp_wait, "libgomp_loaded", lambda: False)
    for name in omp_wait.WAIT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with omp_wait.passive_wait_while_loading(True):
        assert os.environ["OMP_WAIT_POLICY"] == "passive"
    assert "OMP_WAIT_POLICY" not in os.environ
    with omp_wait.passive_wait_while_loading(False):
        assert "OMP_WAIT_POLICY" not in os.environ



def test_a_warning_names_a_runtime_someone_else_loaded_first(monkeypatch):
    from fusionlang.backend import omp_wait

    monkeypatch.setattr(omp_wait._State, "loaded_by_us", False)
    monkeypatch.setattr(omp_wait._State, "warned", False)
    monkeypatch.setattr(omp_wait, "libgomp_loaded", lambda: True)
    for name in omp_wait.WAIT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with pytest.warns(omp_wait.SpinningThreadsWarning, match="OMP_WAIT_POLICY=passive"):
        with omp_wait.passive_wait_while_loading(True):
            assert "OMP_WAIT_POLICY" not in os.environ
