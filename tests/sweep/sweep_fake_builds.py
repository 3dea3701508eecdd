"""Stand-ins for fusionlang.sweep.build.build, module-level so pool workers import them:
a model named *crash* kills its worker (a compiler that segfaults), any other returns a
small build result."""

import os


def build_or_crash(job) -> dict:
    if "crash" in job.model:
        os.kill(os.getpid(), 9)
    return {"kernels": 2 if job.policy.rules == "xla" else 1, "launches": 1, "bytes": 64, "bytes_before": 128,
            "rewrites": {}, "groups": [["n"]], "fuse_seconds": 0.1, "compile_seconds": 0.1,
            "check_reference": "ok", "check_onnxruntime": "ok"}


def build_raising(job) -> dict:
    raise RuntimeError("a bug in the compiler\nwith a second line")
