"""Idle OpenMP threads that sleep, so that a run at threads=N survives a busy machine
(libraries whose compiler's OpenMP runtime runs them: a GCC build carries its own pool,
:mod:`.thread_pool`, and never loads libgomp).

libgomp's default wait policy spins an idle thread for about 300,000 iterations before it
sleeps, at every barrier and between parallel regions. On a machine where another process
holds a core, the spinning thread takes the time slice the working one needs: a ResNet-18
at threads=2 ran 4 to 17x slower than at one thread (issue 35). Passive waiting costs a
futex wake per region (microseconds), which the templates pay once per blocked step.

libgomp reads its wait policy once, from the environment, when it is first loaded into a
process; there is no call to change it later. So a library built with OpenMP is loaded
with ``OMP_WAIT_POLICY=passive`` in the environment for the moment of the load (and only
then: the environment the caller's children inherit is left as it was), unless

* the caller chose a policy (``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` is set): theirs holds;
* libgomp is already in the process (PyTorch loads its own copy, and a library of ours
  then binds to it by its soname): its policy is fixed, and a warning says how to change it.

No heavy imports: saved artifacts load through here without the compiler's modules.
"""
from __future__ import annotations

import contextlib
import os
import warnings

#: environment variables through which a caller chooses libgomp's waiting themselves
WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


class SpinningThreadsWarning(RuntimeWarning):
    """libgomp was loaded by someone else first, with its default (spinning) wait policy."""


class _State:
    #: whether a library of ours brought libgomp into this process (its policy is then ours)
    loaded_by_us = False
    warned = False


def libgomp_loaded() -> bool:
    """Is a libgomp mapped into this process (Linux; False where /proc is missing)?"""
    try:
        with open("/proc/self/maps", encoding="ascii", errors="replace") as maps:
            return any("libgomp" in line for line in maps)
    except OSError:
        return False


@contextlib.contextmanager
def passive_wait_while_loading(openmp: bool):
    """Around loading a compiled library: with ``openmp``, the library's libgomp starts with
    idle threads that sleep (see the module docstring for when it cannot)."""
    if not openmp or _State.loaded_by_us or any(v in os.environ for v in WAIT_VARIABLES):
        yield
        return
    if libgomp_loaded():
        _warn_spinning()
        yield
        return
    os.environ["OMP_WAIT_POLICY"] = "passive"
    try:
        yield
        _State.loaded_by_us = libgomp_loaded()
    finally:
        del os.environ["OMP_WAIT_POLICY"]


def _warn_spinning() -> None:
    if not _State.warned:
        _State.warned = True
        warnings.warn("libgomp was loaded before fusionlang's first OpenMP kernels (by PyTorch?) with its "
                      "default spinning wait, which collapses when other processes share the cores; set "
                      "OMP_WAIT_POLICY=passive before importing it", SpinningThreadsWarning, stacklevel=4)
