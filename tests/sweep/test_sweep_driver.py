"""run_sweep when builds crash: a worker that dies or a build that raises is that row's
one-line error, the others complete, and the failure is not cached (a rerun tries again)."""

import pytest
import sweep_fake_builds as fake

from fusionlang.sweep import Policy, SweepSettings, driver, run_sweep


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSIONLANG_CACHE_DIR", str(tmp_path / "cache"))


def settings(tmp_path, jobs: int) -> SweepSettings:
    models = []
    for name in ("ok.onnx", "crash.onnx"):
        (tmp_path / name).write_bytes(name.encode())  # the fake builds never read them
        models.append(str(tmp_path / name))
    return SweepSettings(models=tuple(models), a=Policy("xla"), b=Policy("apollo"), jobs=jobs)


def test_a_build_that_kills_its_worker_is_a_failed_row_and_is_not_cached(tmp_path, monkeypatch):
    monkeypatch.setattr(driver, "build", fake.build_or_crash)
    doc = run_sweep(settings(tmp_path, jobs=2))
    ok, crashed = doc["rows"]
    assert ok["status"] == "ok" and ok["a"]["kernels"] == 2 and ok["b"]["kernels"] == 1
    assert (crashed["status"], crashed["error"]) == ("failed", "worker died (signal 9)")
    assert doc["summary"]["failed"] == 1 and doc["builds"] == {"run": 4, "cached": 0}
    assert run_sweep(settings(tmp_path, jobs=2))["builds"] == {"run": 2, "cached": 2}  # only the crashed again


def test_a_build_that_raises_is_a_failed_row_on_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(driver, "build", fake.build_raising)
    doc = run_sweep(settings(tmp_path, jobs=1))
    assert [row["error"] for row in doc["rows"]] == ["RuntimeError: a bug in the compiler"] * 2
