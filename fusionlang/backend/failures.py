"""What generated code reports when a run cannot go on, and the errors it becomes.

Kernels never exit or abort: a fallible kernel (one that checks loaded indices or
allocates heap buffers) takes an error record ``fl_err`` (``RECORD`` int64 slots) and fills
it when something goes wrong; the C driver stops after a kernel that set it and says which
call that was; the runtime reads the record and raises one FuseError.

Record: [kind, site, value, call]. ``site`` numbers the checked indices of one kernel
(C: per function, in print order; CUDA: across the program); ``value`` is the bad index
(INDEX) or the bytes asked for (ALLOC); ``call`` is the position of the failing kernel
call in the C driver.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusionlang.errors import FuseError, InputError, ResourceError

#: int64 slots of the error record
RECORD = 4
#: kinds of failure
INDEX = 1
ALLOC = 2


@dataclass(frozen=True)
class IndexSite:
    """A checked index in generated code: the node whose read it is, and its axis."""

    node: str
    op: str
    axis: int
    size: int

    def error(self, value: int) -> InputError:
        return InputError(f"node {self.node!r} ({self.op}): index {value} is out of range for axis {self.axis} "
                          f"of size {self.size}")


def failure(record, sites: list[IndexSite], kernel: str) -> FuseError:
    """The error a filled record describes (``sites`` and ``kernel``: of the failing call)."""
    kind, site, value = int(record[0]), int(record[1]), int(record[2])
    if kind == INDEX and 0 <= site < len(sites):
        return sites[site].error(value)
    if kind == ALLOC:
        return ResourceError(f"out of memory allocating {value} bytes in kernel {kernel}")
    return FuseError(f"kernel {kernel} failed (error record {kind}, {site}, {value})")


__all__ = ["ALLOC", "INDEX", "RECORD", "IndexSite", "failure"]
