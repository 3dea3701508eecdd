"""fusionlang's CUDA on a GPU against CuPy op by op, PyTorch eager and torch.compile.

One command on a GPU machine (CuPy, and PyTorch where installed)::

    python bench/gpu_runtime.py [--rounds 20] [--only resnet50,softmax_4096x1024] [--dry]
        [--torch-compile all|blocks|none] [--out FILE]

Workloads: the 9 light ONNX models; the memory-bound blocks of bench/model_runtime.py
(layer_norm, softmax, erf GELU, bias + GELU + residual, a 10-op chain) at 4096 x 1024 and at
16384 x 4096; and a 4096^3 matmul at both precisions of the GEMM template.

Competitors, all on device-resident inputs:

* ``fused`` (and ``fused_tf32`` for the matmul): ``fusionlang.fuse(graph, "apollo")``
  compiled for CUDA, timed through ``CompiledGraph.launch`` (one CUDA graph replay);
* ``cupy_ops``: the imported graph run op by op, each op's NumPy reference called on CuPy
  arrays (``matmul`` is cuBLAS); an op whose reference CuPy cannot run goes through the
  host and is named in the JSON (``host_ops``), so read its time with that in mind;
* ``torch`` and ``torch_compile``: PyTorch eager and ``torch.compile`` (Inductor), the
  blocks written in PyTorch here, the light models through onnx2torch where installed;
  for the matmul, cuBLAS with TF32 allowed (the target's yardstick).

``--torch-compile blocks`` leaves torch.compile out of the light models (Inductor takes tens
of seconds to compile each, where a lent GPU's minutes are few).

Each workload: medians over interleaved rounds of CUDA-event time (wall time beside), the
largest difference of each output from ONNX Runtime on the CPU (the matmul: from NumPy),
achieved GB/s against the device's HBM roofline (blocks: the bytes the block must read and
write) and TFLOP/s against its dense TF32 tensor-core peak (conv and matmul FLOPs). Prints a
table and writes bench/results/gpu_runtime.json (or ``--out``) naming the device, rewritten
after every workload so that a run cut short keeps what it measured. A workload that fails
(a compile error, a launch error) is a row with its ``error`` and the run goes on.

Without a CUDA device visible to CuPy it says so and exits 0, measuring nothing. ``--dry``
(what it can do anywhere) builds every chosen workload's fused plan and CUDA source,
compiles each unit with NVRTC for sm_90 and prints what would be measured.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import _checkout  # noqa: F401  (first of ours: this checkout's fusionlang)
import model_runtime as mr
import numpy as np
import onnx

import fusionlang
import fusionlang.backend as backend
from fusionlang.ir.graph import Graph
from fusionlang.ops.checking import op_call
from fusionlang.ops.evaluate import evaluate_node
from fusionlang.ops.registry import registry_of

RESULTS = Path(__file__).resolve().parent / "results"
BLOCK_SIZES = {"4096x1024": (4096, 1024), "16384x4096": (16384, 4096)}
MATMUL_SIZE = 4096
#: dense TF32 tensor-core TFLOP/s by device name (NVIDIA's data sheets); others: not reported
TF32_PEAK_TFLOPS = {"H100 PCIe": 378.0, "H100": 494.7, "H200": 494.7, "A100": 156.0, "L40S": 183.0}


# ----- workloads ------------------------------------------------------------------------


def matmul_model(n: int = MATMUL_SIZE) -> onnx.ModelProto:
    g = mr._Onnx("matmul", seed=5)
    return g.model("x", (n, n), g.op("MatMul", "x", g.weight((n, n))))


def workloads() -> dict:
    """name -> a function building its ONNX model."""
    found = {name: (lambda n=name: mr.light_model(n)) for name in mr.LIGHT_MODELS}
    for size, (rows, cols) in BLOCK_SIZES.items():
        for block in mr.BLOCKS:
            found[f"{block}_{size}"] = lambda b=block, r=rows, c=cols: mr._block(b, mr.BLOCKS[b], r, c)
    found[f"matmul_{MATMUL_SIZE}"] = matmul_model
    return found


def block_of(name: str) -> str | None:
    """The block a workload name runs (``softmax_4096x1024`` -> ``softmax``), else None."""
    for size in BLOCK_SIZES:
        if name.endswith("_" + size) and name[:-len(size) - 1] in mr.BLOCKS:
            return name[:-len(size) - 1]
    return None


def contraction_flops(graph: Graph) -> int:
    """2 x multiply-adds of every conv, matmul and gemm of ``graph``."""
    total = 0
    for node in graph.nodes:
        if node.op not in ("conv", "matmul", "gemm"):
            continue
        call = op_call(graph, node)
        out = call.out_types[0]
        if node.op == "conv":
            w = call.input(1)
            total += 2 * out.size * int(np.prod(w.shape[1:]))
        elif node.op == "matmul":
            total += 2 * out.size * call.input(0).shape[-1]
        else:
            a = call.input(0)
            total += 2 * out.size * (a.shape[0] if call.attrs["trans_a"] else a.shape[1])
    return total


def io_bytes(graph: Graph) -> int:
    """Bytes a run must read and write at least: its inputs, its outputs and its constants."""
    values = set(graph.inputs) | set(graph.outputs) | set(graph.constants)
    return sum(graph.types[v].nbytes for v in values)


def hbm_peak_bytes(properties: dict) -> float | None:
    """HBM bandwidth from CUDA's device properties (memory clock in kHz, double data rate);
    None where the runtime no longer reports the clock."""
    clock, width = properties.get("memoryClockRate"), properties.get("memoryBusWidth")
    return 2.0 * clock * 1e3 * width / 8 if clock and width else None


def tf32_peak_tflops(device_name: str) -> float | None:
    for key, peak in TF32_PEAK_TFLOPS.items():  # "H100 PCIe" before "H100"
        if key in device_name:
            return peak
    return None


# ----- competitors ------------------------------------------------------------------------


class OpByOp:
    """A graph run node by node, each op's NumPy reference called on arrays of ``xp`` (CuPy
    on the GPU), or the function ``device_ops`` names for its op (CuPy's own erf: the
    reference's erf is NumPy-only). A node whose reference fails on them is computed on the
    host from copies and its op counted in ``host_ops``."""

    def __init__(self, graph: Graph, xp, to_host, device_ops: dict | None = None):
        self.graph, self.xp, self.to_host = graph, xp, to_host
        self.device_ops = device_ops or {}
        self.registry = registry_of(graph)
        self.constants = {k: xp.asarray(v) for k, v in graph.constants.items()}
        self.host_ops: Counter = Counter()
        self.on_host: set[str] = set()

    def __call__(self, feeds: dict) -> list:
        env = dict(self.constants)
        env.update(feeds)
        for node in self.graph.nodes:
            args = [env[v] if v else None for v in node.inputs]
            for out, array in zip(node.outputs, self._node(node, args)):
                env[out] = array
        return [env[name] for name in self.graph.outputs]

    def _node(self, node, args) -> list:
        if node.name not in self.on_host:
            present = list(args)
            while present and present[-1] is None:
                present.pop()
            try:
                if node.op in self.device_ops:
                    results = [self.device_ops[node.op](*present)]
                else:
                    results = self.registry.get(node.op).reference(present, node.attrs)
                return [self._typed(node, k, r) for k, r in enumerate(results)]
            except Exception:  # noqa: BLE001 - any op the device arrays cannot run goes to the host
                self.on_host.add(node.name)
                self.host_ops[node.op] += 1
        host = [None if a is None else self.to_host(a) for a in args]
        results = evaluate_node(node, host, self.registry, out_dtypes=[self.graph.types[o].dtype for o in node.outputs])
        return [self.xp.asarray(r) for r in results]

    def _typed(self, node, k: int, result):
        want = self.graph.types[node.outputs[k]]
        array = self.xp.asarray(result)
        if tuple(array.shape) != tuple(want.shape):
            raise ValueError(f"{node.op}: shape {array.shape}, expected {want.shape}")
        return array.astype(want.dtype, copy=False)


def cupy_device_ops() -> dict:
    """Ops whose NumPy reference CuPy cannot run, as CuPy's own functions."""
    try:
        from cupyx.scipy.special import erf
    except ImportError:
        return {}
    return {"erf": erf}


def torch_block(block: str, model: onnx.ModelProto, torch):
    """The block written in PyTorch (its constants read from ``model``), or None."""
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}

    def erf_gelu(x):
        return x * 0.5 * (torch.erf(x / math.sqrt(2.0)) + 1.0)

    if block == "layer_norm":
        return lambda x: torch.nn.functional.layer_norm(x, x.shape[-1:], eps=1e-5)
    if block == "softmax":
        return lambda x: torch.softmax(x, dim=-1)
    if block == "gelu":
        return erf_gelu
    if block == "bias_gelu_residual":
        (bias,) = [v for v in inits.values() if v.ndim == 1 and v.size > 1]
        bias = torch.from_numpy(bias).cuda()
        return lambda x: erf_gelu(x + bias) + x
    if block == "chain10":
        def chain(x):
            c = [0.5 + k / 10 for k in range(10)]
            y = x * c[0] + c[1]
            y = torch.tanh(y) * c[3] - c[4]
            y = torch.sqrt(torch.abs(y) + c[6]) * c[8]
            return -y
        return chain
    return None


def competitors(name: str, model: onnx.ModelProto, cp, torch, torch_compile: str = "all") -> tuple[dict, list, dict]:
    """(name -> (run, stream for its events), feeds on the host, facts) of one workload."""
    graph = fusionlang.from_onnx(model)
    feeds = mr.feeds_for(model, graph)
    plan = fusionlang.fuse(graph, "apollo")
    fns = {}
    fused = fusionlang.compile(plan, "cuda")
    outputs = fused.run(feeds)  # also puts the feeds on the device for launch()
    fns["fused"] = (fused.launch, fused.launch())
    if name.startswith("matmul"):
        tf32 = fusionlang.compile(plan, "cuda", precision="tf32")
        tf32.run(feeds)
        fns["fused_tf32"] = (tf32.launch, tf32.launch())
    device_feeds = {k: cp.asarray(v) for k, v in feeds.items()}
    ops = OpByOp(graph, cp, cp.asnumpy, cupy_device_ops())
    stream = cp.cuda.get_current_stream()
    fns["cupy_ops"] = (lambda: ops(device_feeds), stream)
    torch_error = None
    try:
        fns.update(_torch_competitors(name, model, feeds, torch, cp, torch_compile) if torch is not None else {})
    except Exception as exc:  # noqa: BLE001 - PyTorch's side failing leaves the others measured
        torch_error = f"{type(exc).__name__}: {str(exc)[:500]}"
    facts = {"torch_error": torch_error, "kernels": fused.stats.kernels, "flops": contraction_flops(graph), "bytes": io_bytes(graph),
             "strategies": sorted({k.strategy for k in fused.kernels if k.strategy.startswith("GEMM")}),
             "ops": ops, "outputs": [outputs[o] for o in graph.outputs]}
    return fns, feeds, facts


def without_initializer_inputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy whose graph inputs are only the fed ones, at an IR version (4 or later) where
    an initializer need not be an input: older models (the light ones) list every weight as
    a graph input too. onnx2torch drops those inputs itself; the copy is for the folding
    below, whose new initializers must be valid without being inputs."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    weights = {t.name for t in copy.graph.initializer}
    fed = [i for i in copy.graph.input if i.name not in weights]
    del copy.graph.input[:]
    copy.graph.input.extend(fed)
    copy.ir_version = max(copy.ir_version, 4)  # IR 3 wanted every initializer to be an input too
    return copy


def for_onnx2torch(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy onnx2torch converts: besides listing weights as inputs, the light models build
    their weights with ConstantOfShape, and onnx2torch's Conv reads its weight from the
    initializers (KeyError on the H200, 2026-11-28): each such ConstantOfShape of a constant
    shape becomes the initializer it computes."""
    copy = without_initializer_inputs(model)
    constants = {t.name: t for t in copy.graph.initializer}
    kept = []
    for node in copy.graph.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in constants:
            kept.append(node)
            continue
        shape = tuple(int(d) for d in onnx.numpy_helper.to_array(constants[node.input[0]]))
        (value,) = [onnx.numpy_helper.to_array(a.t) for a in node.attribute if a.name == "value"] or [np.zeros(1, np.float32)]
        copy.graph.initializer.append(onnx.numpy_helper.from_array(np.full(shape, value.item(), value.dtype),
                                                                   node.output[0]))
    del copy.graph.node[:]
    copy.graph.node.extend(kept)
    return copy


def _torch_competitors(name: str, model, feeds: dict, torch, cp, torch_compile: str = "all") -> dict:
    x = [torch.from_numpy(v).cuda() for v in feeds.values()]
    stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    block = block_of(name)
    if name.startswith("matmul"):
        torch.backends.cuda.matmul.allow_tf32 = True  # cuBLAS at TF32: the yardstick of the target
        (w,) = [torch.from_numpy(onnx.numpy_helper.to_array(t)).cuda() for t in model.graph.initializer]
        return {"torch_cublas_tf32": (lambda: torch.matmul(x[0], w), stream)}
    if block is not None:
        fn = torch_block(block, model, torch)
    else:
        try:
            from onnx2torch import convert
        except ImportError:
            return {}
        fn = convert(for_onnx2torch(model)).eval().cuda()

    def inference(f):
        def run():
            with torch.inference_mode():  # no autograd bookkeeping: what a deployed model pays
                return f(*x)
        return run

    found = {"torch": (inference(fn), stream)}
    if torch_compile == "all" or (torch_compile == "blocks" and block is not None):
        compiled = torch.compile(fn)
        inference(compiled)()  # compile now, not in the first timed round
        found["torch_compile"] = (inference(compiled), stream)
    return found


# ----- measuring --------------------------------------------------------------------------


def interleaved(fns: dict, rounds: int, cp) -> dict:
    """Median CUDA-event and wall milliseconds of each competitor, rounds interleaved."""
    for run, _ in fns.values():
        run()
    cp.cuda.Device().synchronize()
    samples = {key: [] for key in fns}
    for _ in range(rounds):
        for key, (run, stream) in fns.items():
            start, end = cp.cuda.Event(), cp.cuda.Event()
            wall = time.perf_counter()
            start.record(stream)
            run()
            end.record(stream)
            end.synchronize()
            samples[key].append((cp.cuda.get_elapsed_time(start, end), 1e3 * (time.perf_counter() - wall)))
    return {key: {"gpu_ms": statistics.median(s[0] for s in rows), "wall_ms": statistics.median(s[1] for s in rows)}
            for key, rows in samples.items()}


def outputs_of(fns: dict, fused_outputs, cp, torch) -> dict:
    """Each competitor's outputs on the host."""
    out = {"fused": fused_outputs}
    for key, (run, _) in fns.items():
        if key.startswith("fused"):
            continue
        result = run()
        result = result if isinstance(result, (list, tuple)) else [result]
        out[key] = [r.detach().cpu().numpy() if torch is not None and isinstance(r, torch.Tensor)
                    else cp.asnumpy(r) for r in result]
    return out


def oracle(name: str, model: onnx.ModelProto, feeds: dict) -> list:
    if name.startswith("matmul"):
        (w,) = [onnx.numpy_helper.to_array(t) for t in model.graph.initializer]
        return [feeds["x"].astype(np.float64) @ w.astype(np.float64)]
    session = mr.ort_session(model, 0)
    return session.run([o.name for o in session.get_outputs()], feeds)


def largest_difference(got: list, want: list) -> float:
    worst = 0.0
    for g, w in zip(got, want):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        worst = max(worst, float(np.abs(g.reshape(w.shape) - w).max()) / max(1.0, float(np.abs(w).max())))
    return worst


def bench(name: str, model: onnx.ModelProto, rounds: int, cp, torch, device: dict, torch_compile: str = "all") -> dict:
    fns, feeds, facts = competitors(name, model, cp, torch, torch_compile)
    timing = interleaved(fns, rounds, cp)
    results = outputs_of(fns, facts["outputs"], cp, torch)
    want = oracle(name, model, feeds)
    row = {"workload": name, "kernels": facts["kernels"], "gemm_tiles": facts["strategies"],
           "host_ops": dict(facts["ops"].host_ops), "timing": timing,
           **({"torch_error": facts["torch_error"]} if facts["torch_error"] else {}),
           "max_rel_diff": {k: largest_difference(v, want) for k, v in results.items()}}
    best = min(t["gpu_ms"] for k, t in timing.items() if k.startswith("fused"))
    seconds = best / 1e3
    if block_of(name) is not None:
        row["gb_per_s"] = facts["bytes"] / seconds / 1e9
        if device["hbm_bytes_per_s"]:
            row["hbm_roofline_fraction"] = facts["bytes"] / seconds / device["hbm_bytes_per_s"]
    if facts["flops"]:
        row["tflop_per_s"] = facts["flops"] / seconds / 1e12
        if device["tf32_peak_tflops"]:
            row["tf32_peak_fraction"] = row["tflop_per_s"] / device["tf32_peak_tflops"]
    for other in ("cupy_ops", "torch", "torch_compile", "torch_cublas_tf32"):
        if other in timing:
            row[f"fused_over_{other}"] = timing["fused"]["gpu_ms"] / timing[other]["gpu_ms"]
    if "fused_tf32" in timing and "torch_cublas_tf32" in timing:
        row["fused_tf32_over_cublas_tf32"] = timing["fused_tf32"]["gpu_ms"] / timing["torch_cublas_tf32"]["gpu_ms"]
    return row


def table(rows: list[dict]) -> str:
    keys = ["fused", "fused_tf32", "cupy_ops", "torch", "torch_compile", "torch_cublas_tf32"]
    head = f"{'workload':30}" + "".join(f"{k:>18}" for k in keys) + f"{'GB/s':>8}{'TFLOP/s':>9}{'max diff':>10}"
    lines = [head, "-" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['workload']:30}failed: {r['error']}")
            continue
        t = r["timing"]
        cells = "".join(f"{t[k]['gpu_ms']:18.3f}" if k in t else f"{'-':>18}" for k in keys)
        gbs = f"{r['gb_per_s']:8.0f}" if "gb_per_s" in r else f"{'-':>8}"
        tfs = f"{r['tflop_per_s']:9.1f}" if "tflop_per_s" in r else f"{'-':>9}"
        lines.append(f"{r['workload']:30}{cells}{gbs}{tfs}{max(r['max_rel_diff'].values()):10.1e}")
    return "\n".join(lines)


# ----- the dry path -----------------------------------------------------------------------


def dry(chosen: list[str], found: dict) -> int:
    """What can be done without a GPU: plan, emit and NVRTC-compile each workload."""
    reason = backend.nvrtc_available()
    print(f"{'workload':30}{'groups':>7}{'units':>7}{'GFLOP':>9}{'MB moved':>10}  NVRTC (compute_90)")
    for name in chosen:
        graph = fusionlang.from_onnx(found[name]())
        plan = fusionlang.fuse(graph, "apollo")
        sources = backend.cuda_sources(plan)
        if reason is None:
            for source in sources.values():
                backend.nvrtc_compile(source, "compute_90")
        print(f"{name:30}{len(plan.groups):7}{len(sources):7}{contraction_flops(graph) / 1e9:9.2f}"
              f"{io_bytes(graph) / 2**20:10.1f}  {'compiled' if reason is None else 'not available: ' + reason}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--only", default="", help="comma-separated workload names")
    parser.add_argument("--dry", action="store_true", help="no GPU needed: plan, emit and NVRTC-compile only")
    parser.add_argument("--torch-compile", choices=("all", "blocks", "none"), default="all",
                        help="which workloads torch.compile competes on (default all)")
    parser.add_argument("--out", type=Path, default=RESULTS / "gpu_runtime.json", help="the JSON to write")
    args = parser.parse_args(argv)
    found = workloads()
    chosen = [w for w in args.only.split(",") if w] or list(found)
    unknown = [w for w in chosen if w not in found]
    if unknown:
        parser.error(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(found)}")
    if args.dry:
        return dry(chosen, found)
    if not backend.cuda_available():
        print("no CUDA device visible to CuPy: nothing measured (bench/gpu_runtime.py --dry plans, emits and "
              "NVRTC-compiles the workloads without one)")
        return 0
    import cupy as cp  # here: only with a device

    try:
        import torch
    except ImportError:
        torch = None
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    device = {"name": name, "hbm_bytes_per_s": hbm_peak_bytes(props), "tf32_peak_tflops": tf32_peak_tflops(name),
              "sms": props["multiProcessorCount"], "compute_capability": f"{props['major']}.{props['minor']}"}
    result = {"date": time.strftime("%Y-%m-%d"), "device": device, "rounds": args.rounds,
              "torch": None if torch is None else torch.__version__, "cupy": cp.__version__,
              "torch_compile": args.torch_compile, "rows": []}
    for workload in chosen:
        print(f"... {workload}", file=sys.stderr, flush=True)
        started = time.perf_counter()
        result["rows"].append(measured(workload, found[workload], args, cp, torch, device))
        print(f"    {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    rows = result["rows"]
    hbm = f"{device['hbm_bytes_per_s'] / 1e12:.2f} TB/s" if device["hbm_bytes_per_s"] else "unknown"
    print(f"device: {name}, HBM {hbm}, TF32 dense peak "
          f"{device['tf32_peak_tflops'] or 'unknown'} TFLOP/s; CUDA-event medians in ms")
    print(table(rows))
    return 0


def measured(workload: str, build, args, cp, torch, device: dict) -> dict:
    """The workload's row, or its error: one failing workload does not end the run."""
    try:
        return bench(workload, build(), args.rounds, cp, torch, device, args.torch_compile)
    except Exception as exc:  # noqa: BLE001 - recorded in the row, and the next workload runs
        print(f"    failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return {"workload": workload, "error": f"{type(exc).__name__}: {str(exc)[:2000]}"}


if __name__ == "__main__":
    raise SystemExit(main())
