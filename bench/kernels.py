"""Single GEMM kernels the issue-35 profiles found slow, fusionlang against onnxruntime.

Each workload is a one-node (or one-GEMM-plus-epilogue) ONNX model built here, compiled with
``fusionlang.fuse(graph, "apollo")`` to C and run through ``CompiledGraph.run``, beside
onnxruntime on one thread (``ORT_ENABLE_ALL``), interleaved in one process (model_runtime's
session and timing):

* ``gemm_*`` / ``gelu_*``: a GPT-2 MLP up-projection, plain and with the tanh-GELU epilogue
  (``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, ``Pow(x, 3)`` as exported);
* ``gemv_*``: skinny GEMMs, a classifier ``m=1 n=1000`` and a 1x1 conv on a pooled vector
  ``m=1024 n=1`` (as a MatMul of a weight by a column);
* ``heads_*``: batched small-head GEMMs of attention (P.V ``n=4``, QK^T ``k=4``, Swin's window
  ``m=49 n=32 k=49``).

``bench/results/kernels_before.json`` is this script run against the main checkout before
the issue-35 kernels (a copy of bench/ whose ``_checkout`` points there), back to back.

Reported per workload: CPU-time medians (wall beside), GFLOP/s of each side, fl / ORT, and the
largest difference of the outputs; ``fl_kernels`` is ``CompiledGraph.execute`` alone (the
kernels, without ``run``'s checking of the feeds and copying out of the results). Writes bench/results/kernels.json.

    python bench/kernels.py [--rounds 15] [--only gelu_gpt2,gemm_gpt2]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import _checkout  # noqa: E402,F401  (first of ours: this checkout's fusionlang)
import fusionlang  # noqa: E402
from model_runtime import interleaved, ort_session  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
OPSET = 17


def _model(name: str, nodes, inputs: dict, inits: dict, output: str) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(s)) for k, s in inputs.items()],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    opsets = [helper.make_opsetid("", OPSET)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets))


def _weight(shape, seed=0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) / math.sqrt(shape[-2])).astype(np.float32)


def matmul(m: int, n: int, k: int, gelu: bool = False, batch: tuple = ()) -> onnx.ModelProto:
    """x[batch, m, k] . W[k, n] (+ bias and tanh GELU when ``gelu``)."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
    inits = {"w": _weight((k, n))}
    out = "y"
    if gelu:
        inits.update(b=np.full(n, 0.02, np.float32), three=np.float32(3.0), c=np.float32(0.044715),
                     s=np.float32(math.sqrt(2 / math.pi)), half=np.float32(0.5), one=np.float32(1.0))
        nodes += [helper.make_node(op, ins, [o]) for op, ins, o in (
            ("Add", ["y", "b"], "h"), ("Pow", ["h", "three"], "h3"), ("Mul", ["h3", "c"], "h3c"),
            ("Add", ["h", "h3c"], "in"), ("Mul", ["in", "s"], "ins"), ("Tanh", ["ins"], "t"),
            ("Add", ["t", "one"], "t1"), ("Mul", ["h", "half"], "hh"), ("Mul", ["hh", "t1"], "g"))]
        out = "g"
    return _model("matmul", nodes, {"x": (*batch, m, k)}, inits, out)


def weight_by_column(m: int, k: int) -> onnx.ModelProto:
    """W[m, k] . x[k, 1]: a 1x1 conv on a pooled vector, as a GEMM with n = 1."""
    return _model("gemv_column", [helper.make_node("MatMul", ["w", "x"], ["y"])], {"x": (k, 1)},
                  {"w": _weight((m, k))}, "y")


def batched(batch: int, m: int, n: int, k: int) -> onnx.ModelProto:
    """x[batch, m, k] . y[batch, k, n], both inputs (attention's scores and values)."""
    return _model("batched", [helper.make_node("MatMul", ["x", "y"], ["z"])], {"x": (batch, m, k), "y": (batch, k, n)},
                  {}, "z")


def conv_relu(channels: int, plane: int, kernel: int = 3, out_channels: int | None = None) -> onnx.ModelProto:
    """relu(conv(x, W) + b), ``channels`` in (and out, unless ``out_channels``), a
    ``kernel``-square window padded to keep the ``plane``-square plane: a ResNet body layer."""
    pad = kernel // 2
    out_channels = out_channels or channels
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[pad] * 4),
             helper.make_node("Relu", ["y"], ["z"])]
    inits = {"w": _weight((out_channels, channels, kernel, kernel)), "b": np.full(out_channels, 0.01, np.float32)}
    return _model("conv", nodes, {"x": (1, channels, plane, plane)}, inits, "z")


def _conv_flops(channels: int, plane: int, kernel: int = 3, out_channels: int | None = None) -> int:
    return 2 * channels * (out_channels or channels) * kernel * kernel * plane * plane


#: name -> (model builder, flops)
WORKLOADS = {
    "gemm_gpt2": (lambda: matmul(128, 3072, 768), 2 * 128 * 3072 * 768),
    "gelu_gpt2": (lambda: matmul(128, 3072, 768, gelu=True), 2 * 128 * 3072 * 768),
    "gemm_256": (lambda: matmul(256, 256, 256), 2 * 256 ** 3),
    "gelu_256": (lambda: matmul(256, 256, 256, gelu=True), 2 * 256 ** 3),
    "gemv_m1_n1000": (lambda: matmul(1, 1000, 2048), 2 * 1000 * 2048),
    "gemv_m1024_n1": (lambda: weight_by_column(1024, 1024), 2 * 1024 * 1024),
    "heads_pv_n4": (lambda: batched(8, 1024, 4, 1024), 2 * 8 * 1024 * 4 * 1024),
    "heads_qk_k4": (lambda: batched(8, 1024, 1024, 4), 2 * 8 * 1024 * 1024 * 4),
    "heads_swin": (lambda: batched(64 * 3, 49, 32, 49), 2 * 192 * 49 * 32 * 49),
    # ResNet-18's 3x3 body convs (issue 35's dense convs: narrow M at 56x56, 7x7 planes)
    "conv_64_56": (lambda: conv_relu(64, 56), _conv_flops(64, 56)),
    "conv_128_28": (lambda: conv_relu(128, 28), _conv_flops(128, 28)),
    "conv_256_14": (lambda: conv_relu(256, 14), _conv_flops(256, 14)),
    "conv_512_7": (lambda: conv_relu(512, 7), _conv_flops(512, 7)),
    # DenseNet-121's 3x3 convs (128 channels to 32)
    "conv_128_32_56": (lambda: conv_relu(128, 56, 3, 32), _conv_flops(128, 56, 3, 32)),
    "conv_128_32_28": (lambda: conv_relu(128, 28, 3, 32), _conv_flops(128, 28, 3, 32)),
    # ResNet-50's 1x1 convs: its bottlenecks' reduction and expansion at 56x56, 28x28, 7x7
    "conv1x1_256_64_56": (lambda: conv_relu(256, 56, 1, 64), _conv_flops(256, 56, 1, 64)),
    "conv1x1_64_256_56": (lambda: conv_relu(64, 56, 1, 256), _conv_flops(64, 56, 1, 256)),
    "conv1x1_512_128_28": (lambda: conv_relu(512, 28, 1, 128), _conv_flops(512, 28, 1, 128)),
    "conv1x1_512_2048_7": (lambda: conv_relu(512, 7, 1, 2048), _conv_flops(512, 7, 1, 2048)),
}


def bench(name: str, rounds: int) -> dict:
    build, flops = WORKLOADS[name]
    model = build()
    graph = fusionlang.from_onnx(model)
    rng = np.random.default_rng(0)
    feeds = {i: rng.standard_normal(graph.types[i].shape).astype(np.float32) for i in graph.inputs}
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c")
    session = ort_session(model, 1)
    output = graph.outputs[0]
    checked = {name: np.ascontiguousarray(value) for name, value in feeds.items()}
    timing, results = interleaved({"fl": lambda: compiled.run(feeds)[output],
                                   "fl_kernels": lambda: compiled.execute(checked),
                                   "ort": lambda: session.run(None, feeds)[0]}, rounds)
    del results["fl_kernels"]
    row = {"workload": name, "flops": flops, "kernels": compiled.stats.kernels,
           "max_abs_diff": float(np.max(np.abs(results["fl"] - results["ort"])))}
    for key, t in timing.items():
        row[f"{key}_cpu_ms"] = round(t["cpu_ms"], 4)
        row[f"{key}_wall_ms"] = round(t["wall_ms"], 4)
        row[f"{key}_gflops"] = round(flops / t["cpu_ms"] / 1e6, 2) if t["cpu_ms"] > 0 else None
    row["fl_over_ort"] = round(timing["fl"]["cpu_ms"] / timing["ort"]["cpu_ms"], 3)
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--only", default="", help="comma-separated workload names")
    parser.add_argument("--out", default=str(RESULTS / "kernels.json"))
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(WORKLOADS)
    rows = []
    for name in names:
        row = bench(name, args.rounds)
        rows.append(row)
        print(f"{name:16s} fl {row['fl_cpu_ms']:8.3f} ms {row['fl_gflops']!s:>7} GFLOP/s (kernels "
              f"{row['fl_kernels_cpu_ms']:8.3f} ms)   ort {row['ort_cpu_ms']:8.3f} ms "
              f"{row['ort_gflops']!s:>7} GFLOP/s   fl/ort {row['fl_over_ort']:.3f}  diff {row['max_abs_diff']:.2e}",
              flush=True)
    report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.processor() or
              platform.machine(), "rounds": args.rounds, "rows": rows}
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
