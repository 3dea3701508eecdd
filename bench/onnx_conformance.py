"""ONNX's own conformance suite (``onnx.backend.test``), CPU cases, run through
``fusionlang.onnx_backend`` and through onnxruntime's backend in the same process.

A fusionlang case passes only when it compiles to C: a case that falls back to the reference
interpreter (the backend warns "running ... on the reference interpreter") counts as a failure,
and so does a refusal at import. A wrong number is a failure of its own kind (``wrong``), which
must stay at 0. Failures are grouped by the first line of their message, digits and quoted
names kept, so the table says what is missing, largest group first.

A wrong number gets a second opinion: the case's model is run again by onnx's
ReferenceEvaluator with every float32 tensor widened to float64 (an independent oracle, close
to the exact value), and the backend's outputs and the suite's stored answer are both compared
with it under the case's own tolerance. When the backend agrees with the oracle and the
suite's answer does not, the case is counted as ``suite_off`` (the suite's expectation is the
inexact one) and its largest deviation from the oracle is recorded; every other mismatch stays
``wrong``. Cases the oracle cannot widen (a subgraph, a non-float output) stay ``wrong``.

Prints a table and writes bench/results/onnx_conformance.json. Takes a few minutes; not in CI
(CI runs a fixed sample: tests/frontend/test_onnx_node_sample.py).

    python bench/onnx_conformance.py [--suites node,simple] [-k REGEX] [--no-ort]
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import platform
import re
import sys
import time
import unittest
import warnings
from pathlib import Path

import _checkout  # noqa: F401  (first of ours: this checkout's root on sys.path)

RESULTS = Path(__file__).resolve().parent / "results"
SUITES = {"node": "OnnxBackendNodeModelTest", "simple": "OnnxBackendSimpleModelTest",
          "pytorch-converted": "OnnxBackendPyTorchConvertedModelTest",
          "pytorch-operator": "OnnxBackendPyTorchOperatorModelTest", "light": "OnnxBackendRealModelTest"}
FALLBACK = r"fusionlang. running .* on the reference interpreter"


class _Outcomes(unittest.TestResult):
    """Records each case as passed / skipped / failed (assertion: a wrong value) / error."""

    def __init__(self):
        super().__init__()
        self.outcome: dict[str, tuple[str, str]] = {}

    def addSuccess(self, test):
        self.outcome[_case(test)] = ("pass", "")

    def addSkip(self, test, reason):
        self.outcome[_case(test)] = ("skip", reason)

    def addFailure(self, test, err):
        self.outcome[_case(test)] = ("wrong", _first_line(err[1]))

    def addError(self, test, err):
        self.outcome[_case(test)] = ("refused", _first_line(err[1]))

    def addExpectedFailure(self, test, err):
        self.addError(test, err)

    def addUnexpectedSuccess(self, test):
        self.addSuccess(test)


def _case(test) -> str:
    return test.id().rsplit(".", 1)[-1].removesuffix("_cpu")


def _first_line(exc: BaseException) -> str:
    entries = getattr(exc, "entries", None)  # UnsupportedOpsError: one entry per missing op type
    text = str(exc).strip().splitlines()
    line = "no converter for " + ", ".join(e.split(" (")[0].strip() for e in entries) if entries else (text[0] if text else "")
    return f"{type(exc).__name__}: {line}"[:300]


def _run(backend, suite: str, pattern: str | None) -> dict[str, tuple[str, str]]:
    import onnx.backend.test

    test = onnx.backend.test.BackendTest(backend, __name__)
    test.include(r"_cpu$")
    case_class = test.test_cases[suite]
    names = [a for a in vars(case_class) if a.startswith("test_") and a.endswith("_cpu")
             and (pattern is None or re.search(pattern, a))]
    result = _Outcomes()
    with warnings.catch_warnings():
        warnings.filterwarnings("error", FALLBACK, UserWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        unittest.TestSuite(case_class(name) for name in names).run(result)
    wrong = [case for case, (kind, _) in result.outcome.items() if kind == "wrong"]
    for case, verdict in _second_opinions(backend, suite, wrong).items():
        result.outcome[case] = verdict
    return result.outcome


# ----- a second opinion on a wrong number ---------------------------------------------------

#: the loader's kind of each suite's test class
LOADER_KINDS = {SUITES[suite]: "real" if suite == "light" else suite for suite in SUITES}


def _second_opinions(backend, suite_class: str, cases: list[str]) -> dict[str, tuple[str, str]]:
    """``suite_off`` verdicts for the ``cases`` (names without ``_cpu``) where the backend
    agrees with the float64 oracle and the suite's answer does not (see the module docstring)."""
    verdicts = {}
    for case in cases:
        found = _loaded_cases(LOADER_KINDS[suite_class]).get(case)
        deviation = suite_deviation(backend, found) if found is not None else None
        if deviation is not None:
            why = (f"the suite's answer is {deviation:.3g} off the float64 oracle, beyond the case's tolerance "
                   f"(rtol {found.rtol:g}, atol {found.atol:g}); ours is within it")
            verdicts[case] = ("suite_off", why)
    return verdicts


@functools.cache
def _loaded_cases(kind: str) -> dict:
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the node cases' own numpy warnings while they are generated
        return {c.name: c for c in load_model_tests(kind=kind)}


def suite_deviation(backend, case) -> float | None:
    """How far the suite's answer is off the float64 oracle (its largest deviation among the
    elements outside the case's tolerance), when the backend's answer is within that tolerance
    of the oracle and the suite's is not; else None."""
    import numpy as np
    from onnx.reference import ReferenceEvaluator

    try:
        wide = ReferenceEvaluator(widened(case.model))
        prepared = backend.prepare(case.model, "CPU")
        deviation = None
        for inputs, expected in _data_sets(case):
            ours = prepared.run(inputs)
            oracle = wide.run(None, {i.name: _widen(x) for i, x in zip(_real_inputs(case.model), inputs, strict=True)})
            for got, want, exact in zip(ours, expected, oracle, strict=True):
                if _outside(got, exact, case).any():
                    return None
                want = np.asarray(want, np.float64)
                outside = _outside(want, exact, case)
                if outside.any():
                    deviation = max(deviation or 0.0, float(np.max(np.abs(want - exact)[outside])))
        return deviation
    except Exception:  # noqa: BLE001  (no second opinion: the case stays wrong)
        return None


def _outside(values, exact, case):
    """Where ``values`` fall outside the case's tolerance of ``exact``."""
    import numpy as np

    return ~np.isclose(np.asarray(values, np.float64), exact, rtol=case.rtol, atol=case.atol, equal_nan=True)


def _real_inputs(model):
    initialized = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initialized]


def _data_sets(case):
    """(inputs, expected outputs) of a case: generated in memory (node cases) or stored as .pb."""
    import glob
    import os

    import onnx.numpy_helper

    if case.data_sets:
        return case.data_sets
    out = []
    for folder in sorted(glob.glob(os.path.join(case.model_dir, "test_data_set_*"))):
        def read(kind):
            tensors = []
            for path in sorted(glob.glob(os.path.join(folder, f"{kind}_*.pb")),
                               key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0])):
                proto = onnx.TensorProto()
                with open(path, "rb") as f:
                    proto.ParseFromString(f.read())
                tensors.append(onnx.numpy_helper.to_array(proto))
            return tensors
        out.append((read("input"), read("output")))
    return out


def _widen(array):
    import numpy as np

    array = np.asarray(array)
    return array.astype(np.float64) if array.dtype == np.float32 else array


def widened(model):
    """A copy of ``model`` computing in float64 where it computed in float32; raises
    ValueError on what it cannot widen (a subgraph, or an output that is not float32)."""
    import onnx
    from onnx import TensorProto, numpy_helper

    wide = onnx.ModelProto()
    wide.CopyFrom(model)
    graph = wide.graph
    if any(v.type.tensor_type.elem_type != TensorProto.FLOAT for v in graph.output):
        raise ValueError("an output is not float32")
    for value in [*graph.input, *graph.output, *graph.value_info]:
        if value.type.tensor_type.elem_type == TensorProto.FLOAT:
            value.type.tensor_type.elem_type = TensorProto.DOUBLE
    for i, tensor in enumerate(graph.initializer):
        if tensor.data_type == TensorProto.FLOAT:
            graph.initializer[i].CopyFrom(numpy_helper.from_array(_widen(numpy_helper.to_array(tensor)), tensor.name))
    for node in graph.node:
        for attr in node.attribute:
            if attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                raise ValueError("a subgraph")
            if attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type == TensorProto.FLOAT:
                attr.t.CopyFrom(numpy_helper.from_array(_widen(numpy_helper.to_array(attr.t)), attr.t.name))
            if attr.name == "to" and attr.type == onnx.AttributeProto.INT and attr.i == TensorProto.FLOAT:
                attr.i = TensorProto.DOUBLE
    return wide


def _reason_group(message: str) -> str:
    """The message with numbers and shapes blurred, so cases of one cause share a line."""
    message = re.sub(r"'test_[^']*'", "'…'", message)
    return re.sub(r"\d+", "N", message)[:160]


def _summary(outcome: dict[str, tuple[str, str]]) -> dict:
    kinds = collections.Counter(kind for kind, _ in outcome.values())
    groups = collections.Counter(_reason_group(msg) for kind, msg in outcome.values() if kind in ("refused", "wrong"))
    return {"cases": len(outcome), "passed": kinds["pass"], "refused": kinds["refused"], "wrong": kinds["wrong"],
            "suite_off": kinds["suite_off"], "skipped": kinds["skip"], "failure_groups": dict(groups.most_common()),
            "suite_off_cases": {c: m for c, (o, m) in sorted(outcome.items()) if o == "suite_off"}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suites", default="node,simple", help=f"comma-separated, of {', '.join(SUITES)}")
    parser.add_argument("-k", dest="pattern", default=None, help="only cases whose test name matches this regex")
    parser.add_argument("--no-ort", action="store_true", help="skip onnxruntime")
    parser.add_argument("--out", type=Path, default=RESULTS / "onnx_conformance.json")
    args = parser.parse_args(argv)
    import onnx

    import fusionlang
    import fusionlang.onnx_backend

    backends = {"fusionlang": fusionlang.onnx_backend}
    if not args.no_ort:
        import onnxruntime
        import onnxruntime.backend

        onnxruntime.set_default_logger_severity(3)  # its warnings about the test models' unused initializers
        backends["onnxruntime"] = onnxruntime.backend
    report = {"machine": platform.machine(), "python": platform.python_version(), "onnx": onnx.__version__,
              "date": time.strftime("%Y-%m-%d"), "pattern": args.pattern, "suites": {}}
    if "onnxruntime" in backends:
        report["onnxruntime"] = sys.modules["onnxruntime"].__version__
    for suite in args.suites.split(","):
        report["suites"][suite] = {}
        for name, backend in backends.items():
            start = time.perf_counter()
            outcome = _run(backend, SUITES[suite], args.pattern)
            summary = _summary(outcome)
            summary["seconds"] = round(time.perf_counter() - start, 1)
            if name == "fusionlang":
                summary["passed_cases"] = sorted(c for c, (o, _) in outcome.items() if o == "pass")
                summary["failed_cases"] = {c: m for c, (o, m) in sorted(outcome.items()) if o in ("refused", "wrong")}
            report["suites"][suite][name] = summary
    _print(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


def _print(report: dict) -> None:
    print(f"{'suite':<18} {'backend':<12} {'passed':>7} {'of':>6} {'refused':>8} {'wrong':>6} {'suite_off':>10} "
          f"{'skipped':>8}")
    for suite, by_backend in report["suites"].items():
        for name, s in by_backend.items():
            print(f"{suite:<18} {name:<12} {s['passed']:>7} {s['cases']:>6} {s['refused']:>8} {s['wrong']:>6} "
                  f"{s['suite_off']:>10} {s['skipped']:>8}")
    for suite, by_backend in report["suites"].items():
        for name, s in by_backend.items():
            for case, why in s["suite_off_cases"].items():
                print(f"suite_off  {suite} {name} {case}: {why}")
    for suite, by_backend in report["suites"].items():
        groups = by_backend["fusionlang"]["failure_groups"]
        print(f"\nfusionlang, {suite}: largest failure groups")
        for reason, count in list(groups.items())[:40]:
            print(f"{count:>5}  {reason}")


if __name__ == "__main__":
    sys.exit(main())
