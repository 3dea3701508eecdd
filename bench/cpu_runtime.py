"""CPU runtime: fused C against the same C emitter with fusion disabled, and the reference.

Memory-bound blocks written with primitive ops (layer_norm and softmax over 4096x1024
rows, erf GELU, bias + GELU + residual, a 10-op elementwise chain) are compiled as one
group (fused) and one group per op (fusion disabled: every intermediate goes through
memory), and run by the NumPy reference interpreter. The light ONNX models are fused by
``fusionlang.fuse(graph, "apollo")`` and compared the same way; for them the peak resident
memory of one run is measured in a fresh process (compiled against reference).

For each block the JSON also has the bytes its kernels move at the least (each kernel
parameter read or written once) and, for the machine, the time of a plain copy of one
block-sized array (no compute, the floor of a one-pass fused kernel), and the fused
kernel's compute alone: its time with every row in cache (``in-cache``), measured on
blocks that fit L2 and scaled to the full block. A fused kernel cannot beat the larger of
the two, so ``ceiling`` = fusion-off time / that bound is the best speedup over fusion off
that any overlap of memory and compute could reach on this machine.

Times are the best of interleaved runs of the kernels alone (``CompiledGraph.execute``);
for the blocks the end-to-end ``run`` (feeds checked, outputs copied out) is recorded too.
Prints a table and writes bench/results/cpu_runtime.json.

    python bench/cpu_runtime.py [--repeat 5] [--models all|none|resnet50,vgg19] [--openmp]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import _checkout  # noqa: F401  (first: this checkout's fusionlang, not an installed copy)
import fusionlang
from fusionlang import reference
from fusionlang.engine.plan import per_node_plan, single_group_plan
from fusionlang.ops import GraphBuilder
from fusionlang.ops.checking import op_call
from fusionlang.ops.registry import REGISTRY

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_SPEEDUP = 3.0
ROWS, COLS = 4096, 1024
#: row counts whose fused blocks stay in L2, for the kernels' compute time alone
CACHE_ROWS = (16, 48)
LIGHT_MODELS = ["resnet50", "densenet121", "inception_v1", "inception_v2", "shufflenet", "squeezenet", "vgg19",
                "zfnet512", "bvlc_alexnet"]


# ----- the blocks, from primitive ops -------------------------------------------------


def _softmax(b, x):
    m = b.reduce_max(x, axes=[-1])
    e = b.exp(b.sub(x, m))
    return b.div(e, b.reduce_sum(e, axes=[-1]))


def _layer_norm(b, x):
    gamma = b.constant(np.linspace(0.5, 1.5, COLS, dtype=np.float32))
    beta = b.constant(np.linspace(-1, 1, COLS, dtype=np.float32))
    d = b.sub(x, b.reduce_mean(x, axes=[-1]))
    rstd = b.rsqrt(b.add(b.reduce_mean(b.mul(d, d), axes=[-1]), b.constant(np.float32(1e-5))))
    return b.add(b.mul(b.mul(d, rstd), gamma), beta)


def _gelu(b, x):
    t = b.erf(b.div(x, b.constant(np.float32(np.sqrt(2.0)))))
    return b.mul(b.mul(x, b.constant(np.float32(0.5))), b.add(t, b.constant(np.float32(1.0))))


def _bias_gelu_residual(b, x):
    r = b.input("residual", b.graph.types[x].shape)
    biased = b.add(x, b.constant(np.linspace(-0.5, 0.5, COLS, dtype=np.float32)))
    return b.add(_gelu(b, biased), r)


def _chain10(b, x):
    v = x
    ops = [("add", 0.5), ("mul", 0.9), ("relu", None), ("sub", 0.1), ("mul", 1.1), ("add", -0.2), ("abs", None),
           ("mul", 0.7), ("neg", None), ("add", 1.0)]
    for op, c in ops:
        v = b.op(op, v) if c is None else b.op(op, v, b.constant(np.float32(c)))
    return v


BLOCKS = {
    "layer_norm": _layer_norm,
    "softmax": _softmax,
    "gelu": _gelu,
    "bias_gelu_residual": _bias_gelu_residual,
    "chain10": _chain10,
}


def block_graph(name, rows=ROWS):
    b = GraphBuilder(name)
    x = b.input("x", (rows, COLS))
    b.output(BLOCKS[name](b, x))
    graph = b.build()
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(graph.types[n].shape).astype(np.float32) for n in graph.inputs}
    return graph, feeds


# ----- timing -------------------------------------------------------------------------


def timed(fns: dict, repeat: int) -> dict:
    """Best (minimum) seconds of each callable over ``repeat`` runs; runs are interleaved
    so that load from other processes affects every variant alike, and the minimum is the
    estimate least disturbed by it (medians are kept in the JSON as ``<name>_median``)."""
    for fn in fns.values():
        fn()  # warm up (first touch of buffers, caches)
    samples = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            start = time.perf_counter()
            fn()
            samples[k].append(time.perf_counter() - start)
    best = {k: min(v) for k, v in samples.items()}
    best.update({f"{k}_median": statistics.median(v) for k, v in samples.items()})
    return best


def check(got: dict, want: dict) -> float:
    worst = 0.0
    for name, w in want.items():
        g = got[name]
        if not np.allclose(g, w, rtol=1e-3, atol=1e-5):
            raise SystemExit(f"mismatch on {name}: max abs diff {np.abs(g - w).max()}")
        worst = max(worst, float(np.abs(g.astype(np.float64) - w).max()))
    return worst


def global_bytes(compiled, graph) -> int:
    """Bytes the kernels move to and from memory at the least: every parameter of every
    kernel read or written once (write-allocate reads and cache hits not counted)."""
    total = 0
    for k in compiled.kernels:
        for v in k.params:
            if v is not None and v in graph.types:
                t = graph.types[v]
                total += t.size * np.dtype(t.dtype).itemsize
    return total


def copy_seconds(repeat: int) -> float:
    """Best time of a NumPy copy of one ROWSxCOLS float32 array: what reading the input
    and writing the output of a block costs on this machine, with no compute."""
    src = np.ones((ROWS, COLS), np.float32)
    dst = np.empty_like(src)
    return timed({"copy": lambda: np.copyto(dst, src)}, repeat)["copy"]


def in_cache_seconds(name: str, repeat: int, openmp: bool) -> float:
    """Seconds the fused kernel would take on ROWS rows if every row were already in cache:
    its compute alone. Timed on blocks small enough for L2 (input and output together under
    half a MiB) at two row counts, so the per-call overhead cancels in the difference."""
    per_call = {}
    for rows in CACHE_ROWS:
        graph, feeds = block_graph(name, rows)
        fused = fusionlang.compile(single_group_plan(graph), "c", openmp=openmp)
        calls = 200

        def batch(fused=fused, feeds=feeds):
            for _ in range(calls):
                fused.execute(feeds)

        per_call[rows] = timed({"batch": batch}, repeat)["batch"] / calls
    (small, t_small), (large, t_large) = sorted(per_call.items())
    return max(t_large - t_small, 0.0) / (large - small) * ROWS


def bench_block(name: str, repeat: int, openmp: bool, copy_s: float) -> dict:
    graph, feeds = block_graph(name)
    fused = fusionlang.compile(single_group_plan(graph), "c", openmp=openmp)
    unfused = fusionlang.compile(per_node_plan(graph), "c", openmp=openmp)
    want = reference.run(graph, feeds)
    err = max(check(fused.run(feeds), want), check(unfused.run(feeds), want))
    t = timed({"fused": lambda: fused.execute(feeds), "unfused": lambda: unfused.execute(feeds),
               "fused_run": lambda: fused.run(feeds), "unfused_run": lambda: unfused.run(feeds)}, repeat)
    t_ref = timed({"ref": lambda: reference.run(graph, feeds)}, max(1, repeat // 2))["ref"]
    t_fused, t_unfused = t["fused"], t["unfused"]
    t_hot = in_cache_seconds(name, repeat, openmp)
    return {
        "name": name, "ops": len(graph.nodes), "fused_s": t_fused, "unfused_s": t_unfused, "reference_s": t_ref,
        "speedup_vs_unfused": t_unfused / t_fused, "speedup_vs_reference": t_ref / t_fused,
        "fused_run_s": t["fused_run"], "unfused_run_s": t["unfused_run"],
        "fused_median_s": t["fused_median"], "unfused_median_s": t["unfused_median"],
        "run_speedup_vs_unfused": t["unfused_run"] / t["fused_run"],
        "fused_kernels": fused.stats.kernels, "fused_loop_nests": fused.stats.loop_nests,
        "unfused_kernels": unfused.stats.kernels, "fused_arena_bytes": fused.buffers.arena_bytes,
        "unfused_arena_bytes": unfused.buffers.arena_bytes, "max_abs_error": err,
        "fused_global_bytes": global_bytes(fused, graph), "unfused_global_bytes": global_bytes(unfused, graph),
        # no overlap of memory and compute can make the fused kernel faster than both its
        # compute alone and a plain copy of its data: the best speedup it could reach
        "fused_in_cache_s": t_hot, "ceiling_vs_unfused": t_unfused / max(t_hot, copy_s),
    }


# ----- light models -------------------------------------------------------------------


def light_model(name: str):
    import onnx
    from onnx import numpy_helper
    from onnx.backend.test.runner import Runner

    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    model = onnx.load(light / f"light_{name}.onnx")
    inits = {t.name for t in model.graph.initializer}
    feeds = {vi.name: Runner.generate_dummy_data(vi, seed=0, name=name, random=False)
             for vi in model.graph.input if vi.name not in inits}
    expected = numpy_helper.to_array(onnx.load_tensor(light / f"light_{name}_output_0.pb"))
    graph = fusionlang.from_onnx(light / f"light_{name}.onnx")
    return graph, {k: v for k, v in feeds.items() if k in graph.inputs}, expected


def views_plan(graph):
    def kind(node):
        return "view" if REGISTRY.get(node.op).is_view(op_call(graph, node)) else "kernel"

    return per_node_plan(graph, kind)


def measure_memory(name: str, mode: str) -> dict:
    """Peak resident memory of one run, in a fresh process (see _memory_child)."""
    proc = subprocess.run([sys.executable, __file__, "--memory-child", name, mode], capture_output=True, text=True,
                          timeout=1800)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1:] or ["?"]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def _memory_child(name: str, mode: str) -> None:
    # both processes import, read and fuse the model the same way; then one keeps the
    # original graph for the interpreter, the other only its compiled form
    graph, feeds, _ = light_model(name)
    plan = fusionlang.fuse(graph, "apollo")
    if mode == "reference":
        del plan
        run = lambda: reference.run(graph, feeds)  # noqa: E731
    else:
        compiled = fusionlang.compile(plan, "c")
        del plan, graph
        run = lambda: compiled.run(feeds)  # noqa: E731
    import ctypes
    import gc

    gc.collect()
    try:  # hand memory freed while importing/compiling back to the OS before measuring
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    before = _status_kib("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:  # resets VmHWM to the current RSS
        f.write("5")
    run()
    peak = _status_kib("VmHWM")
    print(json.dumps({"rss_before_kib": before, "peak_kib": peak, "run_peak_over_before_kib": peak - before}))


def bench_model(name: str, repeat: int, openmp: bool, memory: bool) -> dict:
    graph, feeds, expected = light_model(name)
    start = time.perf_counter()
    plan = fusionlang.fuse(graph, "apollo")
    fuse_s = time.perf_counter() - start
    start = time.perf_counter()
    fused = fusionlang.compile(plan, "c", openmp=openmp)
    compile_s = time.perf_counter() - start
    unfused = fusionlang.compile(views_plan(plan.graph), "c", openmp=openmp)
    out = fused.run(feeds)[plan.graph.outputs[0]]
    ok = bool(np.allclose(out, expected, rtol=1e-3, atol=1e-5))
    reps = max(1, repeat // 2)
    t = timed({"fused": lambda: fused.execute(feeds), "unfused": lambda: unfused.execute(feeds)}, reps)
    row = {
        "name": name, "ops": len(plan.graph.nodes), "matches_expected": ok,
        "fused_s": t["fused"], "unfused_s": t["unfused"],
        "fused_median_s": t["fused_median"], "unfused_median_s": t["unfused_median"],
        "reference_s": timed({"ref": lambda: reference.run(graph, feeds)}, 1)["ref"],
        "fused_kernels": fused.stats.kernels, "unfused_kernels": unfused.stats.kernels,
        "fused_arena_bytes": fused.buffers.arena_bytes, "unfused_arena_bytes": unfused.buffers.arena_bytes,
        "unshared_arena_bytes": fused.buffers.unshared_bytes, "fuse_s": fuse_s, "compile_s": compile_s,
    }
    row["speedup_vs_unfused"] = row["unfused_s"] / row["fused_s"]
    row["speedup_vs_reference"] = row["reference_s"] / row["fused_s"]
    if memory:
        row["memory_compiled"] = measure_memory(name, "compiled")
        row["memory_reference"] = measure_memory(name, "reference")
    return row


# ----- report -------------------------------------------------------------------------


def table(rows: list[dict], title: str, memory: bool = False) -> str:
    head = f"{'':22s} {'ops':>4s} {'fused ms':>9s} {'unfused ms':>10s} {'ref ms':>9s} {'x unfused':>9s} {'x ref':>7s}" \
           f" {'kernels':>9s}"
    ceiling = any("ceiling_vs_unfused" in r for r in rows)
    if ceiling:
        head += f" {'in-cache ms':>11s} {'ceiling':>7s}"
    if memory:
        head += f" {'peak MiB (C/ref)':>17s}"
    lines = [title, head]
    for r in rows:
        line = (f"{r['name']:22s} {r['ops']:4d} {r['fused_s'] * 1e3:9.2f} {r['unfused_s'] * 1e3:10.2f} "
                f"{r['reference_s'] * 1e3:9.2f} {r['speedup_vs_unfused']:9.2f} {r['speedup_vs_reference']:7.2f} "
                f"{r['fused_kernels']:>4d}/{r['unfused_kernels']:<4d}")
        if ceiling:
            line += f" {r['fused_in_cache_s'] * 1e3:11.2f} {r['ceiling_vs_unfused']:7.2f}"
        if memory and "memory_compiled" in r:
            mc, mr = r["memory_compiled"].get("peak_kib"), r["memory_reference"].get("peak_kib")
            if mc and mr:
                line += f" {mc / 1024:8.0f}/{mr / 1024:<8.0f}"
        lines.append(line)
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--models", default="all", help="all, none, or a comma list of light model names")
    ap.add_argument("--blocks", default="all", help="all, none, or a comma list of " + ", ".join(BLOCKS))
    ap.add_argument("--openmp", action="store_true", help="parallelize outer loops with OpenMP")
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    ap.add_argument("--memory-child", nargs=2, metavar=("MODEL", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.memory_child:
        _memory_child(*args.memory_child)
        return 0
    load_before = os.getloadavg()  # other processes share the cores and memory bandwidth
    blocks = list(BLOCKS) if args.blocks == "all" else ([] if args.blocks == "none" else args.blocks.split(","))
    models = LIGHT_MODELS if args.models == "all" else ([] if args.models == "none" else args.models.split(","))
    copy_s = copy_seconds(args.repeat)
    block_rows = [bench_block(name, args.repeat, args.openmp, copy_s) for name in blocks]
    if block_rows:
        print(table(block_rows, f"memory-bound blocks ({ROWS}x{COLS} float32), target >= {TARGET_SPEEDUP}x over "
                                f"fusion-disabled C"))
    model_rows = []
    for name in models:
        model_rows.append(bench_model(name, args.repeat, args.openmp, not args.no_memory))
        lines = table(model_rows[-1:], "light models (apollo plan)", memory=not args.no_memory).split("\n")
        print("\n".join(lines if len(model_rows) == 1 else lines[2:]), flush=True)
    result = {
        "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count(),
                    "python": platform.python_version()},
        "openmp": args.openmp, "repeat": args.repeat, "target_speedup": TARGET_SPEEDUP,
        "copy_s": copy_s, "load_average_before_after": [load_before, os.getloadavg()],
        "blocks": block_rows, "models": model_rows,
        "blocks_meeting_target": sum(1 for r in block_rows if r["speedup_vs_unfused"] >= TARGET_SPEEDUP),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "cpu_runtime.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
