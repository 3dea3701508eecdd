"""The thread pool OpenMP libraries carry in place of libgomp (backend.thread_pool): the
OpenMP entry points GCC's kernels call, a region's members claimed so a late worker costs
nothing, barriers, nested and one-thread regions, locks; libgomp is left out of the
library (unless asked to share the process's: PyTorch's); a team as large as the cores
pins its workers, and the caller for the run only; a model at threads=2 stays
correct beside a busy process, beside another libgomp, and in a forked child."""
from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fusionlang.backend import ccompile, thread_pool

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not thread_pool.carried_by(ccompile._compiler_id(ccompile.compiler())),
                                reason="the pool implements GCC's OpenMP ABI")

#: regions as the templates write them: shared work split by member with barriers between
#: phases (the GEMM's packed panels), a worksharing loop, an if clause, a nested region,
#: a reduction the compiler locks, a critical section
REGIONS_C = r"""
#include <omp.h>
#define N 4099
static float shared_panel[N];
int phases(int rounds, float *out) {
    int bad = 0;
    #pragma omp parallel
    {
        const int team = omp_get_num_threads(), me = omp_get_thread_num();
        for (int r = 0; r < rounds; r++) {
            for (int i = me; i < N; i += team) shared_panel[i] = (float)(i + r);
            #pragma omp barrier
            for (int i = me; i < N; i += team) {  /* every element written by another member */
                int j = (i + 1) % N;
                if (shared_panel[j] != (float)(j + r)) {
                    #pragma omp atomic write
                    bad = 1;
                }
            }
            #pragma omp barrier
        }
    }
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) out[i] = shared_panel[i] * 2.0f;
    return bad;
}
#pragma omp declare reduction(fl_add : float : omp_out += omp_in) initializer(omp_priv = -0.0f)
float summed(const float *x, long n, int parallel) {
    float total = -0.0f;
    #pragma omp parallel for reduction(fl_add : total) if (parallel)
    for (long i = 0; i < n; i++) total += x[i];
    return total;
}
int nested_teams(void) {
    int inner = 0;
    #pragma omp parallel
    {
        #pragma omp parallel
        {
            #pragma omp critical
            inner += omp_get_num_threads();
        }
    }
    return inner;
}
void fl_set_threads(int n) { omp_set_num_threads(n); }
/* as phases, on the caller's own panel: two threads may run it at once */
int phases_into(int rounds, float *panel, long n) {
    int bad = 0;
    #pragma omp parallel
    {
        const int team = omp_get_num_threads(), me = omp_get_thread_num();
        for (int r = 0; r < rounds; r++) {
            for (long i = me; i < n; i += team) panel[i] = (float)(i + r);
            #pragma omp barrier
            for (long i = me; i < n; i += team)
                if (panel[(i + 1) % n] != (float)((i + 1) % n + r)) {
                    #pragma omp atomic write
                    bad = 1;
                }
            #pragma omp barrier
        }
    }
    return bad;
}
int team_size(void) {
    int size = 0;
    #pragma omp parallel
    {
        if (omp_get_thread_num() == 0) size = omp_get_num_threads();
    }
    return size;
}
"""


@pytest.fixture(scope="module")
def regions():
    path = ccompile.build_library([REGIONS_C, "int other_unit(void) { return 1; }\n"], openmp=True)
    lib = ctypes.CDLL(str(path))
    lib.summed.restype = ctypes.c_float
    lib.summed.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_int]
    lib.phases.argtypes = [ctypes.c_int, ctypes.c_void_p]
    lib.phases_into.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_long]
    return path, lib


def test_an_openmp_library_carries_the_pool_not_libgomp(regions):
    path, lib = regions
    assert not thread_pool.needs_libgomp(path.read_bytes())
    assert not hasattr(lib, "GOMP_parallel")  # hidden: binds inside the library only


@pytest.mark.parametrize("threads", [1, 2, 3, 7])
def test_barrier_phases_see_every_members_writes(regions, threads):
    import numpy as np

    _, lib = regions
    lib.fl_set_threads(threads)
    assert lib.team_size() == threads
    out = np.zeros(4099, np.float32)
    assert lib.phases(50, out.ctypes.data) == 0
    np.testing.assert_array_equal(out, (np.arange(4099) + 49) * 2.0)
    assert lib.nested_teams() == threads  # an inner region runs on its member alone


def test_a_locked_reduction_and_the_if_clause(regions):
    import numpy as np

    _, lib = regions
    lib.fl_set_threads(2)
    x = np.random.default_rng(0).standard_normal(100_003).astype(np.float32)
    for parallel in (0, 1):
        assert lib.summed(x.ctypes.data, x.size, parallel) == pytest.approx(float(x.sum(dtype=np.float64)), rel=1e-4)
    negative_zeros = np.full(64, -0.0, np.float32)
    assert str(lib.summed(negative_zeros.ctypes.data, 64, 1)) == "-0.0"


def test_two_callers_at_once_both_finish_right(regions):
    # ctypes lets go of the GIL: two Python threads run barrier regions of one library at
    # the same moment; the pool serves one, the other runs its region as a team of one
    import threading

    import numpy as np

    _, lib = regions
    lib.fl_set_threads(2)
    failures = []

    def caller():
        panel = np.zeros(2049, np.float32)
        for _ in range(200):
            if lib.phases_into(3, panel.ctypes.data, panel.size):
                failures.append("a barrier let a member read before the others wrote")
        np.testing.assert_array_equal(panel, np.arange(2049) + 2.0)

    threads = [threading.Thread(target=caller, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a caller hung"
    assert not failures


#: a conv + matmul graph at threads=2 checked against threads=1, ``runs`` times
CHILD = textwrap.dedent("""
    import os, sys, warnings
    import numpy as np
    warnings.simplefilter("error")  # a SpinningThreadsWarning fails the child
    if sys.argv[1] == "libgomp-first":
        import ctypes
        ctypes.CDLL("libgomp.so.1")
    import fusionlang
    from fusionlang.backend import omp_wait
    from fusionlang.ops import GraphBuilder
    b = GraphBuilder("threads")
    x = b.input("x", (1, 16, 48, 40))
    w = b.constant(np.random.default_rng(1).standard_normal((24, 16, 3, 3)).astype(np.float32))
    y = b.relu(b.conv(x, w, pads=(1, 1, 1, 1)))
    b.output(y)
    graph = b.build()
    plan = fusionlang.fuse(graph, "apollo")
    feeds = {"x": np.random.default_rng(2).standard_normal((1, 16, 48, 40)).astype(np.float32)}
    one = fusionlang.compile(plan, "c").run(feeds)
    two = fusionlang.compile(plan, "c", threads=2, share_libgomp=bool(os.environ.get("SHARE")))

    def check(runs):
        for _ in range(runs):
            got = two.run(feeds)
            for name in graph.outputs:
                np.testing.assert_allclose(got[name], one[name], rtol=1e-5, atol=1e-5)

    check(int(sys.argv[2]))
    if sys.argv[1] == "fork":  # the child has none of the parent's workers: it starts its own
        pid = os.fork()
        if pid == 0:
            try:
                check(3)
            except BaseException:
                os._exit(1)
            os._exit(0)
        assert os.waitpid(pid, 0)[1] == 0, "the forked child's run failed"
    if sys.argv[1] == "rest":  # after a run, idle workers sleep: their CPU time stands still
        import glob, time
        def ticks():
            total = 0
            for task in glob.glob("/proc/self/task/*"):
                if task.endswith("/" + str(os.getpid())):
                    continue  # the main thread
                fields = open(task + "/stat").read().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])
            return total
        two.run(feeds)
        before = ticks()
        time.sleep(0.5)
        print("idle ticks", ticks() - before)
    print("ok", omp_wait.libgomp_loaded())
""")


def _child(mode: str, runs: int = 1, **env) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    environ.update(PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-c", CHILD, mode, str(runs)], env=environ, capture_output=True,
                          text=True, timeout=240)


def test_threads_stay_correct_while_another_process_holds_a_core_and_libgomp_stays_out():
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        result = _child("fresh", runs=10)
    finally:
        burner.kill()
        burner.wait()
    assert result.returncode == 0 and result.stdout.split() == ["ok", "False"], result.stderr


def test_libgomp_loaded_first_by_someone_else_changes_nothing():
    result = _child("libgomp-first", runs=3)
    assert result.returncode == 0 and result.stdout.split() == ["ok", "True"], result.stderr


def test_sharing_libgomp_links_it_and_names_its_spinning_wait():
    # what the torch.compile backend asks for: PyTorch's ops and ours on libgomp's threads
    result = _child("libgomp-first", runs=1, SHARE="1")
    assert result.returncode != 0 and "SpinningThreadsWarning" in result.stderr
    assert "OMP_WAIT_POLICY=passive" in result.stderr


def test_a_forked_child_starts_its_own_workers():
    result = _child("fork", runs=2)
    assert result.returncode == 0 and result.stdout.split()[0] == "ok", result.stderr


def test_workers_that_sleep_at_once_still_finish_every_region():
    result = _child("fresh", runs=20, FUSIONLANG_SPIN_US="0")
    assert result.returncode == 0 and result.stdout.split()[0] == "ok", result.stderr


def test_workers_sleep_as_soon_as_a_run_ends():
    # a spin budget of 400 ms would keep an idle worker busy through the half second the
    # child sleeps; the driver's fl_pool_rest puts it to sleep at the run's end instead
    result = _child("rest", runs=3, FUSIONLANG_SPIN_US="400000")
    assert result.returncode == 0, result.stderr
    idle = int(result.stdout.split("idle ticks")[1].split()[0])
    assert idle <= 5, result.stdout  # clock ticks (10 ms): a spinning worker would take ~40


#: a conv (a parallel region: the caller is pinned for the run) then a gather that fails on
#: a bad index (an error return of the run); the affinities the process ends with
PIN_CHILD = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    import fusionlang
    from fusionlang.errors import InputError
    from fusionlang.ops import GraphBuilder
    cores = sorted(os.sched_getaffinity(0))
    b = GraphBuilder("pin")
    x, ids = b.input("x", (1, 16, 48, 40)), b.input("ids", (2,), "int64")
    w = b.constant(np.random.default_rng(1).standard_normal((24, 16, 3, 3)).astype(np.float32))
    b.output(b.gather(b.relu(b.conv(x, w, pads=(1, 1, 1, 1))), ids, axis=1))
    graph = b.build()
    threads = None if sys.argv[1] == "default" else len(cores)
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c", openmp=True, threads=threads)
    x = np.random.default_rng(2).standard_normal((1, 16, 48, 40)).astype(np.float32)
    if sys.argv[1] == "narrowed":  # the caller's owner chose its core: the run keeps it there
        os.sched_setaffinity(0, {cores[-1]})
    got = compiled.run({"x": x, "ids": np.array([0, 23])})[graph.outputs[0]]
    want = fusionlang.reference.run(graph, {"x": x, "ids": np.array([0, 23])})[graph.outputs[0]]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    after_run = sorted(os.sched_getaffinity(0))
    try:
        compiled.run({"x": x, "ids": np.array([0, 24])})
        raise SystemExit("the bad index was not refused")
    except InputError:
        pass
    tasks = os.listdir("/proc/self/task")
    workers = {t: sorted(os.sched_getaffinity(int(t))) for t in tasks
               if open(f"/proc/self/task/{t}/comm").read().startswith("fl-pool")}
    print(json.dumps({"cores": cores, "after_run": after_run, "after_error": sorted(os.sched_getaffinity(0)),
                      "workers": sorted(workers.values())}))
""")


def _pin_child(mode: str, **env) -> dict:
    # the team as large as the cores: no OMP_NUM_THREADS (bench modules that tests import
    # set it to 1 for the whole session) and no pinning choice but the test's own
    environ = {k: v for k, v in os.environ.items() if k != "FUSIONLANG_PIN" and not k.startswith(("OMP_", "GOMP_"))}
    environ.update(PYTHONPATH=str(ROOT), **env)
    result = subprocess.run([sys.executable, "-c", PIN_CHILD, mode], env=environ, capture_output=True, text=True,
                            timeout=240)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


needs_two_cores = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning needs two cores")


@needs_two_cores
@pytest.mark.parametrize("mode", ["default", "explicit"])
def test_a_team_of_every_core_pins_each_worker_to_its_own_and_gives_the_caller_its_cores_back(mode):
    # FUSIONLANG_PIN=1: pinned whatever else runs (unset, a run starts pinned only when
    # nothing else on the machine is runnable: other tests' processes would decide)
    got = _pin_child(mode, FUSIONLANG_PIN="1")
    cores = got["cores"]
    # member 0 (the caller, during a run) on the first core, worker i on the i-th
    assert got["workers"] == [[core] for core in cores[1:]]
    assert got["after_run"] == cores and got["after_error"] == cores  # an error return too


@needs_two_cores
def test_pinning_can_be_turned_off():
    got = _pin_child("default", FUSIONLANG_PIN="0")
    assert got["workers"] == [got["cores"]] * (len(got["cores"]) - 1)


@needs_two_cores
def test_a_run_that_starts_beside_a_busy_process_runs_unpinned():
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        got = _pin_child("default")
    finally:
        burner.kill()
        burner.wait()
    assert got["workers"] == [got["cores"]] * (len(got["cores"]) - 1)
    assert got["after_run"] == got["cores"] and got["after_error"] == got["cores"]


@needs_two_cores
def test_a_caller_whose_owner_chose_its_core_stays_there():
    got = _pin_child("narrowed", FUSIONLANG_PIN="1")
    assert got["after_run"] == [got["cores"][-1]] and got["after_error"] == [got["cores"][-1]]
