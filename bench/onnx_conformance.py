"""ONNX's own conformance suite (``onnx.backend.test``), CPU cases, run through
``fusionlang.onnx_backend`` and through onnxruntime's backend in the same process.

A fusionlang case passes only when it compiles to C: a case that falls back to the reference
interpreter (the backend warns "running ... on the reference interpreter") counts as a failure,
and so does a refusal at import. A wrong number is a failure of its own kind (``wrong``), which
must stay at 0. Failures are grouped by the first line of their message, digits and quoted
names kept, so the table says what is missing, largest group first.

Prints a table and writes bench/results/onnx_conformance.json. Takes a few minutes; not in CI
(CI runs a fixed sample: tests/frontend/test_onnx_node_sample.py).

    python bench/onnx_conformance.py [--suites node,simple] [-k REGEX] [--no-ort]
"""

from __future__ import annotations

import argparse
import collections
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
    return result.outcome


def _reason_group(message: str) -> str:
    """The message with numbers and shapes blurred, so cases of one cause share a line."""
    message = re.sub(r"'test_[^']*'", "'…'", message)
    return re.sub(r"\d+", "N", message)[:160]


def _summary(outcome: dict[str, tuple[str, str]]) -> dict:
    kinds = collections.Counter(kind for kind, _ in outcome.values())
    groups = collections.Counter(_reason_group(msg) for kind, msg in outcome.values() if kind in ("refused", "wrong"))
    return {"cases": len(outcome), "passed": kinds["pass"], "refused": kinds["refused"], "wrong": kinds["wrong"],
            "skipped": kinds["skip"], "failure_groups": dict(groups.most_common())}


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
    print(f"{'suite':<18} {'backend':<12} {'passed':>7} {'of':>6} {'refused':>8} {'wrong':>6} {'skipped':>8}")
    for suite, by_backend in report["suites"].items():
        for name, s in by_backend.items():
            print(f"{suite:<18} {name:<12} {s['passed']:>7} {s['cases']:>6} {s['refused']:>8} {s['wrong']:>6} "
                  f"{s['skipped']:>8}")
    for suite, by_backend in report["suites"].items():
        groups = by_backend["fusionlang"]["failure_groups"]
        print(f"\nfusionlang, {suite}: largest failure groups")
        for reason, count in list(groups.items())[:40]:
            print(f"{count:>5}  {reason}")


if __name__ == "__main__":
    sys.exit(main())
