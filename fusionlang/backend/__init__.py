"""Loop fusion and code generation: FusionPlan -> CompiledGraph (C twin or CUDA).

Layer I (``poly``, ``fusion``, ``schedule``, ``lower``): each group's ops become isl
statements, fused into one loop nest when legal, contracted, lowered to a loop IR.
Emitters (``emit_c``, ``emit_cuda``) print that IR; ``runtime`` runs it.
"""

from fusionlang.backend.feedback import check_group
from fusionlang.backend.runtime import CompiledGraph, KernelInfo, compile

__all__ = ["CompiledGraph", "KernelInfo", "check_group", "compile"]
