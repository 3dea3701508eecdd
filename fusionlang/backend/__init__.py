"""Loop fusion and code generation: FusionPlan -> CompiledGraph (C twin or CUDA).

Layer I (``poly``, ``fusion``, ``schedule``, ``lower``): each group's ops become isl
statements, fused into one loop nest when legal, contracted, lowered to a loop IR.
Emitters (``emit_c``, ``emit_cuda``) print that IR; ``runtime`` runs it.
"""

from __future__ import annotations

from fusionlang.backend.feedback import check_group
from fusionlang.backend.nvrtc import nvrtc_available, nvrtc_compile
from fusionlang.backend.runtime import CompiledGraph, KernelInfo, compile, lower_plan
from fusionlang.backend.runtime_cuda import cuda_available


def cuda_sources(plan) -> dict[str, str]:
    """Compilable CUDA translation units of ``plan`` (name -> source); needs no GPU."""
    from fusionlang.backend.runtime_cuda import build_program

    lowered, _, _ = lower_plan(plan, "cuda")
    return build_program(plan, lowered).sources()


def default_target() -> str:
    """"cuda" when CuPy sees a device, else "c"."""
    return "cuda" if cuda_available() else "c"


__all__ = ["CompiledGraph", "KernelInfo", "check_group", "compile", "cuda_available", "cuda_sources",
           "default_target", "nvrtc_available", "nvrtc_compile"]
