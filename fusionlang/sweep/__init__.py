"""A rule change measured across a model zoo: each model built with policy A and with
the baseline policy B, one row per model (kernels, global-memory bytes, groups that
differ, rules that fired, fuse and compile times, correctness against the reference
interpreter and onnxruntime, and with ``measure`` the run-time ratio A/B), a summary with
geomeans, JSON and an HTML page.

The builds are independent jobs, one per (model, policy), run by
:mod:`fusionlang.executors` (a local pool or Ray). The package sits on top of the library
with the command line: it reuses `run --check`'s seeded inputs and output comparison.
"""

from fusionlang.sweep.build import Policy
from fusionlang.sweep.driver import SweepSettings, run_sweep

__all__ = ["Policy", "SweepSettings", "run_sweep"]
