"""bfloat16 (or float16) models on one CPU thread: fusionlang's 16-bit build against OpenVINO's.

Three workloads in float32:

* ``resnet_ish``: a ResNet-50 stem (7x7/2 conv, max pool) and bottleneck blocks of its
  first two stages (1x1 -> 3x3 -> 1x1 with a projection and a residual), batch 1, 224x224
  (bench/model_runtime.py's ONNX builder);
* ``resnet50``: torchvision's whole ResNet-50, batch 1, 224x224, as bench/torch_zoo.py
  exports it (random weights; needs torch and torchvision the first time, then its cache);
* ``bert_layer``: one BERT-base encoder layer, seq 128 (the same builder).

fusionlang compiles the model with every float initializer, the input and the output
converted to bfloat16 (``--dtype f16``: float16; opset 22: Conv takes bfloat16 from there), so its matmuls and convs
run on the GEMM template in bf16 (backend.gemm_half); the float32 model compiled by
fusionlang is timed too (what the bf16 build's widening and rounding cost). OpenVINO runs the float32 model with
``INFERENCE_PRECISION_HINT=bf16`` (or ``f16``: its own 16-bit kernels where the CPU has
AVX-512 BF16 / FP16 or AMX); ORT runs the float32 model for reference (its CPU provider has no bf16 Conv). All on
one thread, interleaved rounds, medians of process CPU and wall time.

    python bench/bf16.py [--dtype bf16|f16] [--rounds 7] [--only resnet_ish,resnet50,bert_layer] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model_runtime import RESULTS, _Onnx, bert_layer, interleaved, ort_session  # noqa: E402

import fusionlang  # noqa: E402
from fusionlang.backend.machine import cpu_features  # noqa: E402


def _bottleneck(g: _Onnx, x: str, cin: int, mid: int, cout: int, stride: int) -> str:
    def conv(t, cin_, cout_, k, s=1):
        w = g.weight((cout_, cin_, k, k), 1.0 / math.sqrt(k * k * cin_))
        return g.op("Conv", t, w, g.weight((cout_,), 0.02), kernel_shape=[k, k], strides=[s, s],
                    pads=[k // 2] * 4)

    h = g.op("Relu", conv(x, cin, mid, 1))
    h = g.op("Relu", conv(h, mid, mid, 3, stride))
    h = conv(h, mid, cout, 1)
    skip = conv(x, cin, cout, 1, stride) if (cin != cout or stride != 1) else x
    return g.op("Relu", g.op("Add", h, skip))


def resnet_ish(size: int = 224) -> onnx.ModelProto:
    g = _Onnx("resnet_ish", seed=4)
    h = g.op("Conv", "x", g.weight((64, 3, 7, 7), 1.0 / math.sqrt(147)), g.weight((64,), 0.02),
             kernel_shape=[7, 7], strides=[2, 2], pads=[3, 3, 3, 3])
    h = g.op("MaxPool", g.op("Relu", h), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    h = _bottleneck(g, h, 64, 64, 256, 1)
    h = _bottleneck(g, h, 256, 64, 256, 1)
    h = _bottleneck(g, h, 256, 128, 512, 2)
    h = _bottleneck(g, h, 512, 128, 512, 1)
    return g.model("x", (1, 3, size, size), h)


def resnet50() -> onnx.ModelProto:
    """torchvision's ResNet-50 as bench/torch_zoo.py exports it (random weights, batch norms
    folded into the convs by the exporter; exported once, then read from its cache)."""
    import torch_zoo

    model, _ = torch_zoo.export("resnet50", torch_zoo.cache_dir())
    return model


WORKLOADS = {"resnet_ish": resnet_ish, "resnet50": resnet50, "bert_layer": bert_layer}


#: --dtype -> (numpy dtype, ONNX element type)
DTYPES = {"bf16": (ml_dtypes.bfloat16, TensorProto.BFLOAT16), "f16": (np.float16, TensorProto.FLOAT16)}


def as_half(model: onnx.ModelProto, dtype: str = "bf16") -> onnx.ModelProto:
    """The model with its float initializers, input and output in ``dtype``, at opset 22."""
    numpy_dtype, onnx_dtype = DTYPES[dtype]
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for k, init in enumerate(out.graph.initializer):
        if init.data_type == TensorProto.FLOAT:
            array = numpy_helper.to_array(init).astype(numpy_dtype)
            out.graph.initializer[k].CopyFrom(
                helper.make_tensor(init.name, onnx_dtype, array.shape, array.astype(np.float32).reshape(-1)))
    for value in list(out.graph.input) + list(out.graph.output):
        value.type.tensor_type.elem_type = onnx_dtype
    del out.opset_import[:]
    out.opset_import.append(helper.make_opsetid("", 22))
    out.ir_version = helper.find_min_ir_version_for(list(out.opset_import))
    return out


def openvino_half(model: onnx.ModelProto, dtype: str):
    import openvino

    core = openvino.Core()
    compiled = core.compile_model(core.read_model(model.SerializeToString(), b""), "CPU",
                                  {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": dtype,
                                   "INFERENCE_NUM_THREADS": 1})
    request = compiled.create_infer_request()
    return compiled, request


def bench(name: str, rounds: int, dtype: str = "bf16") -> dict:
    model = WORKLOADS[name]()
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    graph = fusionlang.from_onnx(as_half(model, dtype))
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c")
    graph32 = fusionlang.from_onnx(model)
    compiled32 = fusionlang.compile(fusionlang.fuse(graph32, "apollo"), "c")
    feeds16 = {graph.inputs[0]: x.astype(DTYPES[dtype][0])}
    ov_model, request = openvino_half(model, dtype)
    session = ort_session(model, 1)
    ort_in = session.get_inputs()[0].name
    fns = {"fusionlang_16": lambda: compiled.run(feeds16)[graph.outputs[0]],
           "fusionlang_f32": lambda: compiled32.run({graph32.inputs[0]: x})[graph32.outputs[0]],
           "ov_16": lambda: request.infer({0: x})[ov_model.outputs[0]],
           "ort_f32": lambda: session.run(None, {ort_in: x})[0]}
    timing, results = interleaved(fns, rounds)
    reference = np.asarray(results["ort_f32"], np.float64)
    scale = float(np.abs(reference).max()) or 1.0
    diffs = {k: float(np.abs(np.asarray(v, np.float32).astype(np.float64).reshape(reference.shape)
                             - reference).max() / scale) for k, v in results.items() if k != "ort_f32"}
    strategies = [k.strategy for k in compiled.kernels]
    return {"workload": name, "dtype": dtype, "timing": timing, "max_rel_diff_from_ort_f32": diffs,
            "kernels": len(strategies), "templates": strategies.count("gemm template"),
            "ours_over_ov_cpu": timing["fusionlang_16"]["cpu_ms"] / timing["ov_16"]["cpu_ms"],
            "ours_over_ov_wall": timing["fusionlang_16"]["wall_ms"] / timing["ov_16"]["wall_ms"]}


def table(rows: list[dict]) -> str:
    head = (f"{'workload':12} {'dtype':>5} {'ours ms':>8} {'ours f32':>8} {'OV 16':>8} {'ORT f32':>8} {'ours/OV cpu':>11} {'ours/OV wall':>12} "
            f"{'templates':>10} {'diff ours':>9} {'diff OV':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        t = r["timing"]
        lines.append(f"{r['workload']:12} {r['dtype']:>5} {t['fusionlang_16']['cpu_ms']:8.2f} {t['fusionlang_f32']['cpu_ms']:8.2f} {t['ov_16']['cpu_ms']:8.2f} "
                     f"{t['ort_f32']['cpu_ms']:8.2f} {r['ours_over_ov_cpu']:11.2f} {r['ours_over_ov_wall']:12.2f} "
                     f"{r['templates']:>4}/{r['kernels']:<5} {r['max_rel_diff_from_ort_f32']['fusionlang_16']:9.1e} "
                     f"{r['max_rel_diff_from_ort_f32']['ov_16']:8.1e}")
    return "\n".join(lines)


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", default="", help="workload names, comma-separated (default: all)")
    parser.add_argument("--dtype", choices=list(DTYPES), default="bf16")
    parser.add_argument("--out", default="", help="default: bench/results/<dtype>.json")
    args = parser.parse_args(argv)
    rows = []
    for name in args.only.split(",") if args.only else WORKLOADS:
        if name not in WORKLOADS:
            parser.error(f"unknown workload {name}; known: {', '.join(WORKLOADS)}")
        print(f"... {name}", file=sys.stderr, flush=True)
        rows.append(bench(name, args.rounds, args.dtype))
    print(table(rows))
    flags = sorted(f for f in cpu_features() if f.startswith(("avx512_bf16", "avx512_fp16", "amx")))
    Path(args.out or RESULTS / f"{args.dtype}.json").write_text(json.dumps({
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpu": _cpu_model(), "cores": os.cpu_count(), "bf16_flags": flags},
        "threads": 1, "rounds": args.rounds, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
