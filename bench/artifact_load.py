"""Loading a saved artifact against creating an ONNX Runtime session: CPU time from nothing
loaded to the first output.

For each model: fusionlang fuses and compiles it (apollo rules, C, one thread) and the
CLI does the same (``fusionlang compile MODEL -o ARTIFACT``); ``fusionlang run ARTIFACT``
and ``fusionlang.load(ARTIFACT).run(feeds)`` in a fresh process must give the outputs of
``compile(...).run(feeds)`` bit for bit. Then, each in its own fresh process, repeated:

* fusionlang: ``fusionlang.load(ARTIFACT)`` then ``.run(feeds)``
* ONNX Runtime: ``InferenceSession(model path)`` (all graph optimizations, one intra-op
  thread, as fusionlang runs on one) then ``.run(None, feeds)``

Both read their files inside the timed steps (fusionlang's load reads and hashes them).
The two kinds of process alternate, so a busy spell of the shared machine falls on both.

CPU time is the process's (every thread, user + system) across those two steps, the
library imports before them excluded and reported apart (``import s``); the median of
the repeats is reported. Also which of islpy, sympy, lark, networkx, onnx the loading
process had imported (none, by design). Prints a table and writes
bench/results/artifact_load.json.

    python bench/artifact_load.py [--repeat 5] [--models resnet50,bert_layer]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

import _checkout  # noqa: F401  (first: this checkout's fusionlang, not an installed copy)
import fusionlang
from model_runtime import bert_layer, feeds_for, light_model

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "artifact_load.json"
MODELS = {"resnet50": lambda: light_model("resnet50"), "bert_layer": bert_layer}
HEAVY = ("islpy", "sympy", "lark", "networkx", "onnx")

#: run in a fresh interpreter: imports timed apart, then load + first output
_FUSIONLANG = """
import json, sys, time
t0 = time.process_time(); w0 = time.perf_counter()
import numpy as np, fusionlang
feeds = dict(np.load(sys.argv[2]))
t1 = time.process_time(); w1 = time.perf_counter()
out = fusionlang.load(sys.argv[1]).run(feeds)
t2 = time.process_time(); w2 = time.perf_counter()
np.savez(sys.argv[3], **out)
print(json.dumps({"import_cpu": t1 - t0, "cpu": t2 - t1, "wall": w2 - w1,
                  "heavy": sorted(m for m in %r if m in sys.modules)}))
""" % (HEAVY,)

_ORT = """
import json, sys, time
t0 = time.process_time()
import numpy as np, onnxruntime as ort
feeds = dict(np.load(sys.argv[2]))
t1 = time.process_time(); w1 = time.perf_counter()
options = ort.SessionOptions()
options.intra_op_num_threads = 1
options.inter_op_num_threads = 1
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
options.log_severity_level = 3
session = ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])  # reads the file
session.run(None, feeds)
t2 = time.process_time(); w2 = time.perf_counter()
print(json.dumps({"import_cpu": t1 - t0, "cpu": t2 - t1, "wall": w2 - w1}))
"""


def _python(*args: str, timeout: int = 1800) -> str:
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    if proc.returncode != 0:
        raise RuntimeError(f"{args[:3]} failed: {proc.stderr.strip()[-2000:]}")
    return proc.stdout


def _same_bits(got: dict, want: dict) -> bool:
    return sorted(got) == sorted(want) and all(
        got[k].dtype == want[k].dtype and got[k].tobytes() == want[k].tobytes() for k in want)


def measure(name: str, repeat: int, work: Path) -> dict:
    model = MODELS[name]()
    model_path = work / f"{name}.onnx"
    onnx.save(model, str(model_path))
    graph = fusionlang.from_onnx(model)
    feeds = feeds_for(model, graph)
    np.savez(work / "feeds.npz", **feeds)
    want = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c").run(feeds)
    artifact = work / f"{name}.fl"
    _python("-m", "fusionlang", "--quiet", "compile", str(model_path), "-o", str(artifact))
    # the CLI run of the artifact, fed the same arrays
    inputs = []
    for k, (input_name, array) in enumerate(feeds.items()):
        np.save(work / f"in{k}.npy", array)
        inputs += ["--input", f"{input_name}={work / f'in{k}.npy'}"]
    report = json.loads(_python("-m", "fusionlang", "--json", "run", str(artifact), *inputs,
                                "--output-dir", str(work / "cli_out")))
    cli = {n: np.load(path) for n, path in report["files"].items()}
    loads, sessions = [], []
    for _ in range(repeat):
        loads.append(json.loads(_python("-c", _FUSIONLANG, str(artifact), str(work / "feeds.npz"),
                                        str(work / "loaded.npz")).splitlines()[-1]))
        sessions.append(json.loads(_python("-c", _ORT, str(model_path), str(work / "feeds.npz")).splitlines()[-1]))
    loaded = dict(np.load(work / "loaded.npz"))
    median = lambda rows, key: statistics.median(r[key] for r in rows)  # noqa: E731
    return {
        "model": name, "artifact_bytes": sum(p.stat().st_size for p in artifact.iterdir()),
        "cli_run_bit_identical": _same_bits(cli, want), "load_run_bit_identical": _same_bits(loaded, want),
        "heavy_modules_loaded": loads[-1]["heavy"],
        "fusionlang_load_first_output_cpu_s": median(loads, "cpu"),
        "fusionlang_load_first_output_wall_s": median(loads, "wall"),
        "fusionlang_import_cpu_s": median(loads, "import_cpu"),
        "ort_session_first_output_cpu_s": median(sessions, "cpu"),
        "ort_session_first_output_wall_s": median(sessions, "wall"),
        "ort_import_cpu_s": median(sessions, "import_cpu"),
        # the least of the repeats: the cost with the least interference from the shared machine
        "fusionlang_load_first_output_cpu_min_s": min(r["cpu"] for r in loads),
        "ort_session_first_output_cpu_min_s": min(r["cpu"] for r in sessions),
        "repeats": repeat,
    }


def table(rows: list[dict]) -> str:
    lines = [f"{'model':<12} {'fusionlang load+run CPU ms':>27} {'ORT session+run CPU ms':>23} {'ratio':>6} "
             f"{'min: fl / ort ms':>18} "
             f"{'imports CPU ms (fl / ort)':>26}  bits equal  heavy imports"]
    for r in rows:
        fl, ort = r["fusionlang_load_first_output_cpu_s"], r["ort_session_first_output_cpu_s"]
        same = "yes" if r["cli_run_bit_identical"] and r["load_run_bit_identical"] else "NO"
        lines.append(f"{r['model']:<12} {fl * 1e3:27.1f} {ort * 1e3:23.1f} {fl / ort:6.2f} "
                     f"{r['fusionlang_load_first_output_cpu_min_s'] * 1e3:8.1f} / {r['ort_session_first_output_cpu_min_s'] * 1e3:<7.1f} "
                     f"{r['fusionlang_import_cpu_s'] * 1e3:12.0f} / {r['ort_import_cpu_s'] * 1e3:<11.0f}  "
                     f"{same:<10}  {', '.join(r['heavy_modules_loaded']) or 'none'}")
    return "\n".join(lines)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")),
                        platform.machine())
    except OSError:
        return platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    rows = []
    for name in args.models.split(","):
        with tempfile.TemporaryDirectory(prefix="fl-artifact-bench-") as work:
            rows.append(measure(name, args.repeat, Path(work)))
    print(table(rows))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": _cpu_name(),
                                   "date": time.strftime("%Y-%m-%d"), "python": platform.python_version(), "fusionlang": fusionlang.__version__,
                                   "rows": rows}, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
