"""OpenMP builds load with idle threads that sleep (backend.omp_wait), and a threads=2 run
stays correct while another process holds a core. Each case runs in a fresh interpreter:
libgomp reads its wait policy once per process, and this one may have loaded it already."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: compiles a conv + matmul graph at threads=2 and checks it against threads=1
CHILD = textwrap.dedent("""
    import sys, warnings
    import numpy as np
    warnings.simplefilter("error")  # a SpinningThreadsWarning fails the child
    if sys.argv[1] == "libgomp-first":
        import ctypes
        ctypes.CDLL("libgomp.so.1")
    import fusionlang
    from fusionlang.ops import GraphBuilder
    b = GraphBuilder("threads")
    x = b.input("x", (1, 5, 19, 17))
    w = b.constant(np.random.default_rng(1).standard_normal((7, 5, 3, 3)).astype(np.float32))
    y = b.relu(b.conv(x, w, pads=(1, 1, 1, 1)))
    b.output(y)
    graph = b.build()
    plan = fusionlang.fuse(graph, "apollo")
    feeds = {"x": np.random.default_rng(2).standard_normal((1, 5, 19, 17)).astype(np.float32)}
    one = fusionlang.compile(plan, "c").run(feeds)
    two = fusionlang.compile(plan, "c", threads=2)
    for _ in range(int(sys.argv[2])):
        got = two.run(feeds)
        for name in graph.outputs:
            np.testing.assert_allclose(got[name], one[name], rtol=1e-5, atol=1e-5)
    print("ok")
""")


def _child(mode: str, runs: int = 1, **env) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    environ.update(PYTHONPATH=str(ROOT), OMP_DISPLAY_ENV="verbose", **env)
    return subprocess.run([sys.executable, "-c", CHILD, mode, str(runs)], env=environ, capture_output=True,
                          text=True, timeout=240)


def test_openmp_kernels_load_with_a_passive_wait_and_stay_correct_while_another_process_holds_a_core():
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        result = _child("fresh", runs=10)
    finally:
        burner.kill()
        burner.wait()
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
    # libgomp prints its settings once, when it loads: passive waiting is a spin count of 0
    assert "GOMP_SPINCOUNT = '0'" in result.stderr, result.stderr


def test_a_policy_the_caller_chose_is_kept():
    result = _child("fresh", OMP_WAIT_POLICY="active")
    assert result.returncode == 0, result.stderr
    assert "OMP_WAIT_POLICY = 'ACTIVE'" in result.stderr


def test_libgomp_loaded_first_by_someone_else_is_named_in_a_warning():
    result = _child("libgomp-first")
    assert result.returncode != 0 and "SpinningThreadsWarning" in result.stderr
    assert "OMP_WAIT_POLICY=passive" in result.stderr


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

