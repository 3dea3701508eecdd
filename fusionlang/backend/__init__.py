"""Loop fusion and code generation: FusionPlan -> CompiledGraph (C twin or CUDA).

Where things are decided:

* ``poly``      each op's access spec as isl statements (init/update/final for reductions),
                access relations, dependences; views inlined into their readers, and
                prologues (bn + relu before a conv) recomputed in them when that fuses
* ``fusion``    which loops the statements share (hand-built fused schedule trees)
* ``schedule``  isl schedule from a tree, legality (deps go forward), parallel loops, AST
* ``lower``     isl AST -> loop IR (``loopir``), contraction of intermediates, declaration scopes
* ``cexpr``     exact printing of indices (floor semantics) and float bodies
* ``emit_c`` / ``emit_cuda``   the same loop IR as C functions / CUDA kernels
* ``codegen_passes`` / ``cuda_passes``   every printing decision (OpenMP pragmas, split
                reductions, NaN flags, lane checks, streamed stores, prefetches, reciprocals;
                CUDA units, thread mapping, float4 rows, shared memory) as passes recording
                their result on the loop IR (``For.plan``) before the printers print it
* ``template``  which conv/matmul groups run as a GEMM template, with what epilogue (and,
                on CUDA, what prologue); ``gemm_template`` the CPU kernel,
                ``cuda_gemm`` / ``cuda_template`` the CUDA one (tiles, tensor cores)
* ``ccompile``  system C compiler, ctypes; ``nvrtc`` CUDA -> PTX without a GPU
* ``thread_pool``  the pool OpenMP libraries carry in place of libgomp (GCC builds): a
                region's members claimed, waits that spin briefly then sleep
* ``omp_wait``  OpenMP builds by other compilers load with libomp's passive wait
* ``kernel_cache``  the on-disk cache of compiled kernels: where, when it is trusted, its
                size bound
* ``memory``    which values get buffers, lifetimes, storage sharing
* ``runtime``   CompiledGraph (``runtime_c``, ``runtime_cuda`` with CuPy and ``cuda_graph``,
                ``cuda_emu`` on the CPU)
* ``feedback``  FeedbackCheck: Apollo's upward feedback to the partitioner, one per fuse
                call and target (verdicts and schedules remembered by group structure
                in its ``schedule_store``; the plan carries each group's schedule)
* ``artifact``  a compiled C graph saved to a directory and loaded back without the
                compiler (``c_program`` runs the library for both)
* ``failures``  what generated code reports when a run cannot go on (a bad index, out
                of memory) and the FuseError it becomes
"""

from __future__ import annotations

import importlib

#: public name -> the module that defines it, imported on first use (PEP 562): the
#: compiler's modules import islpy and sympy, which loading a saved artifact
#: (:mod:`.artifact`, a submodule of this package) must not pay for
_EXPORTS = {
    "split_at_concats": "fusionlang.backend.concat_inplace",
    "FeedbackCheck": "fusionlang.backend.feedback",
    "check_group": "fusionlang.backend.feedback",
    "nvrtc_available": "fusionlang.backend.nvrtc",
    "nvrtc_compile": "fusionlang.backend.nvrtc",
    "KernelInfo": "fusionlang.backend.kernel_info",
    "TARGETS": "fusionlang.backend.runtime",
    "CompiledGraph": "fusionlang.backend.runtime",
    "compile": "fusionlang.backend.runtime",
    "lower_plan": "fusionlang.backend.runtime",
    "scheduling_target": "fusionlang.backend.runtime",
    "build_cuda_program": "fusionlang.backend.runtime_cuda",
    "cuda_available": "fusionlang.backend.runtime_cuda",
    "LoadedGraph": "fusionlang.backend.artifact",
    "load": "fusionlang.backend.artifact",
}


def __getattr__(name: str):
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'fusionlang.backend' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def cuda_sources(plan, *, check_indices: bool = True, precision: str = "fp32") -> dict[str, str]:
    """Compilable CUDA translation units of ``plan`` (name -> source); needs no GPU."""
    from fusionlang.backend.runtime import lower_plan
    from fusionlang.backend.runtime_cuda import build_cuda_program

    templates: dict = {}
    lowered, _, _ = lower_plan(plan, "cuda", templates=templates)
    return build_cuda_program(plan, lowered, check_indices, templates, precision).sources()


def default_target() -> str:
    """"cuda" when CuPy sees a device, else "c"."""
    from fusionlang.backend.runtime_cuda import cuda_available

    return "cuda" if cuda_available() else "c"


__all__ = ["TARGETS", "CompiledGraph", "FeedbackCheck", "KernelInfo", "LoadedGraph", "check_group", "compile",
           "cuda_available", "cuda_sources", "default_target", "load", "nvrtc_available", "nvrtc_compile",
           "scheduling_target", "split_at_concats"]
