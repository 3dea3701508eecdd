"""The local executors: a process pool gives the serial run's results, survives workers
that die, and fails an item that raises at once, with a one-line error."""

import sys

import pytest

from fusionlang.executors import Done, ExecutorUnavailable, Failed, run_all

import executor_jobs as jobs


def test_pool_results_equal_the_serial_ones():
    items = {f"k{i}": i for i in range(7)}
    serial = run_all(jobs.square, items, jobs=1)
    assert serial == {f"k{i}": Done(f"k{i}", i * i) for i in range(7)}
    assert run_all(jobs.square, items, jobs=3) == serial
    assert list(run_all(jobs.square, items, jobs=3)) == list(items)  # the caller's order


def test_an_item_that_kills_its_worker_once_is_run_again(tmp_path):
    items = {"a": (str(tmp_path / "a"), 1), "b": (str(tmp_path / "b"), 2), "c": (str(tmp_path / "c"), 3)}
    results = run_all(jobs.kill_worker_once, items, jobs=2)
    assert results == {"a": Done("a", 1), "b": Done("b", 2), "c": Done("c", 3)}


def test_an_item_that_always_kills_its_worker_fails_and_the_others_finish():
    items = {"bad": -1, "x": 1, "y": 2, "z": 3}
    results = run_all(jobs.kill_worker_always, items, jobs=2, retries=1)
    assert results["bad"] == Failed("bad", "worker died (signal 9)")
    assert [results[k] for k in "xyz"] == [Done("x", 1), Done("y", 2), Done("z", 3)]


def test_with_no_retries_the_first_death_fails_the_item(tmp_path):
    results = run_all(jobs.kill_worker_once, {"a": (str(tmp_path / "a"), 1), "b": (str(tmp_path / "b"), 2)},
                      jobs=2, retries=0)
    assert results == {"a": Failed("a", "worker died (signal 9)"), "b": Failed("b", "worker died (signal 9)")}


@pytest.mark.parametrize("jobs_count", [1, 2])
def test_an_exception_fails_the_item_at_once_on_one_line(tmp_path, jobs_count):
    marker = tmp_path / "runs"
    results = run_all(jobs.count_then_divide, {"zero": (str(marker), 0), "two": (str(marker), 2)},
                      jobs=jobs_count, retries=3)
    assert results == {"zero": Failed("zero", "ZeroDivisionError: division by zero"), "two": Done("two", 0.5)}
    assert marker.read_text().count("run") == 2  # not retried: it would raise again


def test_a_multi_line_message_keeps_its_first_line():
    assert run_all(jobs.raise_two_lines, {"k": None}, jobs=2) == {"k": Failed("k", "ValueError: first line")}


def test_progress_counts_up_to_the_total():
    seen = []
    run_all(jobs.square, {str(i): i for i in range(4)}, jobs=2, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_an_empty_batch_and_bad_arguments():
    assert run_all(jobs.square, {}, jobs=2) == {}
    with pytest.raises(ValueError, match="jobs must be at least 1"):
        run_all(jobs.square, {"a": 1}, jobs=0)
    with pytest.raises(ValueError, match="retries must be at least 0"):
        run_all(jobs.square, {"a": 1}, retries=-1)


def test_ray_missing_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if not installed
    with pytest.raises(ExecutorUnavailable, match=r"--ray needs `pip install 'fusionlang\[ray\]'`"):
        run_all(jobs.square, {"a": 1}, ray=True)
