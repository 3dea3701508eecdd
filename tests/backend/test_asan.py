"""Compiled C kernels run clean under AddressSanitizer.

ctypes loads the instrumented kernels into Python, so the ASan runtime must be preloaded:
each check runs in a subprocess with ``LD_PRELOAD=<libasan>`` and fails on any report.
The default suite checks small graphs covering every kind of access (padded windows,
strided convs, gathers with negative indices, concat, local row buffers); set
``FUSIONLANG_TEST_ASAN=1`` to also run the nine light models (several minutes).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from light import LIGHT_MODELS

from fusionlang.backend.ccompile import asan_runtime

HERE = Path(__file__).resolve().parent
LIBASAN = asan_runtime()
pytestmark = pytest.mark.skipif(LIBASAN is None, reason="the C compiler has no AddressSanitizer runtime")


def run_child(*args: str, timeout: int = 1800) -> None:
    env = dict(os.environ, LD_PRELOAD=LIBASAN, ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:exitcode=23",
               PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(HERE / "asan_child.py"), *args], env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=HERE)
    report = proc.stdout[-3000:] + proc.stderr[-6000:]
    assert "AddressSanitizer" not in proc.stderr, report
    assert proc.returncode == 0 and "asan-clean" in proc.stdout, report


def test_asan_catches_an_out_of_bounds_write():
    with pytest.raises(AssertionError, match="heap-buffer-overflow"):
        run_child("canary")


def test_small_graphs_run_clean_under_asan():
    run_child("small")


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("FUSIONLANG_TEST_ASAN"), reason="set FUSIONLANG_TEST_ASAN=1 to run")
@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_model_kernels_run_clean_under_asan(name):
    run_child(name)
