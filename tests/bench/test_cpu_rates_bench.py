"""bench/cpu_rates.py times what it says: each workload's groups are priced as its kind by
the cost model and run as that kind of kernel by the C backend (prepare() exits otherwise),
and every kind the cost model knows has workloads."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import cpu_rates  # noqa: E402
from fusionlang.engine.kernel_kind import KINDS  # noqa: E402

#: the first workload of each kind
FIRST = {w.kind: w for w in reversed(cpu_rates.WORKLOADS)}


def test_every_kind_has_workloads():
    assert set(FIRST) == set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_a_workload_runs_as_its_kind_and_is_timed(kind):
    prepared = cpu_rates.prepare(FIRST[kind])
    assert prepared.flops > 0 and prepared.repeat >= 1
    seconds = cpu_rates.measure([prepared], rounds=1)
    assert seconds[FIRST[kind].name] > 0


def test_a_workload_of_another_kind_is_refused():
    dense = next(w for w in cpu_rates.WORKLOADS if w.kind == "dense")
    with pytest.raises(SystemExit, match="prices its groups as \\['dense'\\], not depthwise"):
        cpu_rates.prepare(cpu_rates.Workload(dense.name, "depthwise", dense.build))
