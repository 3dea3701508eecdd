"""Peer kernel counts for the light ONNX models.

ONNX Runtime is measured live: the graph as ORT optimizes it (levels EXTENDED and ALL),
counting nodes that launch work; views (Reshape, Flatten, Squeeze, Unsqueeze, Identity)
and NCHWc layout reorders (ReorderInput/ReorderOutput) are not counted, as fusionlang
does not count its views. TVM Relax is read from bench/results/tvm_relax_counts.json,
produced by bench/tvm_relax_counts.py under a Python with apache-tvm (optional).
"""

from __future__ import annotations

import collections
import json
import os
import tempfile
from pathlib import Path

import onnx

LIGHT_MODELS = ["resnet50", "densenet121", "inception_v1", "inception_v2", "shufflenet", "squeezenet", "vgg19",
                "zfnet512", "bvlc_alexnet"]
NOT_KERNELS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "ReorderInput", "ReorderOutput"}
TVM_COUNTS = Path(__file__).parent / "results" / "tvm_relax_counts.json"


def light_model_path(name: str) -> str:
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", f"light_{name}.onnx")


def ort_kernels(path: str) -> dict[str, int]:
    """Kernels in ORT's optimized graph at EXTENDED and ALL (CPU execution provider)."""
    import onnxruntime as ort

    counts = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, level in (("extended", ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED),
                             ("all", ort.GraphOptimizationLevel.ORT_ENABLE_ALL)):
            options = ort.SessionOptions()
            options.graph_optimization_level = level
            options.log_severity_level = 3
            options.optimized_model_filepath = os.path.join(tmp, f"{label}.onnx")
            ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
            ops = collections.Counter(n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node)
            counts[label] = sum(n for op, n in ops.items() if op not in NOT_KERNELS)
    counts["best"] = min(counts["extended"], counts["all"])
    return counts


def tvm_kernels() -> dict[str, int]:
    """Recorded TVM Relax FuseOps kernel counts (empty when never measured)."""
    if not TVM_COUNTS.exists():
        return {}
    data = json.loads(TVM_COUNTS.read_text())
    return {name: entry["kernels"] for name, entry in data["models"].items()}
