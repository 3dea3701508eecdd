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

import dataclasses
from typing import Any, Mapping, TypeVar

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


def stage_times(*stats: Stats | Mapping[str, Any]) -> dict[str, float]:
    """stage -> seconds, from stats (or their JSON) holding ``<stage>_seconds``."""
    out = {}
    for s in stats:
        data = s.to_dict() if isinstance(s, Stats) else s
        for stage in STAGES:
            if seconds_key(stage) in data:
                out[stage] = float(data[seconds_key(stage)])
    return out


_S = TypeVar("_S", bound="Stats")


class Stats:
    """Base of the typed stats (``FusionPlan.stats``, ``CompiledGraph.stats``): frozen,
    slotted dataclasses whose fields are their JSON keys. A field that is None was not
    recorded (the stage that records it did not run) and is left out of the JSON."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        """The recorded fields by name, as the plan JSON, the report and ``--json`` carry them."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)  # type: ignore[arg-type]
                if getattr(self, f.name) is not None}

    @classmethod
    def from_dict(cls: type[_S], data: Mapping[str, Any]) -> _S:
        """The stats a :meth:`to_dict` wrote (its other keys, a plan's own, are not stats)."""
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in data.items() if k in names})
