"""The pipeline's stages: one vocabulary for what the command line prints, the JSON it
writes, the plan's and the compiled graph's stats and the HTML report.

    import     read the model into the graph IR (frontend)
    rewrite    apply the rule set's rewrites and open compound ops (engine)
    partition  cut the rewritten graph into fused groups (engine)
    codegen    loop-fuse each group and print its C or CUDA (backend)
    compile    the C compiler, or NVRTC, on the printed source (backend)
    run        the compiled program on the inputs

Each stage's time is ``<stage>_seconds`` wherever it is recorded: rewrite and partition
in ``FusionPlan.stats``, codegen and compile in ``CompiledGraph.stats``.
"""

from __future__ import annotations

IMPORT, REWRITE, PARTITION, CODEGEN, COMPILE, RUN = "import", "rewrite", "partition", "codegen", "compile", "run"
STAGES = (IMPORT, REWRITE, PARTITION, CODEGEN, COMPILE, RUN)


def seconds_key(stage: str) -> str:
    """The stats and JSON key of a stage's time: ``rewrite_seconds``."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r} (stages: {', '.join(STAGES)})")
    return f"{stage}_seconds"


def format_seconds(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1e3:.1f} ms"


def stage_line(times: dict[str, float]) -> str:
    """``import 12.0 ms · rewrite 0.20 s · ...`` for the stages ``times`` holds, in order."""
    return " · ".join(f"{stage} {format_seconds(times[stage])}" for stage in STAGES if stage in times)


def stage_times(*stats: dict) -> dict[str, float]:
    """stage -> seconds, from stats dicts holding ``<stage>_seconds`` keys."""
    out = {}
    for s in stats:
        for stage in STAGES:
            if seconds_key(stage) in s:
                out[stage] = float(s[seconds_key(stage)])
    return out
