"""Depthwise convolutions (issue 35 item 2): fusionlang's depthwise kernel with its BN/ReLU6
epilogue against onnxruntime and OpenVINO.

Each workload is one ONNX block, ``Clip(BatchNormalization(Conv(x, W, group=C)), 0, 6)``,
at a depthwise layer of MobileNetV2, MobileNetV3-Large or EfficientNet-B0 (224x224 input):
3x3 and 5x5 taps, stride 1 and 2, input planes 112 down to 7, 32 to 960 channels, at batch 1
and 4. fusionlang compiles it with ``fusionlang.fuse(graph, "apollo")`` to C (one group: the
depthwise template with the normalisation and the clip as its epilogue).

Four ways, interleaved in one process on one thread (model_runtime's timing): ``fl``
(``CompiledGraph.run``), ``fl_kernels`` (``CompiledGraph.execute``: the kernels alone, without
``run``'s checking of the feeds and copying out), ``ort`` (``ORT_ENABLE_ALL``, which folds the
normalisation into the conv) and ``ov`` (OpenVINO's CPU plugin, f32 hint, latency). A sample
is ``repeat`` calls back to back (enough for about 2 ms, so that a call's Python overhead and
the clock's resolution stay small beside it); reported are the medians of process CPU time per
call (wall beside), GFLOP/s (2 x taps x outputs; the epilogue not counted), ``fl/ORT`` and
``fl/OV`` (CPU-time ratios of ``fl_kernels``; below 1: fusionlang is faster) and the largest
difference from ORT's output. The load average at the start and the end goes into the JSON:
on a shared machine only the ratios of interleaved runs are comparable.

    python bench/depthwise.py [--rounds 9] [--only mnv2_7_c960_k3s1] [--batches 1,4] [--out PATH]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # see model_runtime: no spinning between competitors

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import helper  # noqa: E402

import _checkout  # noqa: E402,F401  (first of ours: this checkout's fusionlang)
import fusionlang  # noqa: E402
from kernels import _model  # noqa: E402
from model_runtime import interleaved, openvino_runner, ort_session  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"

#: name -> (input plane, channels, kernel, stride): the networks' depthwise layers, largest plane first
SHAPES = {
    "mnv2_112_c32_k3s1": (112, 32, 3, 1),
    "mnv2_112_c96_k3s2": (112, 96, 3, 2),
    "mnv2_56_c144_k3s1": (56, 144, 3, 1),
    "effb0_56_c144_k5s2": (56, 144, 5, 2),
    "mnv2_28_c192_k3s1": (28, 192, 3, 1),
    "effb0_28_c240_k5s1": (28, 240, 5, 1),
    "mnv2_28_c192_k3s2": (28, 192, 3, 2),
    "mnv2_14_c384_k3s1": (14, 384, 3, 1),
    "mnv2_14_c576_k3s1": (14, 576, 3, 1),
    "effb0_14_c672_k5s1": (14, 672, 5, 1),
    "mnv2_14_c576_k3s2": (14, 576, 3, 2),
    "mnv3_14_c672_k5s2": (14, 672, 5, 2),
    "mnv2_7_c960_k3s1": (7, 960, 3, 1),
    "mnv3_7_c960_k5s1": (7, 960, 5, 1),
}

#: the calls in one sample add up to about this much fusionlang work (at 10 GFLOP/s)
SAMPLE_FLOPS = 20e6


def depthwise_block(batch: int, plane: int, channels: int, kernel: int, stride: int) -> tuple[onnx.ModelProto, int]:
    """(the block, its flops): a depthwise conv with "same" padding, BN (inference) and ReLU6."""
    rng = np.random.default_rng(0)
    pad = kernel // 2
    inits = {"w": (rng.standard_normal((channels, 1, kernel, kernel)) / kernel).astype(np.float32),
             "scale": rng.uniform(0.5, 1.5, channels).astype(np.float32),
             "shift": rng.uniform(-0.5, 0.5, channels).astype(np.float32),
             "mean": rng.uniform(-0.1, 0.1, channels).astype(np.float32),
             "var": rng.uniform(0.5, 1.5, channels).astype(np.float32),
             "lo": np.float32(0.0), "hi": np.float32(6.0)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], group=channels, kernel_shape=[kernel, kernel],
                              strides=[stride, stride], pads=[pad] * 4),
             helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["n"]),
             helper.make_node("Clip", ["n", "lo", "hi"], ["y"])]
    out = (plane + 2 * pad - kernel) // stride + 1
    flops = 2 * batch * channels * out * out * kernel * kernel
    return _model("depthwise", nodes, {"x": (batch, channels, plane, plane)}, inits, "y"), flops


def repeated(fn, repeat: int):
    def run():
        for _ in range(repeat - 1):
            fn()
        return fn()
    return run


def bench(name: str, batch: int, rounds: int) -> dict:
    plane, channels, kernel, stride = SHAPES[name]
    model, flops = depthwise_block(batch, plane, channels, kernel, stride)
    graph = fusionlang.from_onnx(model)
    x = np.random.default_rng(1).standard_normal((batch, channels, plane, plane)).astype(np.float32)
    feeds = {graph.inputs[0]: x}
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c")
    session = ort_session(model, 1)
    openvino = openvino_runner(model, 1)
    output = graph.outputs[0]
    repeat = max(1, round(SAMPLE_FLOPS / flops))
    fns = {"fl": lambda: compiled.run(feeds)[output], "fl_kernels": lambda: compiled.execute(feeds),
           "ort": lambda: session.run(None, feeds)[0]}
    if openvino is not None:
        fns["ov"] = lambda: openvino(feeds)[0]
    timing, results = interleaved({k: repeated(fn, repeat) for k, fn in fns.items()}, rounds)
    row = {"workload": name, "batch": batch, "plane": plane, "channels": channels, "kernel": kernel,
           "stride": stride, "flops": flops, "repeat": repeat,
           "strategies": [k.strategy for k in compiled.kernels],
           "max_abs_diff": float(np.max(np.abs(results["fl"] - results["ort"])))}
    if "ov" in results:
        row["ov_max_abs_diff"] = float(np.max(np.abs(results["ov"] - results["ort"])))
    for key, t in timing.items():
        cpu_ms, wall_ms = t["cpu_ms"] / repeat, t["wall_ms"] / repeat
        row[f"{key}_cpu_ms"] = round(cpu_ms, 5)
        row[f"{key}_wall_ms"] = round(wall_ms, 5)
        row[f"{key}_gflops"] = round(flops / cpu_ms / 1e6, 2) if cpu_ms > 0 else None
    row["fl_over_ort"] = round(row["fl_kernels_cpu_ms"] / row["ort_cpu_ms"], 3)
    row["fl_over_ov"] = round(row["fl_kernels_cpu_ms"] / row["ov_cpu_ms"], 3) if "ov" in timing else None
    return row


HEADER = (f"{'workload':20s} {'N':>2s} {'fl GF/s':>8s} {'kern GF/s':>9s} {'ORT GF/s':>9s} {'OV GF/s':>8s} "
          f"{'fl/ORT':>7s} {'fl/OV':>6s} {'diff':>8s}")


def _line(row: dict) -> str:
    ov = row.get("ov_gflops") or float("nan")
    ratio_ov = row["fl_over_ov"] if row["fl_over_ov"] is not None else float("nan")
    return (f"{row['workload']:20s} {row['batch']:2d} {row['fl_gflops']:8.2f} {row['fl_kernels_gflops']:9.2f} "
            f"{row['ort_gflops']:9.2f} {ov:8.2f} {row['fl_over_ort']:7.3f} {ratio_ov:6.3f} "
            f"{row['max_abs_diff']:8.1e}")


def _geomean(values) -> float | None:
    values = [v for v in values if v]
    return round(float(np.exp(np.mean(np.log(values)))), 3) if values else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--only", default="", help="comma-separated workload names")
    parser.add_argument("--batches", default="1,4", help="comma-separated batch sizes")
    parser.add_argument("--out", default=str(RESULTS / "depthwise.json"))
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    rows: list[dict] = []
    print(HEADER, flush=True)
    for name in [n for n in args.only.split(",") if n] or list(SHAPES):
        for batch in (int(b) for b in args.batches.split(",")):
            rows.append(bench(name, batch, args.rounds))
            print(_line(rows[-1]), flush=True)
    summary = {"geomean_fl_over_ort": _geomean(r["fl_over_ort"] for r in rows),
               "geomean_fl_over_ov": _geomean(r["fl_over_ov"] for r in rows)}
    print(f"geometric mean: fl/ORT {summary['geomean_fl_over_ort']}, fl/OV {summary['geomean_fl_over_ov']}")
    report = dict(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                  machine=platform.processor() or platform.machine(), cores=os.cpu_count(), threads=1,
                  rounds=args.rounds, load_average_start=[round(v, 2) for v in load_before],
                  load_average_end=[round(v, 2) for v in os.getloadavg()], **summary, rows=rows)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
