"""The thread pool OpenMP libraries carry in place of libgomp (GCC builds).

Generated kernels keep their ``omp parallel`` pragmas; GCC turns each region into a call
of ``GOMP_parallel`` and its barriers into ``GOMP_barrier``. A library built with OpenMP
links :file:`c/thread_pool.c`, which defines those entry points (hidden, so they bind
inside the library and nowhere else) with a pool whose behaviour suits a run of many
short regions on a machine others may share (issue 35, measured on a 2-core VM):

* libgomp's passive wait made every region wake a sleeping thread (about 50 us here), so
  MobileNetV2 ran slower on two threads than on one (12.5 ms against 8.5); its default
  spinning made a ResNet-18 4 to 17 times slower when another process held a core;
* in this pool the caller runs its own member of a region and then every member no worker
  has claimed, so a worker that wakes late costs nothing; waiting threads spin for up to
  1 ms (``FUSIONLANG_SPIN_US``; each thread halves its own budget when a spin runs out, as
  on a loaded machine, and doubles it when one ends in the event), then sleep on a
  futex, so a run wakes its workers once, not once per kernel; when a run ends the driver
  calls ``fl_pool_rest`` and idle workers sleep at once, giving the cores back to the
  caller's code (and to other runtimes interleaved with ours);
* a team as large as the cores the process may use pins worker i to the i-th core and,
  for the run only, the caller to the first (``FUSIONLANG_PIN``: ``1`` always, ``0``
  never; unset, a run starts pinned only when nothing else on the machine is runnable, as
  ``/proc/loadavg`` counts, since a pinned thread cannot flee a core another process holds).
  Unpinned, after an idle gap the kernel woke the worker on the caller's core (the VM's
  other core given to someone else meanwhile) and the two took turns there: a GPT-2-like
  model at two threads took 4.6 ms after 10 ms idle and 7.4 after 50, against 2.3 back to
  back; pinned, 2.2 and 2.9. Workers are named ``fl-pool-<i>``.

The torch.compile backend compiles with ``share_libgomp=True``: its kernels run between
PyTorch's ops, whose libgomp threads spin after each; two pools on the same cores would take
turns spinning against each other, so there the library links libgomp and shares its
threads. Other compilers (clang and its libomp) keep their OpenMP runtime too; :mod:`.omp_wait`
asks such a runtime for the passive wait where it can.
"""
from __future__ import annotations

from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=None)
def source() -> str:
    """The pool's C source: its own translation unit in every OpenMP library."""
    return (resources.files("fusionlang.backend") / "c" / "thread_pool.c").read_text(encoding="utf-8")


def carried_by(compiler_id: str) -> bool:
    """Does a library built by this compiler (its ``--version`` line) carry the pool?
    GCC's OpenMP ABI is the one it implements; clang's calls ``__kmpc_*``."""
    return "clang" not in compiler_id.lower()


def needs_libgomp(library: bytes) -> bool:
    """Does this shared library load libgomp (its dynamic section names it)?"""
    return b"libgomp.so" in library


__all__ = ["carried_by", "needs_libgomp", "source"]
