"""Count TVM Relax FuseOps kernels on the light ONNX models (run with a Python that has
apache-tvm installed; TVM is an optional benchmark dependency, never a test one).

Pipeline (TVM 0.27): relax.frontend.onnx.from_onnx -> DecomposeOpsForInference ->
CanonicalizeBindings -> DeadCodeElimination -> LegalizeOps -> AnnotateTIROpPattern ->
FoldConstant -> FuseOps -> FuseTIR, then count `call_tir` in main. Kernels that only
reshape (pure views) are reported separately and not counted, as in fusionlang.

    /path/to/tvm-venv/bin/python bench/tvm_relax_counts.py [--out bench/results/tvm_relax_counts.json]
"""

import argparse
import collections
import json
import os
import platform
import re
import time

import onnx
import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

MODELS = ["resnet50", "densenet121", "inception_v1", "inception_v2", "shufflenet", "squeezenet", "vgg19",
          "zfnet512", "bvlc_alexnet"]


def fused_kernels(model: onnx.ModelProto) -> collections.Counter:
    mod = from_onnx(model, keep_params_in_input=False)
    passes = [
        relax.transform.DecomposeOpsForInference(),
        relax.transform.CanonicalizeBindings(),
        relax.transform.DeadCodeElimination(),
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
    ]
    with tvm.transform.PassContext(opt_level=3):
        mod = tvm.transform.Sequential(passes)(mod)
    calls = collections.Counter()

    def visit(expr):
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) and expr.op.name == "relax.call_tir":
            calls[expr.args[0].name_hint] += 1

    relax.analysis.post_order_visit(mod["main"].body, visit)
    return calls


def is_view(kernel: str) -> bool:
    return re.fullmatch(r"reshape\d*", kernel) is not None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="bench/results/tvm_relax_counts.json")
    args = parser.parse_args()
    data_dir = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    results = {}
    print(f"{'model':<14}{'kernels':>9}{'views':>7}{'seconds':>9}")
    for name in MODELS:
        started = time.perf_counter()
        calls = fused_kernels(onnx.load(os.path.join(data_dir, f"light_{name}.onnx")))
        views = sum(n for k, n in calls.items() if is_view(k))
        kernels = sum(calls.values()) - views
        elapsed = time.perf_counter() - started
        groups = collections.Counter()
        for k, n in calls.items():
            groups[re.sub(r"\d+", "", k)] += n
        results[name] = {"kernels": kernels, "views": views, "groups": dict(sorted(groups.items()))}
        print(f"{name:<14}{kernels:>9}{views:>7}{elapsed:>9.1f}")
    meta = {"tvm": tvm.__version__, "onnx": onnx.__version__, "python": platform.python_version(),
            "pipeline": "DecomposeOpsForInference, CanonicalizeBindings, DeadCodeElimination, LegalizeOps, "
                        "AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR",
            "date": time.strftime("%Y-%m-%d")}
    with open(args.out, "w") as fh:
        json.dump({"meta": meta, "models": results}, fh, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
