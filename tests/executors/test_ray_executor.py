"""The Ray executor on a local cluster (2 CPUs, one for the whole module: it takes
seconds to start): the pool's results, worker deaths retried, exceptions not."""

import pytest

from fusionlang.executors import Done, Failed, run_all

import executor_jobs as jobs

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module", autouse=True)
def cluster():
    import ray

    from fusionlang.executors.on_ray import start_local_cluster

    start_local_cluster(2)
    yield
    ray.shutdown()


def test_ray_gives_the_pools_results():
    items = {f"k{i}": i for i in range(5)}
    assert run_all(jobs.square, items, ray=True) == run_all(jobs.square, items, jobs=2)


def test_ray_reruns_an_item_whose_worker_died_and_fails_one_that_always_kills(tmp_path):
    items = {"once": (str(tmp_path / "once"), 7)}
    assert run_all(jobs.kill_worker_once, items, ray=True) == {"once": Done("once", 7)}
    results = run_all(jobs.kill_worker_always, {"bad": -1, "ok": 1}, ray=True, retries=1)
    assert results["ok"] == Done("ok", 1)
    assert isinstance(results["bad"], Failed) and results["bad"].error.startswith("worker died")


def test_ray_reports_an_exception_on_one_line_without_retrying(tmp_path):
    marker = tmp_path / "runs"
    results = run_all(jobs.count_then_divide, {"zero": (str(marker), 0)}, ray=True, retries=2)
    assert results == {"zero": Failed("zero", "ZeroDivisionError: division by zero")}
    assert marker.read_text().count("run") == 1
    seen = []
    run_all(jobs.square, {"a": 1, "b": 2}, ray=True, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 2), (2, 2)]
