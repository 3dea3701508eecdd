"""Attention blocks (issue 35 item 3): fusionlang's attention kernel against the same block
unfused and against onnxruntime.

Each workload is an ONNX attention block, ``softmax(Q K^T / s [+ mask]) V`` with the scale a
constant, at the shapes the issue-35 profiles found slow:

* ``unet_self``: a small diffusion UNet's self-attention, 8 heads x 1024 tokens, head dim 4
  (the P.V ``m=1024 n=4 k=1024`` and QK^T ``k=4`` GEMMs and the 8x1024x1024 softmax);
* ``swin_window``: Swin-T's windowed attention, 64 windows x 3 heads of 49 tokens, head dim
  32, with the relative position bias (3, 49, 49) added over the windows;
* ``bert``: a BERT-base layer's attention, 12 heads x 128 tokens, head dim 64, with a
  padding mask (1, 1, 128) added over heads and rows;
* ``model_bert_layer``, ``model_gpt_block``: bench/model_runtime.py's BERT layer and GPT
  block (causal mask) whole, their attention scaled by a product.

Three ways, interleaved in one process on one thread, or ``--threads N`` (then read the
wall columns; idle OpenMP threads wait passively, as in model_runtime) (model_runtime's timing): ``fl_fused``
(``fusionlang.fuse(graph, "apollo_patterns")``: the block is one group, run as the attention
kernel; the rest of a model as apollo fuses it), ``fl_unfused`` (``"apollo"``: the matmuls as GEMM templates, the softmax a loop
nest between them) and ``ort`` (``ORT_ENABLE_ALL``). Reported: CPU-time medians (wall
beside), the ratios, the kernels each plan runs and the largest output difference from ORT.
Writes bench/results/attention.json (attention_threadsN.json with ``--threads N``).

    python bench/attention.py [--rounds 15] [--threads 2] [--only unet_self,bert]
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
from onnx import helper  # noqa: E402

os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # see model_runtime: no spinning between competitors

import _checkout  # noqa: E402,F401  (first of ours: this checkout's fusionlang)
import fusionlang  # noqa: E402
from kernels import _model  # noqa: E402
from model_runtime import BUILT, feeds_for, interleaved, ort_session  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def attention_block(batch: tuple, m: int, n: int, d: int, mask: tuple | None = None) -> onnx.ModelProto:
    """softmax(Q K^T / sqrt(d) [+ mask]) V with Q (*batch, m, d), K and V (*batch, n, d)."""
    rank = len(batch) + 2
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[*range(rank - 2), rank - 1, rank - 2]),
             helper.make_node("MatMul", ["q", "kt"], ["a"]), helper.make_node("Div", ["a", "s"], ["x"])]
    inputs = {"q": (*batch, m, d), "k": (*batch, n, d), "v": (*batch, n, d)}
    logits = "x"
    if mask is not None:
        nodes.append(helper.make_node("Add", ["x", "mask"], ["xm"]))
        inputs["mask"] = mask
        logits = "xm"
    nodes += [helper.make_node("Softmax", [logits], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["o"])]
    return _model("attention", nodes, inputs, {"s": np.array([math.sqrt(d)], np.float32)}, "o")


#: name -> (model builder, flops of the two products)
WORKLOADS = {
    "unet_self": (lambda: attention_block((1, 8), 1024, 1024, 4), 2 * 2 * 8 * 1024 * 1024 * 4),
    "swin_window": (lambda: attention_block((64, 3), 49, 49, 32, mask=(3, 49, 49)), 2 * 2 * 192 * 49 * 49 * 32),
    "bert": (lambda: attention_block((1, 12), 128, 128, 64, mask=(1, 1, 128)), 2 * 2 * 12 * 128 * 128 * 64),
    # whole models of bench/model_runtime.py whose attention is a pattern entry's (scale as a
    # product, GPT's causal mask a constant add)
    "model_bert_layer": (BUILT["bert_layer"], None),
    "model_gpt_block": (BUILT["gpt_block"], None),
}


def _feeds(graph) -> dict:
    rng = np.random.default_rng(0)
    feeds = {i: rng.standard_normal(graph.types[i].shape).astype(np.float32) for i in graph.inputs}
    if "mask" in feeds:  # a mask of 0 and -inf, as a padding or window mask is; no row fully masked
        mask = np.where(rng.random(feeds["mask"].shape) < 0.2, -np.inf, 0.0).astype(np.float32)
        mask[..., 0] = 0.0
        feeds["mask"] = mask
    return feeds


def bench(name: str, rounds: int, threads: int = 1) -> dict:
    build, flops = WORKLOADS[name]
    model = build()
    graph = fusionlang.from_onnx(model)
    feeds = _feeds(graph) if flops else feeds_for(model, graph)
    options = {"threads": threads} if threads > 1 else {}
    fused = fusionlang.compile(fusionlang.fuse(graph, "apollo_patterns"), "c", **options)
    unfused = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c", **options)
    session = ort_session(model, threads)
    output = graph.outputs[0]
    timing, results = interleaved({"fl_fused": lambda: fused.run(feeds)[output],
                                   "fl_unfused": lambda: unfused.run(feeds)[output],
                                   "ort": lambda: session.run(None, feeds)[0]}, rounds)
    row = {"workload": name, "flops": flops,
           "fl_fused_strategies": [k.strategy for k in fused.kernels],
           "fl_unfused_strategies": [k.strategy for k in unfused.kernels]}
    row["fl_fused_attention_kernels"] = row["fl_fused_strategies"].count("attention template")
    for key in ("fl_fused", "fl_unfused"):
        row[f"{key}_max_abs_diff"] = float(np.max(np.abs(results[key] - results["ort"])))
    for key, t in timing.items():
        row[f"{key}_cpu_ms"] = round(t["cpu_ms"], 4)
        row[f"{key}_wall_ms"] = round(t["wall_ms"], 4)
        row[f"{key}_gflops"] = round(flops / t["cpu_ms"] / 1e6, 2) if flops and t["cpu_ms"] > 0 else None
    row["fused_over_unfused"] = round(timing["fl_fused"]["cpu_ms"] / timing["fl_unfused"]["cpu_ms"], 3)
    row["fused_over_ort"] = round(timing["fl_fused"]["cpu_ms"] / timing["ort"]["cpu_ms"], 3)
    row["unfused_over_ort"] = round(timing["fl_unfused"]["cpu_ms"] / timing["ort"]["cpu_ms"], 3)
    return row


def _summary(row: dict) -> str:
    ratios = "  ".join(f"{k} {row[k]:.3f}" for k in ("fused_over_unfused", "fused_over_ort", "unfused_over_ort"))
    times = "  ".join(f"{k} {row[k + '_cpu_ms']:8.3f} ms" for k in ("fl_fused", "fl_unfused", "ort"))
    return (f"{row['workload']:16s} {times}   {ratios}  diff {row['fl_fused_max_abs_diff']:.2e}  attention kernels "
            f"{row['fl_fused_attention_kernels']} of {len(row['fl_fused_strategies'])}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--only", default="", help="comma-separated workload names")
    parser.add_argument("--threads", type=int, default=1, help="fusionlang's OpenMP threads and ORT's")
    parser.add_argument("--out", default="", help="default: bench/results/attention[_threadsN].json")
    args = parser.parse_args(argv)
    out = args.out or str(RESULTS / ("attention.json" if args.threads == 1 else f"attention_threads{args.threads}.json"))
    rows: list[dict] = []
    for name in [n for n in args.only.split(",") if n] or list(WORKLOADS):
        rows.append(bench(name, args.rounds, args.threads))
        print(_summary(rows[-1]), flush=True)
    report = dict(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                  machine=platform.processor() or platform.machine(), threads=args.threads, rounds=args.rounds,
                  rows=rows)
    Path(out).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
