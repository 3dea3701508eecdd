"""The random-graph equivalence campaign, fanned out by seed: ``fusionlang campaign``
(or ``python -m fusionlang.testing.campaign``, the same command).

The graphs are those of tests/testing/test_equivalence.py (``sample_graphs`` with
compound ops, 3 to 10 growth steps), checked end to end by
:func:`check_equivalence_many`. A campaign of N graphs is cut into shards of
``shard_graphs`` graphs; shard k draws its graphs with its own seed,
:func:`shard_seed` (campaign seed, k), so which graphs are checked depends on the
campaign seed, N and the shard size only, never on how many workers ran the shards or
where. A shard is data (a few numbers and the rule set's name or path): each worker
draws its graphs and parses its rules itself.

Each shard reports the graphs it checked, those that were equivalent, and every other
verdict as a :class:`Finding` with its reproducer: the shard's seed, its size and the
graph's index in it (``sample_graphs(size, seed=...)[index]``, fed
``feeds_for(graph, index)``), and the graph printed. The draws use no hypothesis example
database: every graph is named by its seed and index, and replaying saved examples first
would change which graphs a seed names.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field
from typing import Callable, cast

from fusionlang.executors import Done, run_all
from fusionlang.ir.printer import format_graph
from fusionlang.lang import load_rules
from fusionlang.testing.equivalence import Equivalence, check_equivalence_many
from fusionlang.testing.graphgen import COMPOUND_FAMILIES, sample_graphs

#: strategy -> the rule set it is checked with (as the equivalence tests pair them)
STRATEGY_RULES = {"apollo": "apollo", "tvm": "tvm", "dp": "dnnfusion"}
#: graphs per shard, unless asked otherwise: a few compiled modules' worth
SHARD_GRAPHS = 200
#: graphs per compiled module (check_equivalence_many's batch)
BATCH = 60
#: shards a campaign may have: shard seeds of different campaign seeds never meet
MAX_SHARDS = 2**20
MIN_NODES, MAX_NODES = 3, 10


def shard_seed(seed: int, index: int) -> int:
    """The draw seed of shard ``index`` of the campaign with ``seed``."""
    return seed * MAX_SHARDS + index


@dataclass(frozen=True)
class CampaignShard:
    """One job: ``graphs`` graphs drawn with ``seed``, checked with ``strategy`` and
    ``rules`` (a library name or a path)."""

    index: int
    seed: int
    graphs: int
    strategy: str
    rules: str
    batch: int = BATCH

    @property
    def label(self) -> str:
        return f"shard {self.index}"

    def draw(self):
        return sample_graphs(self.graphs, seed=self.seed, min_nodes=MIN_NODES, max_nodes=MAX_NODES,
                             families=COMPOUND_FAMILIES)


@dataclass(frozen=True)
class Finding:
    """A graph that was not shown equivalent: the stage that failed, why, and how to
    draw the graph again (``index`` None: a batch that failed while each of its graphs
    passed alone; ``graph`` is then the batch)."""

    shard: int
    seed: int
    size: int
    index: int | None
    stage: str
    message: str
    graph: str

    @property
    def is_mismatch(self) -> bool:
        return self.stage == "compare"

    def reproducer(self) -> str:
        if self.index is None:
            return f"a batch of shard {self.shard} (seed {self.seed}); every graph in it passed alone"
        return (f"graph = sample_graphs({self.size}, seed={self.seed}, min_nodes={MIN_NODES}, "
                f"max_nodes={MAX_NODES}, families=COMPOUND_FAMILIES)[{self.index}]; "
                f"feeds = feeds_for(graph, {self.index})")

    def __str__(self) -> str:
        where = f"shard {self.shard} graph {self.index}" if self.index is not None else f"shard {self.shard} batch"
        return "\n".join([f"{where}: {self.message}", "    reproduce: " + self.reproducer()]
                         + ["    " + line for line in self.graph.splitlines()])

    def to_dict(self) -> dict:
        return {"shard": self.shard, "seed": self.seed, "size": self.size, "index": self.index,
                "stage": self.stage, "message": self.message, "reproducer": self.reproducer(), "graph": self.graph}


@dataclass
class ShardResult:
    index: int
    seed: int
    graphs: int
    equivalent: int
    #: graphs the reference interpreter itself cannot run (no verdict on fusion)
    skipped: int
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0
    #: CPU time, the compiler's included: what the shard costs on an idle core
    cpu_seconds: float = 0.0

    def to_dict(self) -> dict:
        return {"index": self.index, "seed": self.seed, "graphs": self.graphs, "equivalent": self.equivalent,
                "skipped": self.skipped, "findings": [f.to_dict() for f in self.findings],
                "seconds": round(self.seconds, 3), "cpu_seconds": round(self.cpu_seconds, 3)}


def plan(graphs: int, *, seed: int = 0, strategy: str = "apollo", rules: str | None = None,
         shard_graphs: int = SHARD_GRAPHS) -> list[CampaignShard]:
    """The shards of a campaign of ``graphs`` graphs (the last one may be smaller)."""
    rules = rules or STRATEGY_RULES.get(strategy, strategy)
    if rules.endswith(".fuse") and os.path.isfile(rules):
        rules = os.path.abspath(rules)  # a worker may run in another directory (a Ray worker does)
    count = -(-graphs // shard_graphs)
    if count > MAX_SHARDS:
        raise ValueError(f"{count} shards is more than {MAX_SHARDS}: use larger shards")
    return [CampaignShard(k, shard_seed(seed, k), min(shard_graphs, graphs - k * shard_graphs), strategy, rules)
            for k in range(count)]


def _finding(shard: CampaignShard, index: int | None, verdict: Equivalence) -> Finding:
    return Finding(shard.index, shard.seed, shard.graphs, index, verdict.stage or "compare",
                   str(verdict).split(": ", 1)[-1], format_graph(verdict.graph))


def _cpu_seconds() -> float:
    """CPU time of this process and of the children it waited for (the C compiler runs)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def run_shard(shard: CampaignShard) -> ShardResult:
    """Draw the shard's graphs and check each end to end."""
    started, cpu_started = time.perf_counter(), _cpu_seconds()
    graphs = shard.draw()
    verdicts = check_equivalence_many(graphs, load_rules(shard.rules), shard.strategy, batch=shard.batch)
    per_graph, batches = verdicts[:len(graphs)], verdicts[len(graphs):]
    result = ShardResult(shard.index, shard.seed, len(per_graph), sum(v.ok for v in per_graph),
                         sum(v.stage == "reference" for v in per_graph))
    result.findings = ([_finding(shard, k, v) for k, v in enumerate(per_graph) if not v.ok and v.stage != "reference"]
                       + [_finding(shard, None, v) for v in batches])
    result.seconds = time.perf_counter() - started
    result.cpu_seconds = _cpu_seconds() - cpu_started
    return result


@dataclass
class CampaignReport:
    strategy: str
    rules: str
    seed: int
    requested: int
    shards: list[ShardResult] = field(default_factory=list)
    #: shards that never answered (past the executor's re-runs): index -> error
    lost: dict[int, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def findings(self) -> list[Finding]:
        return [f for shard in self.shards for f in shard.findings]

    @property
    def mismatches(self) -> list[Finding]:
        return [f for f in self.findings if f.is_mismatch]

    @property
    def ok(self) -> bool:
        return not self.findings and not self.lost

    def counts(self) -> dict[str, int]:
        return {"graphs": self.requested, "checked": sum(s.graphs for s in self.shards),
                "equivalent": sum(s.equivalent for s in self.shards),
                "mismatches": len(self.mismatches), "crashes": len(self.findings) - len(self.mismatches),
                "skipped": sum(s.skipped for s in self.shards), "lost shards": len(self.lost)}

    def summary(self) -> str:
        counts = self.counts()
        return (f"campaign of {counts['graphs']} graphs ({len(self.shards) + len(self.lost)} shards, strategy "
                f"{self.strategy}, rules {self.rules}, seed {self.seed}): {counts['checked']} checked, "
                f"{counts['equivalent']} equivalent, {counts['mismatches']} mismatches, {counts['crashes']} crashes, "
                f"{counts['skipped']} skipped, {counts['lost shards']} lost shards ({self.seconds:.1f} s, "
                f"{sum(s.cpu_seconds for s in self.shards):.1f} s CPU)")

    def to_dict(self) -> dict:
        return {"ok": self.ok, "strategy": self.strategy, "rules": self.rules, "seed": self.seed,
                **{k.replace(" ", "_"): v for k, v in self.counts().items()},
                "findings": [f.to_dict() for f in self.findings], "shards": [s.to_dict() for s in self.shards],
                "lost": {str(k): v for k, v in self.lost.items()}, "seconds": round(self.seconds, 3),
                "cpu_seconds": round(sum(s.cpu_seconds for s in self.shards), 3)}


def run_campaign(graphs: int, *, seed: int = 0, strategy: str = "apollo", rules: str | None = None,
                 shard_graphs: int = SHARD_GRAPHS, jobs: int | None = 1, ray: str | bool | None = None,
                 worker: Callable[[CampaignShard], ShardResult] = run_shard,
                 progress: Callable[[int, int], None] | None = None) -> CampaignReport:
    """Check ``graphs`` random graphs, one job per shard on the executor ``jobs`` / ``ray``
    name (:func:`fusionlang.executors.run_all`; a shard whose worker dies is re-run).
    ``worker`` runs one shard (a picklable wrapper of :func:`run_shard`)."""
    started = time.perf_counter()
    shards = plan(graphs, seed=seed, strategy=strategy, rules=rules, shard_graphs=shard_graphs)
    outcomes = run_all(worker, {shard.label: shard for shard in shards}, jobs=jobs, ray=ray, progress=progress)
    report = CampaignReport(strategy, shards[0].rules if shards else rules or strategy, seed, graphs)
    for shard in shards:
        outcome = outcomes[shard.label]
        if isinstance(outcome, Done):
            report.shards.append(cast(ShardResult, outcome.value))
        else:
            report.lost[shard.index] = outcome.error
    report.seconds = time.perf_counter() - started
    return report


__all__ = ["BATCH", "CampaignReport", "CampaignShard", "Finding", "SHARD_GRAPHS", "STRATEGY_RULES", "ShardResult",
           "plan", "run_campaign", "run_shard", "shard_seed"]


if __name__ == "__main__":  # python -m fusionlang.testing.campaign ARGS: `fusionlang campaign ARGS`
    import sys

    from fusionlang.cli import main

    sys.exit(main(["campaign", *sys.argv[1:]]))
