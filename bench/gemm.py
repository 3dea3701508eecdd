"""GEMM micro-benchmark: the CPU GEMM template against the core's FMA peak and NumPy.

Three things are measured in one process, interleaved, several rounds:

* ``peak``: a probe kernel of independent vector FMAs (12 accumulators, no loads), compiled
  with the same flags as generated code: the single-core FP32 FMA rate of this machine;
* ``template``: C = A . B at 1024^3 (float32, row-major) through
  :func:`fusionlang.backend.gemm_template.gemm_kernel`, packing included;
* ``numpy``: ``numpy.matmul`` on the same arrays with one BLAS thread (the environment
  variables below are set before NumPy loads; run this script in a fresh process).

Each timed call follows an untimed call of the same function: run straight after the probe
(38 ms of register-only FMAs) the template measured 10 to 15% slower than straight after
itself, and NumPy likewise after the template, so without it each competitor's number
depended on who ran before it. All three are measured the same way, warm.

Reported: GFLOP/s from process CPU time (median of rounds, wall time beside), the template
as a fraction of the peak and of NumPy. Writes bench/results/gemm.json.

With ``--shapes`` it measures the template on exact shapes instead, each against
``numpy.matmul`` and ``torch.matmul`` (one thread each, interleaved the same way): a shape
is ``m,n,k[,batch[,ta,tb]]``; a batch multiplies A[batch, m, k] by one B[k, n] shared by
every batch element (a transformer's activations by a weight: B's batch stride is 0),
``ta``/``tb`` 1 read A (B) transposed, as a view of a row-major [k, m] ([n, k]) array. The
template's problem is planned as the compiler plans a matmul's (:func:`plan_matmul`, the
batch folded into M where it folds). Prints a table, writes --output (JSON).

    python bench/gemm.py [--size 1024] [--rounds 7]
    python bench/gemm.py --shapes 64,8000,256,4 256,256,8000 8000,256,256,1,0,1 [--output FILE]
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
    os.environ[_var] = "1"  # one BLAS thread: the template runs on one core

import argparse  # noqa: E402
import ctypes  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import _checkout  # noqa: E402,F401  (first of ours: this checkout's fusionlang)
from fusionlang.backend.ccompile import build_library, load_library  # noqa: E402
from fusionlang.backend.gemm_template import (GemmProblem, Operand, blocking_for, gemm_kernel, plan_matmul,  # noqa: E402
                                              vector_types)
from fusionlang.backend.machine import host  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"

#: independent FMA chains on full vectors: enough to cover the FMA latency on every ISA
PEAK_PROBE = """
#include <stdint.h>
typedef float fl_pv __attribute__((vector_size({bytes})));
double fl_peak(int64_t iterations, float seed) {{
    fl_pv a[12], b = (fl_pv){{0}} + seed, c = (fl_pv){{0}} + 1e-7f;
    for (int i = 0; i < 12; i++) a[i] = (fl_pv){{0}} + (float)i;
    for (int64_t r = 0; r < iterations; r++) {{
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = a[i] * b + c;
    }}
    double s = 0;
    for (int i = 0; i < 12; i++) s += a[i][0];
    return s;
}}
"""


def peak_probe(vector_floats: int):
    lib = load_library(build_library([PEAK_PROBE.format(bytes=4 * vector_floats)]))
    fn = lib.fl_peak
    fn.argtypes = [ctypes.c_int64, ctypes.c_float]
    fn.restype = ctypes.c_double
    iterations = 20_000_000
    flops = iterations * 12 * vector_floats * 2
    return (lambda: fn(iterations, 0.9999999)), flops


def template_gemm(n: int):
    return compiled(GemmProblem(n, n, n, Operand(n, 1), Operand(n, 1), Operand(n, 1)))


def compiled(problem: GemmProblem):
    blocking = blocking_for(host(), problem)
    src = "#include <stdlib.h>\n" + vector_types(blocking.vl) + gemm_kernel("fl_bench_gemm", problem, blocking)
    fn = load_library(build_library([src])).fl_bench_gemm
    fn.restype = ctypes.c_int
    return fn, blocking


def measure(fn, rounds_out: dict, key: str) -> None:
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    rounds_out.setdefault(key, []).append((time.process_time() - cpu, time.perf_counter() - wall))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--shapes", nargs="+", type=parse_shape, metavar="M,N,K[,BATCH[,TA,TB]]",
                        help="time the template on these shapes against numpy and torch (see above)")
    parser.add_argument("--output", type=Path, default=RESULTS / "gemm_shapes.json")
    args = parser.parse_args(argv)
    if args.shapes:
        return shapes_main(args.shapes, args.rounds, args.output)
    n = args.size
    machine = host()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    c = np.zeros((n, n), np.float32)
    gemm, blocking = template_gemm(n)
    peak, peak_flops = peak_probe(machine.vector_floats)
    ptrs = [x.ctypes.data_as(ctypes.c_void_p) for x in (a, b, c)]
    fns = {"peak": peak, "template": lambda: gemm(*ptrs), "numpy": lambda: np.matmul(a, b)}
    for fn in fns.values():  # warm up: page faults, lazy binding, BLAS initialisation
        fn()
    samples: dict = {}
    for _ in range(args.rounds):
        for key, fn in fns.items():
            fn()  # untimed: each timed call follows its own kind, not another competitor
            measure(fn, samples, key)
    err = float(np.abs(c.astype(np.float64) - a.astype(np.float64) @ b).max())
    flops = {"peak": peak_flops, "template": 2 * n ** 3, "numpy": 2 * n ** 3}
    result = {"machine": platform.processor() or platform.machine(), "isa": machine.isa,
              "blocking": blocking.__dict__, "size": n, "rounds": args.rounds, "max_abs_error": err,
              "date": time.strftime("%Y-%m-%d"), "blas_threads": os.environ["OPENBLAS_NUM_THREADS"]}
    for key, rows in samples.items():
        cpu = statistics.median(r[0] for r in rows)
        wall = statistics.median(r[1] for r in rows)
        result[key] = {"cpu_s": cpu, "wall_s": wall, "gflops_cpu": flops[key] / cpu / 1e9,
                       "gflops_wall": flops[key] / wall / 1e9}
    result["template_over_peak"] = result["template"]["gflops_cpu"] / result["peak"]["gflops_cpu"]
    result["template_over_numpy"] = result["template"]["gflops_cpu"] / result["numpy"]["gflops_cpu"]
    print(f"sgemm {n}^3 on {result['machine']} ({machine.isa}, micro-tile {blocking.mr}x{blocking.nr}, "
          f"kc={blocking.kc} mc={blocking.mc} nc={blocking.nc}), median of {args.rounds} rounds")
    print(f"{'':10} {'GFLOP/s cpu':>12} {'GFLOP/s wall':>13}")
    for key in ("peak", "template", "numpy"):
        print(f"{key:10} {result[key]['gflops_cpu']:12.1f} {result[key]['gflops_wall']:13.1f}")
    print(f"template / FMA peak = {result['template_over_peak']:.2f}, template / numpy (1 thread) = "
          f"{result['template_over_numpy']:.2f}, max |error| {err:.2e}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "gemm.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


@dataclass(frozen=True)
class Shape:
    m: int
    n: int
    k: int
    batch: int = 1
    ta: bool = False
    tb: bool = False

    def label(self) -> str:
        return (f"m={self.m} n={self.n} k={self.k}" + (f" x{self.batch}" if self.batch > 1 else "")
                + (" A^T" if self.ta else "") + (" B^T" if self.tb else ""))


def parse_shape(text: str) -> Shape:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape {text!r}: integers m,n,k[,batch[,ta,tb]]") from None
    if len(values) not in (3, 4, 6) or min(values[:4]) < 1 or any(v not in (0, 1) for v in values[4:]):
        raise argparse.ArgumentTypeError(f"shape {text!r}: m,n,k[,batch[,ta,tb]] (sizes >= 1, ta and tb 0 or 1)")
    return Shape(*values[:4], *(bool(v) for v in values[4:]))


def shape_operands(shape: Shape, rng):
    """(A, B) as NumPy arrays of the shape (A [batch, m, k] or [m, k], B [k, n]), views of
    transposed row-major arrays where ``ta``/``tb``."""
    lead = (shape.batch,) if shape.batch > 1 else ()
    a = rng.standard_normal(lead + (shape.k, shape.m) if shape.ta else lead + (shape.m, shape.k)).astype(np.float32)
    b = rng.standard_normal((shape.n, shape.k) if shape.tb else (shape.k, shape.n)).astype(np.float32)
    return (np.swapaxes(a, -1, -2) if shape.ta else a), (b.T if shape.tb else b)


def shape_problem(shape: Shape) -> GemmProblem:
    """The template's problem for the shape, planned as a matmul's is."""
    m, n, k = shape.m, shape.n, shape.k
    outer = (shape.batch,) if shape.batch > 1 else ()
    a = Operand(1, m, 0, (m * k,) if outer else ()) if shape.ta else Operand(k, 1, 0, (m * k,) if outer else ())
    b = Operand(1, k, 0, (0,) if outer else ()) if shape.tb else Operand(n, 1, 0, (0,) if outer else ())
    return plan_matmul(GemmProblem(m, n, k, a, b, Operand(n, 1, 0, (m * n,) if outer else ()), outer))


def shapes_main(shapes: list[Shape], rounds: int, output: Path) -> int:
    import torch  # here: the square benchmark runs without torch

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    rows = []
    print(f"{'shape':28} {'numpy':>8} {'torch':>8} {'ours':>8} {'ours/torch':>10}  GFLOP/s cpu, median of {rounds}; "
          "problem as planned")
    for shape in shapes:
        a, b = shape_operands(shape, rng)
        problem = shape_problem(shape)
        gemm, blocking = compiled(problem)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        a_flat, b_flat = (np.ascontiguousarray(np.swapaxes(a, -1, -2)) if shape.ta else a), \
            (np.ascontiguousarray(b.T) if shape.tb else b)
        c = np.zeros(a.shape[:-1] + (shape.n,), np.float32)
        ptrs = [x.ctypes.data_as(ctypes.c_void_p) for x in (a_flat, b_flat, c)]
        fns = {"numpy": lambda: np.matmul(a, b), "torch": lambda: torch.matmul(ta, tb), "ours": lambda: gemm(*ptrs)}
        for fn in fns.values():
            fn()
        samples: dict = {}
        for _ in range(rounds):
            for key, fn in fns.items():
                fn()
                measure(fn, samples, key)
        err = float(np.abs(c - np.matmul(a, b)).max())
        flops = 2 * shape.m * shape.n * shape.k * shape.batch
        row = {"shape": shape.__dict__, "label": shape.label(), "max_abs_error": err,
               "problem": f"m={problem.m} n={problem.n} k={problem.k} outer={list(problem.outer)}",
               "blocking": blocking.__dict__}
        for key, rows_of in samples.items():
            cpu = statistics.median(r[0] for r in rows_of)
            row[key] = {"cpu_s": cpu, "gflops_cpu": flops / cpu / 1e9}
        rows.append(row)
        gf = {key: row[key]["gflops_cpu"] for key in fns}
        print(f"{shape.label():28} {gf['numpy']:8.1f} {gf['torch']:8.1f} {gf['ours']:8.1f} "
              f"{gf['ours'] / gf['torch']:10.2f}  {row['problem']} kc={blocking.kc} mc={blocking.mc} "
              f"nc={blocking.nc} err {err:.1e}")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps({"machine": platform.processor() or platform.machine(), "isa": host().isa,
                                  "rounds": rounds, "date": time.strftime("%Y-%m-%d"), "shapes": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
