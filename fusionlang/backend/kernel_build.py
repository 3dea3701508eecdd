"""What a runtime builds its kernels from: a plan lowered for one target, its buffers and
the options of the compile.

``compile`` makes one and hands it to the target's runtime, which returns the kernels it
built (``kernels``, ``source``) and a way to run them; no runtime writes into the
CompiledGraph that owns it. A runtime keeps only what a run needs (graph, buffers,
constants), so the polyhedral programs and loop IR here are freed after compiling.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusionlang.backend.memory import BufferPlan
from fusionlang.engine.plan import FusionPlan
from fusionlang.ir.graph import Graph


@dataclass(frozen=True)
class KernelBuild:
    plan: FusionPlan
    #: group id -> LoweredGroup: the groups compiled as loop nests (C target: or LrnKernel,
    #: an LRN alone run as the LRN template)
    lowered: dict
    #: group id -> TemplateGroup: complex ops run as the CPU GEMM template (C target)
    templates: dict
    #: values known at compile time, folded "const" groups included
    constants: dict
    buffers: BufferPlan
    openmp: bool = False
    #: OpenMP threads a C run uses: None for every core (with openmp), 1 for one thread
    threads: int | None = None
    #: OpenMP threads from the process's libgomp, not the library's pool (backend.thread_pool)
    share_libgomp: bool = False
    sanitize: bool = False
    #: loaded indices (gather) are checked against their axis; a bad one is an InputError
    check_indices: bool = True
    #: graph outputs whose stores stream past the caches (C target; see backend.streaming)
    streamed: frozenset = frozenset()
    #: how CUDA GEMM templates multiply on tensor cores (backend.cuda_gemm.PRECISIONS)
    precision: str = "fp32"
    #: C target: time each kernel call (CompiledGraph.profile)
    profile: bool = False

    @property
    def graph(self) -> Graph:
        return self.plan.graph


__all__ = ["KernelBuild"]
