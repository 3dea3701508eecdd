"""The random-graph equivalence campaign (fusionlang.testing.campaign, `fusionlang
campaign`): shards drawn by seed, the same verdicts on any executor, a shard whose
worker is killed re-run, mismatches reported with a reproducer."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from fusionlang.cli import main
from fusionlang.ir.printer import format_graph
from fusionlang.testing.campaign import CampaignShard, plan, run_campaign, run_shard, shard_seed
from fusionlang.testing.graphgen import COMPOUND_FAMILIES, sample_graphs


def test_shards_cover_the_graphs_with_seeds_of_their_own():
    shards = plan(450, seed=3, shard_graphs=200)
    assert [s.graphs for s in shards] == [200, 200, 50]
    assert [s.seed for s in shards] == [shard_seed(3, k) for k in range(3)]
    other = plan(450, seed=4, shard_graphs=200)
    assert not {s.seed for s in shards} & {s.seed for s in other}
    assert plan(450, seed=3, shard_graphs=200) == shards
    assert {(s.strategy, s.rules) for s in plan(10, strategy="dp")} == {("dp", "dnnfusion")}


def test_a_rule_file_named_relatively_reaches_workers_elsewhere(tmp_path, monkeypatch):
    (tmp_path / "mine.fuse").write_text('import "apollo.fuse"\n')
    monkeypatch.chdir(tmp_path)
    (shard,) = plan(3, rules="mine.fuse")
    assert shard.rules == str(tmp_path / "mine.fuse")


@dataclass(frozen=True)
class KillOnce:
    """A test hook around run_shard: the worker running shard ``shard`` kills itself
    (SIGKILL) the first time, marked by the file ``mark``, so the executor must re-run it."""

    shard: int
    mark: str

    def __call__(self, shard: CampaignShard):
        if shard.index == self.shard and not os.path.exists(self.mark):
            Path(self.mark).touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return run_shard(shard)


def test_a_killed_shard_is_rerun_and_the_campaign_gives_the_serial_verdicts(tmp_path, wrong_rules):
    serial = run_campaign(4, seed=1, rules=wrong_rules, shard_graphs=2, jobs=1)
    hook = KillOnce(1, str(tmp_path / "killed"))
    pooled = run_campaign(4, seed=1, rules=wrong_rules, shard_graphs=2, jobs=2, worker=hook)
    assert (tmp_path / "killed").exists()  # the worker did die
    assert pooled.lost == {} and pooled.counts()["checked"] == 4
    assert serial.mismatches  # (a campaign with findings: they must come back the same)
    assert pooled.findings == serial.findings and pooled.counts() == serial.counts()


def _fails(shard: CampaignShard):
    raise RuntimeError(f"cannot check shard {shard.index}")


def test_a_shard_that_never_answers_is_reported_lost_not_passed():
    report = run_campaign(4, seed=2, shard_graphs=2, jobs=1, worker=_fails)
    assert report.lost == {0: "RuntimeError: cannot check shard 0", 1: "RuntimeError: cannot check shard 1"}
    assert not report.ok and report.counts()["checked"] == 0 and "2 lost shards" in report.summary()


@pytest.fixture(scope="module")
def wrong_rules(tmp_path_factory):
    path = tmp_path_factory.mktemp("campaign") / "wrong.fuse"
    path.write_text(textwrap.dedent("""\
        import "apollo.fuse"

        # wrong unless y is 0
        rewrite add_is_sub:
            add(x, y) => sub(x, y)
        """))
    return str(path)


def test_a_mismatch_exits_1_with_a_reproducer_that_draws_the_graph(capsys, wrong_rules):
    status = main(["--json", "campaign", "--graphs", "8", "--shard-graphs", "4", "--seed", "1",
                   "--rules", wrong_rules, "--jobs", "1"])
    report = json.loads(capsys.readouterr().out)
    assert status == 1 and not report["ok"] and report["mismatches"] >= 1
    assert all(shard["cpu_seconds"] > 0 for shard in report["shards"])
    finding = next(f for f in report["findings"] if f["stage"] == "compare")
    assert "outputs differ" in finding["message"] and "add" in finding["graph"]
    graph = sample_graphs(finding["size"], seed=finding["seed"], min_nodes=3, max_nodes=10,
                          families=COMPOUND_FAMILIES)[finding["index"]]
    assert format_graph(graph) == finding["graph"]
    assert f"seed={finding['seed']}" in finding["reproducer"]


def test_the_summary_line_and_exit_0(capsys):
    assert main(["campaign", "--graphs", "2", "--seed", "7", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert re.fullmatch(r"campaign of 2 graphs \(1 shards, strategy apollo, rules apollo, seed 7\): 2 checked, "
                        r"2 equivalent, 0 mismatches, 0 crashes, 0 skipped, 0 lost shards "
                        r"\([0-9.]+ s, [0-9.]+ s CPU\)\n", out)


@pytest.mark.parametrize("argv,message", [
    (["--jobs", "0"], "argument --jobs: the job count must be from 1 to 4096, got '0'"),
    (["--graphs", "0"], "argument --graphs: the graph count must be from 1 to 1000000000, got '0'"),
    (["--strategy", "tvm", "--rules", "apollo"], "--strategy: 'tvm' is not a strategy of apollo (it has: apollo)"),
])
def test_bad_flags_are_one_line_exit_2(capsys, argv, message):
    assert main(["campaign", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fusionlang: error: {message}") and err.count("\n") == 1


def test_the_module_runs_as_the_command():
    proc = subprocess.run([sys.executable, "-m", "fusionlang.testing.campaign", "--graphs", "0"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == ("fusionlang: error: argument --graphs: the graph count must be from 1 to 1000000000, "
                           "got '0' (see fusionlang campaign --help)\n")


@pytest.mark.ray
def test_ray_gives_the_serial_findings(capsys, wrong_rules):
    ray = pytest.importorskip("ray")
    from fusionlang.executors.on_ray import start_local_cluster

    argv = ["--json", "campaign", "--graphs", "8", "--shard-graphs", "4", "--seed", "1", "--rules", wrong_rules]
    serial_status = main([*argv, "--jobs", "1"])
    serial = json.loads(capsys.readouterr().out)
    start_local_cluster(2)  # the command uses the connection already open
    try:
        status = main([*argv, "--ray"])
    finally:
        ray.shutdown()
    on_ray = json.loads(capsys.readouterr().out)
    assert status == serial_status == 1 and serial["findings"]
    assert on_ray["findings"] == serial["findings"]
    counts = ("checked", "equivalent", "mismatches", "crashes", "skipped", "lost_shards")
    assert [on_ray[c] for c in counts] == [serial[c] for c in counts]
