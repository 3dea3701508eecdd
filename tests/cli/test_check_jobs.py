"""`fusionlang check --jobs N | --ray`: one job per rule on worker processes or a Ray
cluster, with the verdicts, counterexamples and output of a serial run."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import textwrap

import pytest

from fusionlang.cli import main
from fusionlang.executors import Failed

RULES = textwrap.dedent("""\
    rewrite drop_double_neg:
        neg(neg(x)) => x

    rewrite exp_of_sum:
        exp(add(x, y)) => add(exp(x), exp(y))

    rewrite drop_identity: identity(x) => x

    test drops_identity {
        input x: f32[3]
        y = exp(identity(x))
        output y
        expect fired(drop_identity) == 1
    }

    test counts_wrong {
        input x: f32[3]
        y = identity(x)
        output y
        expect fired(drop_identity) == 2
    }
    """)

#: a passing and a failing rewrite, a passing and a failing test block; each rewrite
#: under seeds 5 and 6 (a job per rule and seed)
ARGS = ["--examples", "8", "--budget", "2", "--kinds", "rewrite,test", "--seed", "5", "--seeds", "2"]


@pytest.fixture(scope="module")
def rules(tmp_path_factory):
    path = tmp_path_factory.mktemp("jobs") / "mixed.fuse"
    path.write_text(RULES)
    return str(path)


def _run(capsys, *argv) -> tuple[int, str]:
    status = main(list(argv))
    return status, capsys.readouterr().out


def _without_times(document: dict) -> dict:
    """The JSON report less its seconds, which are timings and differ between any two runs."""
    if isinstance(document, dict):
        return {k: _without_times(v) for k, v in document.items() if k != "seconds"}
    if isinstance(document, list):
        return [_without_times(v) for v in document]
    return document


def _both_outputs(rules, *executor):
    """(status, text, status, JSON less timings) of a check of ``rules``."""
    outputs = []
    for argv in (["check", rules, *ARGS, *executor], ["--json", "check", rules, *ARGS, *executor]):
        with contextlib.redirect_stdout(io.StringIO()) as out:
            outputs.append(main(argv))
        outputs.append(out.getvalue())
    outputs[3] = _without_times(json.loads(outputs[3]))
    return tuple(outputs)


@pytest.fixture(scope="module")
def serial(rules):
    return _both_outputs(rules)


def test_the_serial_run_has_passing_and_failing_rules(serial):
    text_status, text, json_status, _ = serial
    assert text_status == json_status == 1
    assert "exp_of_sum: failed" in text and "drop_double_neg: proved" in text
    assert "test mixed.fuse::counts_wrong: failed" in text and "test mixed.fuse::drops_identity: checked" in text
    assert text.rstrip().endswith("1 file(s), 8 verdict(s) under 2 seeds: 4 proved, 1 checked, 0 under-covered, "
                                  "3 failed, 0 skipped")


def test_each_seed_of_several_gives_the_verdicts_of_that_seed_alone(rules, serial):
    by_seed = {}
    for check in serial[3]["reports"][0]["checks"]:
        if check["kind"] == "rewrite":
            by_seed.setdefault(check["coverage"]["seed"], []).append(check)
    assert sorted(by_seed) == [5, 6]
    for seed, checks in by_seed.items():
        alone = ["--examples", "8", "--budget", "2", "--kinds", "rewrite", "--seed", str(seed)]
        with contextlib.redirect_stdout(io.StringIO()) as out:
            main(["--json", "check", rules, *alone])
        assert _without_times(json.loads(out.getvalue()))["reports"][0]["checks"] == checks


def test_jobs_2_gives_the_serial_verdicts_and_output(rules, serial):
    assert _both_outputs(rules, "--jobs", "2") == serial


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster of 2 CPUs (the executor uses a connection already open); its
    workers import this checkout."""
    ray = pytest.importorskip("ray")
    from fusionlang.executors.on_ray import start_local_cluster

    start_local_cluster(2)
    yield
    ray.shutdown()


@pytest.mark.ray
def test_ray_gives_the_serial_verdicts(rules, serial, ray_cluster):
    # the JSON only: the text is printed from the same merged verdicts (the pool test checks it)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert main(["--json", "check", rules, *ARGS, "--ray"]) == serial[2]
    assert _without_times(json.loads(out.getvalue())) == serial[3]


def test_a_rule_whose_job_never_answers_fails(capsys, rules, monkeypatch):
    from fusionlang.cli import check

    def lose_the_failing_rule(fn, items, args):
        return {key: Failed(key, "worker died (signal 9)") if "exp_of_sum" in key else _done(key, fn(item))
                for key, item in items.items()}

    monkeypatch.setattr(check, "run_jobs", lose_the_failing_rule)
    status, out = _run(capsys, "check", rules, *ARGS, "--kinds", "rewrite", "--jobs", "2")
    assert status == 1
    assert "rewrite exp_of_sum: failed\n    the check did not finish: worker died (signal 9)" in out
    assert "drop_double_neg: proved" in out


def _done(key, value):
    from fusionlang.executors import Done

    return Done(key, value)


@pytest.mark.parametrize("argv,message", [
    (["--jobs", "0"], "argument --jobs: the job count must be from 1 to 4096, got '0'"),
    (["--jobs", "two"], "argument --jobs: the job count must be an integer, got 'two'"),
    (["--jobs", "2", "--ray", "10.0.0.1:6379"],
     "--jobs sets the CPUs of a local Ray cluster; the cluster at an ADDRESS has its own"),
    (["--seeds", "0"], "argument --seeds: the seed count must be from 1 to 100000, got '0'"),
    (["--seed", "4294967295", "--seeds", "2"], "--seeds: the last seed, 4294967296, is past 4294967295"),
])
def test_bad_executor_flags_are_one_line_exit_2(capsys, rules, argv, message):
    assert main(["check", rules, *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fusionlang: error: {message}") and err.count("\n") == 1


def test_ray_without_ray_installed_is_one_line_exit_2(capsys, rules, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if the extra were not installed
    assert main(["check", rules, *ARGS, "--ray"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == ("fusionlang: error: --ray: Ray is not installed (pip install 'fusionlang[ray]', "
                            "or use --jobs N)\n")


def test_a_worker_elsewhere_names_rules_as_the_caller_does(tmp_path, monkeypatch):
    # a Ray worker runs in a directory of its own: a file the caller names relatively
    # must keep its name, or its rules' keys would match nothing and go unchecked
    from fusionlang.lang import clear_caches, load_rules
    from fusionlang.testing.checkshards import CheckOptions, check_shard, plan_shards

    (tmp_path / "caller").mkdir()
    (tmp_path / "caller" / "r.fuse").write_text("rewrite drop: identity(x) => x\n")
    monkeypatch.chdir(tmp_path / "caller")
    (shard,) = plan_shards(["r.fuse"], [load_rules("r.fuse")], ["rewrite"], None, CheckOptions(max_examples=5))
    monkeypatch.chdir(tmp_path)
    clear_caches()  # a fresh worker has parsed nothing
    (check,) = check_shard(shard)
    assert check.where == "r.fuse:1" and check.status == "proved"


def test_a_rule_the_worker_cannot_find_fails_its_shard(tmp_path):
    from fusionlang.errors import FuseError
    from fusionlang.lang import load_rules
    from fusionlang.testing.checkshards import CheckOptions, check_shard, plan_shards

    path = tmp_path / "r.fuse"
    path.write_text("rewrite drop: identity(x) => x\n")
    (shard,) = plan_shards([str(path)], [load_rules(str(path))], ["rewrite"], None, CheckOptions(max_examples=5))
    path.write_text("\nrewrite drop: identity(x) => x\n")  # the worker's copy differs
    with pytest.raises(FuseError, match=r"found no rewrite drop at .*r\.fuse:1 \(is the rule file the same"):
        check_shard(shard)


def test_a_test_block_shared_by_two_files_runs_once(tmp_path, capsys):
    (tmp_path / "base.fuse").write_text(RULES)
    user = tmp_path / "user.fuse"
    user.write_text('import "base.fuse"\nrewrite r: identity(x) => x\n')
    status, out = _run(capsys, "check", str(tmp_path / "base.fuse"), str(user), "--kinds", "test")
    assert status == 1 and out.count("test base.fuse::drops_identity: checked") == 1 and out.count("counts_wrong") == 1


def test_a_library_name_travels_as_a_name(tmp_path, monkeypatch):
    # "apollo.fuse" names the shipped file, not one in the caller's directory
    from fusionlang.lang import load_rules
    from fusionlang.testing.checkshards import CheckOptions, check_shard, plan_shards

    monkeypatch.chdir(tmp_path)
    shards = plan_shards(["apollo.fuse"], [load_rules("apollo.fuse")], ["fuse"], None, CheckOptions())
    assert {shard.source for shard in shards} == {"apollo.fuse"}
    (check,) = check_shard(shards[0])
    assert check.kind == "fuse" and check.where.startswith("apollo.fuse:")
