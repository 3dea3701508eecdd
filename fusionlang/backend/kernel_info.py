"""What a compiled graph reports about each of its kernels."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class KernelInfo:
    """One compiled kernel of a group: its function ``name``, the number of loop nests
    after loop fusion, the generated ``source``, the schedule ``strategy`` used, and how
    many launches it makes."""

    group: int
    name: str
    nests: int
    source: str
    nodes: list[str]
    strategy: str
    #: kernel parameters as value names (None for constant tables of an op's access spec)
    params: list = field(default_factory=list)
    launches: int = 1
    #: a template kernel's problem as a GEMM ("GEMM m=64 n=3136 k=576"), else empty
    detail: str = ""
    #: floating-point operations of a template kernel's problem per run (0: not counted)
    flops: int = 0

    def to_dict(self) -> dict:
        return {"group": self.group, "name": self.name, "nests": self.nests, "nodes": self.nodes,
                "strategy": self.strategy, "launches": self.launches, "detail": self.detail, "flops": self.flops}


@dataclass(frozen=True)
class KernelTime:
    """What :meth:`CompiledGraph.profile` measured of one kernel: wall seconds per run
    (CLOCK_MONOTONIC around each call; a template's parts before and after it included),
    its ``share`` of the wall time of all kernels, and ``cpu_seconds``, the process's CPU
    time per run over its calls (every thread's: on one thread, the kernel's cost without
    the moments a busy machine kept it off a core)."""

    kernel: KernelInfo
    seconds: float
    share: float
    cpu_seconds: float

    def to_dict(self) -> dict:
        return {**self.kernel.to_dict(), "seconds": self.seconds, "share": self.share, "cpu_seconds": self.cpu_seconds}


__all__ = ["KernelInfo", "KernelTime"]
