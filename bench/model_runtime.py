"""Whole models and blocks: fusionlang's C against ONNX Runtime (and PyTorch eager where it is
installed), one process, interleaved rounds.

Workloads: the 9 light ONNX models; four models this script builds as ONNX (a BERT layer, a
GPT block with a causal mask, an MLP ending in log_softmax, a conv net with batch norm); and
the memory-bound blocks over 4096 x 1024 (layer_norm, softmax, erf GELU, bias + GELU +
residual, a 10-op elementwise chain), timed through ``CompiledGraph.run`` like the models.

Competitors, all fed the same arrays:

* ``fused``: ``fusionlang.fuse(graph)`` (the C target's default rules, apollo_patterns) compiled to C;
* ``unfused``: the graph as ``fuse`` rewrote it, one group per op (views excepted), the
  same C emitter and templates, so ``unfused / fused`` is what partitioning saves;
* ``ort``: onnxruntime on one thread (``intra_op_num_threads=1``, ``ORT_ENABLE_ALL``);
* ``ov``: OpenVINO's CPU plugin (``PERFORMANCE_HINT=LATENCY``, ``INFERENCE_PRECISION_HINT=f32``,
  ``INFERENCE_NUM_THREADS`` 1 or every core), when openvino is installed (otherwise left out
  and said so);
* ``torch``: the model converted op by op to PyTorch eager on one thread, when torch and
  onnx2torch are installed (otherwise left out and said so).

With ``--threads all`` fusionlang compiles with OpenMP and ORT uses every core; CPU time then
adds up every thread's work, so read the wall column. Neither side's idle threads spin
then (``OMP_WAIT_POLICY=passive``, ORT's ``session.intra_op.allow_spinning=0``): run
interleaved in one process, one runtime's threads spinning after its run took the cores
from the next (squeezenet, fused, 2 cores: 24 ms in the bench against 6.5 ms alone).

For each workload: medians of process CPU time (wall time beside) over the rounds, the ratios
fused / ORT, fused / OpenVINO, fused / the better of the two, fused / unfused, and the largest difference of each output from ORT's. Prints a
table and writes bench/results/model_runtime[_threads].json.

Also what fusion *could* save: the unfused build compiled with ``profile=True`` (a build of
its own, so the clock is not in the timed runs) reports each kernel's time; fusion leaves
the templates' work (conv, matmul, pooling) whole and at best removes the rest, so
``fusion_bound = total / template time`` of the unfused build is the largest
``unfused / fused`` the fused build can reach.

    python bench/model_runtime.py [--rounds 7] [--threads 1|all] [--only resnet50,bert_layer] [--output F.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import _checkout  # noqa: F401  (first of ours: this checkout's fusionlang)
import fusionlang
from fusionlang.engine.plan import per_node_plan
from fusionlang.ops.checking import op_call
from fusionlang.ops.registry import REGISTRY

RESULTS = Path(__file__).resolve().parent / "results"
LIGHT_MODELS = ["resnet50", "densenet121", "inception_v1", "inception_v2", "shufflenet", "squeezenet", "vgg19",
                "zfnet512", "bvlc_alexnet"]
OPSET = 17
#: the other runtimes fusionlang is held against (PyTorch eager is a reference, not a peer)
PEERS = ("ort", "ov")


# ----- models built here ----------------------------------------------------------------


class _Onnx:
    """A tiny ONNX graph builder: nodes, initializers, one input and one output."""

    def __init__(self, name: str, seed: int = 0):
        self.name = name
        self.nodes, self.inits = [], []
        self.rng = np.random.default_rng(seed)
        self.count = 0

    def weight(self, shape, scale=None) -> str:
        scale = scale if scale is not None else 1.0 / math.sqrt(shape[0] if len(shape) > 1 else 1)
        return self.const(self.rng.standard_normal(shape).astype(np.float32) * scale)

    def const(self, array) -> str:
        name = f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type: str, *inputs, **attrs) -> str:
        self.count += 1
        out = f"{op_type.lower()}_{self.count}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def model(self, x: str, shape, y: str, dtype=TensorProto.FLOAT) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, self.name, [helper.make_tensor_value_info(x, dtype, list(shape))],
                                  [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)], self.inits)
        opsets = [helper.make_opsetid("", OPSET)]
        # the oldest IR version the opset allows: onnx's newest is past what an older runtime reads
        # (onnx 1.23 writes IR 14, onnxruntime 1.30 reads up to 13)
        return helper.make_model(graph, opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets))


def _layer_norm(g: _Onnx, x: str, width: int) -> str:
    return g.op("LayerNormalization", x, g.const(np.ones(width, np.float32)), g.const(np.zeros(width, np.float32)),
                axis=-1, epsilon=1e-5)


def _gelu(g: _Onnx, x: str) -> str:
    inner = g.op("Erf", g.op("Div", x, g.const(np.float32(math.sqrt(2.0)))))
    return g.op("Mul", g.op("Mul", x, g.const(np.float32(0.5))), g.op("Add", inner, g.const(np.float32(1.0))))


def _attention(g: _Onnx, x: str, seq: int, hidden: int, heads: int, causal: bool) -> str:
    dh = hidden // heads

    def project(t):
        y = g.op("Add", g.op("MatMul", t, g.weight((hidden, hidden))), g.weight((hidden,), 0.02))
        y = g.op("Reshape", y, g.const(np.array([1, seq, heads, dh], np.int64)))
        return g.op("Transpose", y, perm=[0, 2, 1, 3])

    q, k, v = project(x), project(x), project(x)
    scores = g.op("Mul", g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2])),
                  g.const(np.float32(1.0 / math.sqrt(dh))))
    if causal:
        mask = np.triu(np.full((seq, seq), -1e9, np.float32), 1)
        scores = g.op("Add", scores, g.const(mask))
    ctx = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
    ctx = g.op("Reshape", g.op("Transpose", ctx, perm=[0, 2, 1, 3]), g.const(np.array([1, seq, hidden], np.int64)))
    return g.op("Add", g.op("MatMul", ctx, g.weight((hidden, hidden))), g.weight((hidden,), 0.02))


def bert_layer(seq=128, hidden=768, heads=12, ffn=3072):
    g = _Onnx("bert_layer")
    h = _layer_norm(g, g.op("Add", "x", _attention(g, "x", seq, hidden, heads, causal=False)), hidden)
    f = g.op("Add", g.op("MatMul", h, g.weight((hidden, ffn))), g.weight((ffn,), 0.02))
    f = g.op("Add", g.op("MatMul", _gelu(g, f), g.weight((ffn, hidden))), g.weight((hidden,), 0.02))
    return g.model("x", (1, seq, hidden), _layer_norm(g, g.op("Add", h, f), hidden))


def gpt_block(seq=128, hidden=768, heads=12):
    g = _Onnx("gpt_block", seed=1)
    a = g.op("Add", "x", _attention(g, _layer_norm(g, "x", hidden), seq, hidden, heads, causal=True))
    f = g.op("Add", g.op("MatMul", _layer_norm(g, a, hidden), g.weight((hidden, 4 * hidden))),
             g.weight((4 * hidden,), 0.02))
    f = g.op("Add", g.op("MatMul", _gelu(g, f), g.weight((4 * hidden, hidden))), g.weight((hidden,), 0.02))
    return g.model("x", (1, seq, hidden), g.op("Add", a, f))


def mlp_log_softmax(batch=256, sizes=(784, 512, 512, 10)):
    g = _Onnx("mlp_log_softmax", seed=2)
    h = "x"
    for k, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:])):
        h = g.op("Gemm", h, g.weight((fan_in, fan_out)), g.weight((fan_out,), 0.02))
        if k < len(sizes) - 2:
            h = g.op("Relu", h)
    return g.model("x", (batch, sizes[0]), g.op("LogSoftmax", h, axis=-1))


def convnet_bn(batch=8, size=64):
    g = _Onnx("convnet_bn", seed=3)
    h, channels = "x", 3
    for width in (32, 64, 128):
        w = g.weight((width, channels, 3, 3), 1.0 / math.sqrt(9 * channels))
        h = g.op("Conv", h, w, pads=[1, 1, 1, 1])
        stats = [g.const(np.abs(g.rng.standard_normal(width)).astype(np.float32) + 0.5) if k in (0, 3)
                 else g.const(g.rng.standard_normal(width).astype(np.float32) * 0.1) for k in range(4)]
        h = g.op("Relu", g.op("BatchNormalization", h, *stats, epsilon=1e-5))
        h = g.op("MaxPool", h, kernel_shape=[2, 2], strides=[2, 2])
        channels = width
    h = g.op("Flatten", g.op("GlobalAveragePool", h))
    return g.model("x", (batch, 3, size, size), g.op("Gemm", h, g.weight((channels, 10)), g.weight((10,), 0.02)))


# ----- memory-bound blocks ----------------------------------------------------------------


def _block(name: str, body, rows=4096, cols=1024) -> onnx.ModelProto:
    g = _Onnx(name, seed=4)
    return g.model("x", (rows, cols), body(g, "x", cols))


BLOCKS = {
    "layer_norm": lambda g, x, n: _layer_norm(g, x, n),
    "softmax": lambda g, x, n: g.op("Softmax", x, axis=-1),
    "gelu": lambda g, x, n: _gelu(g, x),
    "bias_gelu_residual": lambda g, x, n: g.op("Add", _gelu(g, g.op("Add", x, g.weight((n,), 0.1))), x),
    "chain10": lambda g, x, n: _chain10(g, x),
}


def _chain10(g: _Onnx, x: str) -> str:
    y = x
    for k, op in enumerate(["Mul", "Add", "Tanh", "Mul", "Sub", "Abs", "Add", "Sqrt", "Mul", "Neg"]):
        y = g.op(op, y) if op in ("Tanh", "Abs", "Sqrt", "Neg") else g.op(op, y, g.const(np.float32(0.5 + k / 10)))
    return y


BUILT = {"bert_layer": bert_layer, "gpt_block": gpt_block, "mlp_log_softmax": mlp_log_softmax,
         "convnet_bn": convnet_bn}


# ----- competitors ------------------------------------------------------------------------


def light_model(name: str) -> onnx.ModelProto:
    return onnx.load(Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"light_{name}.onnx")


def feeds_for(model: onnx.ModelProto, graph) -> dict:
    rng = np.random.default_rng(0)
    return {name: rng.standard_normal(graph.types[name].shape).astype(graph.types[name].dtype)
            for name in graph.inputs}


def unfused_plan(graph):
    def kind(node):
        return "view" if REGISTRY.get(node.op).is_view(op_call(graph, node)) else "kernel"

    return per_node_plan(graph, kind)


def ort_session(model: onnx.ModelProto, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if threads != 1:  # idle workers sleep: see the module docstring
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def openvino_runner(model: onnx.ModelProto, threads: int):
    """OpenVINO's CPU plugin at f32 on ``threads`` threads, or None when it is not installed."""
    try:
        import openvino
    except ImportError:
        return None
    core = openvino.Core()
    compiled = core.compile_model(core.read_model(model.SerializeToString(), b""), "CPU",
                                  {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32",
                                   "INFERENCE_NUM_THREADS": threads})
    request = compiled.create_infer_request()
    outputs = compiled.outputs

    def run(feeds):
        results = request.infer(feeds)
        return [results[o] for o in outputs]

    return run


def torch_runner(model: onnx.ModelProto):
    """PyTorch eager on one thread via onnx2torch, or None when either is missing."""
    try:
        import torch
        from onnx2torch import convert
    except ImportError:
        return None
    torch.set_num_threads(1)
    module = convert(model).eval()

    def run(feeds):
        with torch.no_grad():
            out = module(*[torch.from_numpy(v) for v in feeds.values()])
        return [out.numpy()] if hasattr(out, "numpy") else [o.numpy() for o in out]

    return run


def competitors(model: onnx.ModelProto, threads: str, feeds: dict | None = None,
                unfused: bool = True) -> tuple[dict, dict, dict]:
    """The timed callables, the inputs they share (``feeds``, or random ones) and build
    facts; ``unfused=False`` leaves out the unfused build and its profile (two compiles)."""
    graph = fusionlang.from_onnx(model)
    feeds = feeds if feeds is not None else feeds_for(model, graph)
    openmp = threads == "all"
    plan = fusionlang.fuse(graph)  # the C target's default rules (apollo_patterns)
    fused = fusionlang.compile(plan, "c", openmp=openmp)
    session = ort_session(model, 0 if openmp else 1)
    outputs = [o.name for o in session.get_outputs()]

    def ours(compiled):
        def run():
            # one run gives every output (one run per output timed the zoo's BERT, whose
            # pooler is a second output, twice: 1.80x the best peer where distilbert is 1.06x)
            results = compiled.run(feeds)
            return [results[name] for name in graph.outputs]
        return run

    fns = {"fused": ours(fused), "ort": lambda: session.run(outputs, feeds)}
    info = {"fused_kernels": fused.stats.kernels, "templates": sum(k.strategy == "gemm template" for k in fused.kernels)}
    if unfused:
        # the same rewritten graph (compound ops opened, conv-BN folded), one group per op
        per_op = unfused_plan(plan.graph)
        unfused_build = fusionlang.compile(per_op, "c", openmp=openmp)
        fns["unfused"] = ours(unfused_build)
        info["unfused_kernels"] = unfused_build.stats.kernels
        if not openmp:
            info["unfused_profiled"] = fusionlang.compile(per_op, "c", profile=True)
    ov_run = openvino_runner(model, os.cpu_count() if openmp else 1)
    if ov_run is not None:
        fns["ov"] = lambda: ov_run(feeds)
    torch_run = torch_runner(model) if not openmp else None
    if torch_run is not None:
        fns["torch"] = lambda: torch_run(feeds)
    return fns, feeds, info


def fusion_bound(profiled, feeds, rounds: int) -> dict:
    """The unfused build's time split: templates against every other kernel, and the largest
    unfused / fused that removing all of the others would give."""
    times = profiled.profile(feeds, runs=rounds)
    template = sum(t.seconds for t in times if t.kernel.strategy == "gemm template")
    total = sum(t.seconds for t in times)
    return {"unfused_template_ms": 1e3 * template, "unfused_other_ms": 1e3 * (total - template),
            "fusion_bound": total / template if template else float("inf")}


# untimed pause after each call, so that the next competitor starts on idle cores: a runtime's
# threads go on after its call returns (OpenVINO's TBB worker, pinned to one core, stays
# runnable for 1.5 to 3.5 ms after ``infer``) and, without it, took that core from whichever
# competitor came next (fusionlang's ResNet-18 at two threads: 17 ms or, in one process in
# four, 25 to 27 ms; DenseNet-121 30 or 60 ms)
SETTLE_S = 0.01


def interleaved(fns: dict, rounds: int) -> dict:
    """Median process-CPU and wall seconds of each callable; runs are interleaved so that
    load from other processes falls on every competitor alike."""
    results = {key: fn() for key, fn in fns.items()}  # warm up, and the outputs to compare
    samples = {key: [] for key in fns}
    for _ in range(rounds):
        for key, fn in fns.items():
            time.sleep(SETTLE_S)
            cpu, wall = time.process_time(), time.perf_counter()
            fn()
            samples[key].append((time.process_time() - cpu, time.perf_counter() - wall))
    timing = {key: {"cpu_ms": 1e3 * statistics.median(s[0] for s in rows),
                    "wall_ms": 1e3 * statistics.median(s[1] for s in rows)} for key, rows in samples.items()}
    return timing, results


def agreement(results: dict, floor: float = 1.0) -> dict:
    """Largest |difference| from ORT's outputs, relative to the output's largest magnitude
    (or to ``floor`` where that is larger; ``floor=0``: relative to the magnitude alone)."""
    base = results["ort"]
    out = {}
    for key, values in results.items():
        if key == "ort":
            continue
        worst = 0.0
        for got, want in zip(values, base):
            got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
            scale = max(floor, float(np.abs(want).max())) or 1.0
            worst = max(worst, float(np.abs(got.reshape(want.shape) - want).max()) / scale)
        out[key] = worst
    return out


def bench(name: str, model: onnx.ModelProto, rounds: int, threads: str) -> dict:
    fns, feeds, info = competitors(model, threads)
    profiled = info.pop("unfused_profiled", None)
    timing, results = interleaved(fns, rounds)
    row = {"workload": name, **info, "timing": timing, "max_rel_diff_from_ort": agreement(results)}
    if profiled is not None:
        row.update(fusion_bound(profiled, feeds, rounds))
    cpu = {k: v["cpu_ms"] for k, v in timing.items()}
    wall = {k: v["wall_ms"] for k, v in timing.items()}
    clock = wall if threads == "all" else cpu
    row["fused_over_ort"] = clock["fused"] / clock["ort"]
    if "ov" in clock:
        row["fused_over_ov"] = clock["fused"] / clock["ov"]
    row["fused_over_best"] = clock["fused"] / min(clock[k] for k in PEERS if k in clock)
    row["unfused_over_fused"] = clock["unfused"] / clock["fused"]
    return row


def table(rows: list[dict], threads: str) -> str:
    clock = "wall" if threads == "all" else "cpu"
    head = (f"{'workload':20} {'fused ms':>9} {'unfused':>8} {'ORT':>8} {'OV':>8} {'torch':>7} {'fused/ORT':>9} "
            f"{'fused/OV':>8} {'fused/best':>10} {'unfused/fused':>13} {'bound':>6} {'kernels':>8} {'max diff':>9}")
    lines = [head, "-" * len(head)]
    for r in rows:
        t = r["timing"]

        def ms(key):
            return f"{t[key][clock + '_ms']:.2f}" if key in t else "-"

        diff = max(r["max_rel_diff_from_ort"].values())
        lines.append(f"{r['workload']:20} {ms('fused'):>9} {ms('unfused'):>8} {ms('ort'):>8} {ms('ov'):>8} "
                     f"{ms('torch'):>7} {r['fused_over_ort']:9.2f} {r.get('fused_over_ov', float('nan')):8.2f} "
                     f"{r['fused_over_best']:10.2f} {r['unfused_over_fused']:13.2f} "
                     f"{r.get('fusion_bound', float('nan')):6.2f} {r['fused_kernels']:8} {diff:9.1e}")
    return "\n".join(lines)


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def _version(package: str) -> str | None:
    try:
        return __import__(package).__version__
    except ImportError:
        return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", choices=["1", "all"], default="1")
    parser.add_argument("--only", default="", help="comma-separated workload names")
    parser.add_argument("--output", default="", help="the JSON's file name under bench/results/ "
                        "(default: model_runtime.json, or model_runtime_threads.json with --threads all)")
    args = parser.parse_args(argv)
    if args.threads == "all":  # before libgomp starts with the first compiled model
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    workloads = {name: (lambda n=name: light_model(n)) for name in LIGHT_MODELS}
    workloads.update(BUILT)
    workloads.update({name: (lambda n=name: _block(n, BLOCKS[n])) for name in BLOCKS})
    chosen = [w for w in args.only.split(",") if w] or list(workloads)
    unknown = [w for w in chosen if w not in workloads]
    if unknown:
        parser.error(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(workloads)}")
    rows = []
    for name in chosen:
        print(f"... {name}", file=sys.stderr, flush=True)
        rows.append(bench(name, workloads[name](), args.rounds, args.threads))
    models = [r for r in rows if r["workload"] not in BLOCKS]
    blocks = [r for r in rows if r["workload"] in BLOCKS]
    summary = {
        "geomean_fused_over_ort_models": geomean(r["fused_over_ort"] for r in models),
        "worst_fused_over_ort_models": max((r["fused_over_ort"] for r in models), default=float("nan")),
        "geomean_fused_over_ov_models": geomean(r["fused_over_ov"] for r in models if "fused_over_ov" in r),
        "geomean_fused_over_best_models": geomean(r["fused_over_best"] for r in models),
        "worst_fused_over_best_models": max((r["fused_over_best"] for r in models), default=float("nan")),
        "worst_fused_over_ort_blocks": max((r["fused_over_ort"] for r in blocks), default=float("nan")),
        "least_unfused_over_fused_light": min((r["unfused_over_fused"] for r in rows
                                               if r["workload"] in LIGHT_MODELS), default=float("nan")),
        # where even removing every non-template kernel could not give 1.1x
        "light_bound_below_1_1": [r["workload"] for r in rows if r["workload"] in LIGHT_MODELS
                                  and r.get("fusion_bound", math.inf) < 1.1],
    }
    ort_version, ov_version = _version("onnxruntime"), _version("openvino")
    result = {"date": time.strftime("%Y-%m-%d"), "machine": platform.processor() or platform.machine(),
              "cores": os.cpu_count(), "threads": args.threads, "rounds": args.rounds, "onnxruntime": ort_version,
              "openvino": ov_version,
              "torch": "torch" in rows[0]["timing"] if rows else False,
              "load_average": os.getloadavg(), "summary": summary, "rows": rows}
    print(table(rows, args.threads))
    print(f"geomean fused/ORT over models {summary['geomean_fused_over_ort_models']:.2f}, worst model "
          f"{summary['worst_fused_over_ort_models']:.2f}, worst block {summary['worst_fused_over_ort_blocks']:.2f}, "
          f"least unfused/fused on a light model {summary['least_unfused_over_fused_light']:.2f}; "
          f"fusion bound below 1.1 on {', '.join(summary['light_bound_below_1_1']) or 'no light model'}; "
          f"geomean fused/OV {summary['geomean_fused_over_ov_models']:.2f}, fused/best "
          f"{summary['geomean_fused_over_best_models']:.2f}, worst {summary['worst_fused_over_best_models']:.2f}"
          + ("" if ov_version else "  (OpenVINO: not installed, left out)")
          + ("" if result["torch"] else "  (PyTorch eager: torch/onnx2torch not installed, left out)"))
    RESULTS.mkdir(exist_ok=True)
    suffix = "" if args.threads == "1" else "_threads"
    name = args.output or f"model_runtime{suffix}.json"
    result["command"] = "python bench/model_runtime.py " + " ".join(argv if argv is not None else sys.argv[1:])
    (RESULTS / name).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
