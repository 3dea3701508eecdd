"""Where a batch of independent jobs runs: in this process, on a local process pool, or
on a Ray cluster.

``run_all(fn, items)`` calls ``fn(item)`` for every item and returns each key's
:class:`Done` (the value) or :class:`Failed` (a one-line error). A worker that dies does
not lose the batch; an exception ``fn`` raises fails its item at once, since it would
raise again. The package imports nothing from the rest of fusionlang: anything that has
a batch of picklable jobs may use it.
"""

from fusionlang.executors.outcomes import Done, ExecutorUnavailable, Failed
from fusionlang.executors.run import run_all

__all__ = ["Done", "ExecutorUnavailable", "Failed", "run_all"]
