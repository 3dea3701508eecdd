"""The cpu cost-model device's flop rate per kind of kernel, measured through the C backend.

Each kind (fusionlang/engine/kernel_kind.py) gets a few representative workloads, small
graphs the C backend runs as that kind of kernel: dense convs and matmuls (the GEMM
template), depthwise and grouped convs (their direct kernels), GEMV-shaped matmuls,
scaled dot-product attention (one kernel), pools, two matmuls forced into one group (one
loop nest), and elementwise/reduction groups (loop nests). Every workload is fused with the
default rules (the loop-contraction one: as a single hand-made group) and compiled for C at
one thread; the benchmark checks that the cost model classifies each of its groups as the
kind it stands for and that the backend's kernel says the same (its template kind).

A workload's rate is the cost model's flops for its groups over the process CPU time of one
``CompiledGraph.execute`` (a sample is enough calls back to back for about 20 MFLOP of work;
the median of ``--rounds`` samples, workloads interleaved round by round, so load from other
processes falls on all alike). A kind's rate is the geometric mean of its workloads' rates.
Memory-bound kinds (gemv, pool, loop) thus include their memory time in the rate.

    python bench/cpu_rates.py [--rounds 7] [--out bench/results/cpu_rates.json]

The table printed is what fusionlang/engine/cost.py's CPU_RATES holds (rounded to two
significant digits); a test keeps the two equal.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Callable  # noqa: E402

import numpy as np  # noqa: E402

import _checkout  # noqa: E402,F401  (first of ours: this checkout's fusionlang)
import fusionlang  # noqa: E402
from fusionlang.engine.cost import CostModel  # noqa: E402
from fusionlang.engine.kernel_kind import (ATTENTION, DENSE, DEPTHWISE, GEMV, GROUPED, KINDS, LOOP,  # noqa: E402
                                           LOOP_CONTRACTION, POOL)
from fusionlang.engine.plan import single_group_plan  # noqa: E402
from fusionlang.ir.graph import Graph  # noqa: E402
from fusionlang.ops import GraphBuilder  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
#: the calls in one sample add up to about this many flops
SAMPLE_FLOPS = 20e6
#: the backend's word for the template a kind runs as (KernelInfo.detail's first word)
BACKEND_KIND = {DENSE: "GEMM", GEMV: "GEMM", DEPTHWISE: "depthwise", GROUPED: "grouped", POOL: "pooling"}


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str
    build: Callable[[], Graph]
    #: fuse as one hand-made group instead of with the default rules
    one_group: bool = False


def _rng_weights(shape) -> np.ndarray:
    return (np.random.default_rng(0).standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)


def conv(channels_in: int, channels_out: int, plane: int, kernel: int, stride: int = 1, group: int = 1):
    def build() -> Graph:
        b = GraphBuilder("conv")
        x = b.input("x", (1, channels_in, plane, plane))
        w = b.constant(_rng_weights((channels_out, channels_in // group, kernel, kernel)))
        b.output(b.conv(x, w, group=group, strides=(stride, stride), pads=(kernel // 2,) * 4))
        return b.build()
    return build


def matmul(m: int, k: int, n: int):
    def build() -> Graph:
        b = GraphBuilder("matmul")
        x = b.input("x", (m, k))
        b.output(b.matmul(x, b.constant(_rng_weights((k, n)))))
        return b.build()
    return build


def matvec(m: int, k: int):
    """A matrix by an input column (n = 1)."""
    def build() -> Graph:
        b = GraphBuilder("matvec")
        x = b.input("x", (k, 1))
        b.output(b.matmul(b.constant(_rng_weights((m, k))), x))
        return b.build()
    return build


def attention(heads: int, seq: int, dim: int):
    def build() -> Graph:
        b = GraphBuilder("attention")
        q = b.input("q", (heads, seq, dim))
        k = b.input("k", (heads, seq, dim))
        v = b.input("v", (heads, seq, dim))
        scores = b.mul(b.matmul(q, b.transpose(k, perm=(0, 2, 1))), b.constant(np.float32(1 / np.sqrt(dim))))
        b.output(b.matmul(b.softmax(scores, axis=-1), v))
        return b.build()
    return build


def pool(op: str, channels: int, plane: int, kernel: int, stride: int):
    def build() -> Graph:
        b = GraphBuilder("pool")
        x = b.input("x", (1, channels, plane, plane))
        b.output(getattr(b, op)(x, kernel_shape=(kernel, kernel), strides=(stride, stride),
                                pads=(kernel // 2,) * 4))
        return b.build()
    return build


def two_matmuls(m: int, k: int):
    """matmul -> relu -> matmul: one group only as a loop nest (no template takes two)."""
    def build() -> Graph:
        b = GraphBuilder("two_matmuls")
        x = b.input("x", (m, k))
        h = b.relu(b.matmul(x, b.constant(_rng_weights((k, k)))))
        b.output(b.matmul(h, b.constant(_rng_weights((k, k)))))
        return b.build()
    return build


def softmax_rows(rows: int, columns: int):
    def build() -> Graph:
        b = GraphBuilder("softmax")
        b.output(b.softmax(b.input("x", (rows, columns)), axis=-1))
        return b.build()
    return build


def gelu_tanh(size: int):
    """x * (1 + tanh(0.8 * (x + 0.044715 x^3))) / 2 elementwise: a transcendental epilogue's body."""
    def build() -> Graph:
        b = GraphBuilder("gelu")
        x = b.input("x", (size,))
        cube = b.mul(b.mul(x, x), x)
        inner = b.mul(b.add(x, b.mul(cube, b.constant(np.float32(0.044715)))), b.constant(np.float32(0.7978846)))
        b.output(b.mul(b.mul(x, b.add(b.tanh(inner), b.constant(np.float32(1.0)))), b.constant(np.float32(0.5))))
        return b.build()
    return build


WORKLOADS = [
    Workload("conv3x3_c64_56", DENSE, conv(64, 64, 56, 3)),
    Workload("conv1x1_c256_c64_56", DENSE, conv(256, 64, 56, 1)),
    Workload("matmul_128x768x768", DENSE, matmul(128, 768, 768)),
    Workload("dw3x3_c144_56", DEPTHWISE, conv(144, 144, 56, 3, group=144)),
    Workload("dw3x3_c576_14", DEPTHWISE, conv(576, 576, 14, 3, group=576)),
    Workload("dw5x5_c240_28", DEPTHWISE, conv(240, 240, 28, 5, group=240)),
    Workload("grouped3x3_c64_g8_28", GROUPED, conv(64, 64, 28, 3, group=8)),
    Workload("grouped3x3_c128_g8_14", GROUPED, conv(128, 128, 14, 3, group=8)),
    Workload("gemv_row_1x1024x1000", GEMV, matmul(1, 1024, 1000)),
    Workload("gemv_column_1000x1024x1", GEMV, matvec(1000, 1024)),
    Workload("attention_h4_s128_d32", ATTENTION, attention(4, 128, 32)),
    Workload("attention_h12_s64_d64", ATTENTION, attention(12, 64, 64)),
    Workload("max_pool3x3s2_c64_112", POOL, pool("max_pool", 64, 112, 3, 2)),
    Workload("average_pool3x3s1_c192_28", POOL, pool("average_pool", 192, 28, 3, 1)),
    Workload("two_matmuls_64x64", LOOP_CONTRACTION, two_matmuls(64, 64), one_group=True),
    Workload("two_matmuls_128x128", LOOP_CONTRACTION, two_matmuls(128, 128), one_group=True),
    Workload("softmax_256x1024", LOOP, softmax_rows(256, 1024)),
    Workload("gelu_tanh_262144", LOOP, gelu_tanh(1 << 18)),
]


@dataclass
class Prepared:
    workload: Workload
    run: Callable[[], None]
    flops: float
    repeat: int


def prepare(workload: Workload) -> Prepared:
    graph = workload.build()
    plan = single_group_plan(graph) if workload.one_group else fusionlang.fuse(graph)
    kernels = [g for g in plan.groups if g.kind == "kernel"]
    cost = CostModel(plan.graph, device_name="cpu")
    priced = [cost.group_cost(g.nodes) for g in kernels]
    kinds = {p.kernel for p in priced}
    if kinds != {workload.kind}:
        sys.exit(f"{workload.name}: the cost model prices its groups as {sorted(kinds)}, not {workload.kind}")
    compiled = fusionlang.compile(plan, "c")
    _check_backend_kind(workload, compiled.kernels)
    rng = np.random.default_rng(1)
    feeds = {name: rng.standard_normal(graph.types[name].shape).astype(np.float32) for name in graph.inputs}
    flops = sum(p.flops for p in priced)
    repeat = max(1, round(SAMPLE_FLOPS / flops))

    def run() -> None:
        for _ in range(repeat):
            compiled.execute(feeds)
    return Prepared(workload, run, flops, repeat)


def _check_backend_kind(workload: Workload, kernels) -> None:
    """The backend must run the workload as the kernel its kind names."""
    details = [k.detail.split(" ")[0] for k in kernels]
    strategies = [k.strategy for k in kernels]
    expected = BACKEND_KIND.get(workload.kind)
    if workload.kind == ATTENTION:
        ok = strategies == ["attention template"]
    elif expected is not None:
        ok = details == [expected]
    else:  # loop nests: no template call among them
        ok = all(s not in ("gemm template", "attention template") for s in strategies)
    if not ok:
        sys.exit(f"{workload.name}: the backend runs it as {strategies} {details}, not as {workload.kind}")


def measure(prepared: list[Prepared], rounds: int) -> dict[str, float]:
    """Median process CPU seconds per call of each workload, interleaved round by round."""
    samples: dict[str, list[float]] = {p.workload.name: [] for p in prepared}
    for p in prepared:
        p.run()  # warm up
    for _ in range(rounds):
        for p in prepared:
            started = time.process_time()
            p.run()
            samples[p.workload.name].append((time.process_time() - started) / p.repeat)
    return {name: statistics.median(s) for name, s in samples.items()}


def two_digits(rate: float) -> float:
    """A rate rounded to two significant digits, as cost.py's table writes it."""
    return float(f"{rate:.2g}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", default=str(RESULTS / "cpu_rates.json"))
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    prepared = [prepare(w) for w in WORKLOADS]
    seconds = measure(prepared, args.rounds)
    rows = []
    print(f"{'workload':28s} {'kind':17s} {'MFLOP':>8s} {'cpu ms':>9s} {'GFLOP/s':>8s}")
    for p in prepared:
        s = seconds[p.workload.name]
        rows.append({"workload": p.workload.name, "kind": p.workload.kind, "flops": p.flops,
                     "cpu_ms": round(s * 1e3, 5), "gflops": round(p.flops / s / 1e9, 2)})
        print(f"{p.workload.name:28s} {p.workload.kind:17s} {p.flops / 1e6:8.2f} {s * 1e3:9.4f} "
              f"{rows[-1]['gflops']:8.2f}")
    rates = {}
    for kind in KINDS:
        measured = [r["flops"] / (r["cpu_ms"] / 1e3) for r in rows if r["kind"] == kind]
        rates[kind] = two_digits(float(np.exp(np.mean(np.log(measured)))))
    print("rates (flop/s, geometric mean per kind, two digits): "
          + ", ".join(f"{k} {v:.2g}" for k, v in rates.items()))
    report = dict(command="python bench/cpu_rates.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                  date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                  machine=platform.processor() or platform.machine(), cores=os.cpu_count(), threads=1,
                  rounds=args.rounds, load_average_start=[round(v, 2) for v in load_before],
                  load_average_end=[round(v, 2) for v in os.getloadavg()], rates=rates, rows=rows)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
