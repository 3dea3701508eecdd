"""PyTorch models through ``torch.compile(backend="fusionlang")`` against eager and Inductor:
inference and a training step, one process, interleaved rounds.

Models (bench/torch_bench_models.py, random weights, nothing downloaded): a ResNet-18 and a
MobileNetV2 on 4 x 3 x 64 x 64 images, a BERT-like encoder (4 layers, hidden 256) and a
Llama-like decoder (2 layers, hidden 256, RMSNorm, rotary embeddings, SiLU-gated MLP,
causal SDPA) on 4 x 64 tokens.

Competitors, each with its own copy of the same weights:

* ``eager``: the module as it is;
* ``inductor``: ``torch.compile(m)`` (Inductor's default mode, C++ on the CPU);
* ``autotune``: ``torch.compile(m, mode="max-autotune")``, where it compiles on this
  machine (otherwise the row says why, and it is left out);
* ``fusionlang``: ``torch.compile(m, backend="fusionlang", options={"threads": n})``.

A step is ``inference`` (the forward under ``torch.no_grad``, BN in eval mode) or
``training`` (BN in training mode: gradients set to None, forward, loss = mean of the
squared output, backward; the optimizer step is excluded for every competitor). Before
any timing counts, each compiled competitor's first step is checked against eager's: the
outputs (inference) or the loss and every parameter's gradient (training) within rtol 1e-3,
the absolute floor 1e-3 of the largest gradient (a gradient zero in exact arithmetic is
rounding noise on both sides); a competitor that fails the gate is not timed.

Medians over the rounds of process CPU time, wall time beside it; ratios fl/Inductor and
fl/eager on CPU time with one thread, on wall time with every core (CPU time then adds
every thread's work). ``--threads 1`` sets ``torch.set_num_threads(1)`` and fusionlang's
``threads`` option to 1; ``--threads all`` uses every core for both. The results of each
thread setting go under its own key in bench/results/torch_runtime.json; ``--markdown``
prints the README's table from that file.

    python bench/torch_runtime.py [--threads 1|all] [--rounds 5] [--only resnet18,bert]
        [--steps inference,training] [--competitors eager,inductor,autotune,fusionlang]
    python bench/torch_runtime.py --markdown
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _checkout  # noqa: E402,F401  (first of ours: this checkout's fusionlang)
import torch_bench_models  # noqa: E402
from fusionlang.torch_backend import CompileReport, fusionlang_backend  # noqa: E402
from model_runtime import geomean, interleaved  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
COMPETITORS = ("eager", "inductor", "autotune", "fusionlang")
STEPS = ("inference", "training")
RTOL = 1e-3


def compiled(model, competitor: str, threads: int, report=None):
    """``model`` as ``competitor`` runs it (the compile itself happens on the first call);
    ``report`` collects what fusionlang fused and left to eager."""
    if competitor == "eager":
        return model
    if competitor == "inductor":
        return torch.compile(model)
    if competitor == "autotune":
        return torch.compile(model, mode="max-autotune")
    return torch.compile(model, backend=functools.partial(fusionlang_backend, options={"threads": threads},
                                                          report=report))


def step_fn(model, runner, example, step: str):
    """A callable doing one step; it returns what the gate compares."""
    if step == "inference":
        def infer():
            with torch.no_grad():
                return [runner(example)]

        return infer

    def train():
        for parameter in model.parameters():
            parameter.grad = None
        loss = torch_bench_models.loss_of(runner(example))
        loss.backward()
        return [loss.detach()] + [p.grad for p in model.parameters()]

    return train


def gate(got: list, want: list) -> str | None:
    """None when ``got`` matches eager's ``want`` (see the module doc), else what differs."""
    floor = RTOL * max(float(t.abs().max()) for t in want[1:]) if len(want) > 1 else 0.0
    for k, (a, b) in enumerate(zip(got, want)):
        if a is None or b is None:
            return f"value {k}: a gradient is missing"
        a, b = a.detach().numpy(), b.detach().numpy()
        allowed = RTOL * np.abs(b) + (floor if k else 1e-5)
        if a.shape != b.shape or not np.all(np.abs(a - b) <= allowed):
            return f"value {k}: largest difference {float(np.abs(a - b).max()):.3g}"
    return None


def prepare(name: str, size: str, step: str, competitors: list[str], threads: int) -> tuple[dict, dict]:
    """Per competitor, its step callable (gated) or why it is left out; the first call's time."""
    model, example = torch_bench_models.build(name, size)
    getattr(model, "eval" if step == "inference" else "train")()
    fns, notes = {}, {}
    want = None
    report = CompileReport()
    for competitor in competitors:
        copy_ = copy.deepcopy(model)
        fn = step_fn(copy_, compiled(copy_, competitor, threads, report), example, step)
        start = time.perf_counter()
        try:
            got = fn()
        except Exception as exc:  # a competitor that cannot compile here is reported, not fatal
            notes[competitor] = f"does not run: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            continue
        notes[f"{competitor}_first_call_s"] = round(time.perf_counter() - start, 2)
        if competitor == "eager":
            want = got
        elif want is not None and (failure := gate(got, want)) is not None:
            notes[competitor] = f"failed the gate: {failure}"
            continue
        fns[competitor] = fn
    if "fusionlang" in competitors:
        notes["fusionlang_pieces"] = len(report.pieces)
        notes["fusionlang_fallbacks"] = sorted(f.op for f in report.fallbacks)
    return fns, notes


def bench(name: str, size: str, step: str, competitors: list[str], rounds: int, threads: int, clock: str) -> dict:
    fns, notes = prepare(name, size, step, competitors, threads)
    timing, _ = interleaved(fns, rounds)  # model_runtime's: a warm-up run, then interleaved rounds
    row = {"model": name, "step": step, "timing": timing, "notes": notes}
    fl = timing.get("fusionlang", {}).get(clock)
    for peer in ("inductor", "autotune", "eager"):
        if fl is not None and peer in timing:
            row[f"fl_over_{peer}"] = fl / timing[peer][clock]
    return row


def summary(rows: list[dict]) -> dict:
    out = {}
    for step in STEPS:
        for peer in ("inductor", "eager"):
            ratios = [r[f"fl_over_{peer}"] for r in rows if r["step"] == step and f"fl_over_{peer}" in r]
            out[f"{step}_geomean_fl_over_{peer}"] = geomean(ratios)
            out[f"{step}_worst_fl_over_{peer}"] = max(ratios, default=float("nan"))
    return out


def table(rows: list[dict], clock: str) -> str:
    head = (f"{'model':13} {'step':9} {'eager ms':>9} {'inductor':>9} {'autotune':>9} {'fusionlang':>10} "
            f"{'fl/inductor':>11} {'fl/eager':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        def ms(key):
            return f"{r['timing'][key][clock]:.1f}" if key in r["timing"] else "-"

        def ratio(key):
            return f"{r[key]:.2f}" if key in r else "-"

        lines.append(f"{r['model']:13} {r['step']:9} {ms('eager'):>9} {ms('inductor'):>9} {ms('autotune'):>9} "
                     f"{ms('fusionlang'):>10} {ratio('fl_over_inductor'):>11} {ratio('fl_over_eager'):>8}")
    return "\n".join(lines)


def markdown(results: dict) -> str:
    """The README's table: one row per model and step, per thread setting, from the JSON."""
    lines = ["| threads | model | step | eager ms | Inductor ms | fusionlang ms | fl / Inductor | fl / eager |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for setting, run in sorted(results.items()):
        clock = run["clock"]
        for r in run["rows"]:
            t = r["timing"]

            def ms(key):
                return f"{t[key][clock]:.1f}" if key in t else "-"

            def ratio(key):
                return f"{r[key]:.2f}x" if key in r else "-"

            lines.append(f"| {setting} | {r['model']} | {r['step']} | {ms('eager')} | {ms('inductor')} | "
                         f"{ms('fusionlang')} | {ratio('fl_over_inductor')} | {ratio('fl_over_eager')} |")
    return "\n".join(lines)


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", choices=["1", "all"], default="1")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default="",
                        help="comma-separated models: " + ", ".join(torch_bench_models.MODELS))
    parser.add_argument("--steps", default=",".join(STEPS))
    parser.add_argument("--competitors", default=",".join(COMPETITORS))
    parser.add_argument("--size", choices=sorted(torch_bench_models.CONFIGS), default="bench",
                        help="the models' size (test: the small ones the tests train)")
    parser.add_argument("--markdown", action="store_true", help="print the README table from the JSON and exit")
    parser.add_argument("--output", type=Path, default=RESULTS / "torch_runtime.json")
    args = parser.parse_args(argv)
    for flag, chosen, known in (("--only", args.only, torch_bench_models.MODELS),
                                ("--steps", args.steps, STEPS),
                                ("--competitors", args.competitors, COMPETITORS)):
        unknown = [w for w in chosen.split(",") if w and w not in known]
        if unknown:
            parser.error(f"{flag}: unknown {', '.join(unknown)}; known: {', '.join(known)}")
    if "eager" not in args.competitors.split(","):
        parser.error("--competitors: eager is needed (the gate compares with it)")
    return args


def main(argv=None) -> int:
    args = parse(argv)
    if args.markdown:
        print(markdown(json.loads(args.output.read_text())["runs"]))
        return 0
    threads = 1 if args.threads == "1" else os.cpu_count()
    torch.set_num_threads(threads)
    clock = "cpu_ms" if threads == 1 else "wall_ms"
    models = [m for m in args.only.split(",") if m] or list(torch_bench_models.MODELS)
    rows = []
    for name in models:
        for step in args.steps.split(","):
            print(f"... {name} {step}", file=sys.stderr, flush=True)
            rows.append(bench(name, args.size, step, args.competitors.split(","), args.rounds, threads, clock))
            store(args, rows, threads, clock)  # after each row: a long run stopped early keeps its rows
    print(table(rows, clock))
    print(json.dumps(summary(rows), indent=1))
    return 0


def store(args, rows: list[dict], threads: int, clock: str) -> None:
    """The rows so far, under this thread setting's key of the JSON (other keys kept)."""
    run = {"date": time.strftime("%Y-%m-%d"), "size": args.size,
           "machine": platform.processor() or platform.machine(), "cores": os.cpu_count(), "threads": threads,
           "rounds": args.rounds, "clock": clock,
           "torch": torch.__version__, "load_average": os.getloadavg(), "summary": summary(rows), "rows": rows}
    stored = json.loads(args.output.read_text()) if args.output.exists() else {"runs": {}}
    stored["runs"][args.threads] = run
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(stored, indent=2) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
