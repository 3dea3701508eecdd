"""ONNX's own backend test suite (pytorch-converted and pytorch-operator models) run
through ``fusionlang.onnx_backend``.

Every case whose ops fusionlang supports must pass, and today that is every case: none is
excluded (an exclusion would need an unsupported op or op form as its reason). Cases
that fail through a known defect outside the frontend are expected failures, listed
below. Only the CPU variants are collected: the backend declares no other device.
"""

from __future__ import annotations

import unittest

import onnx.backend.test

import fusionlang.onnx_backend

#: case (without the device suffix) -> a defect outside the frontend that makes it fail (expected failure: once fixed,
#: the unexpected success fails the run and the entry gets removed)
KNOWN_DEFECTS: dict[str, str] = {}

SUITES = ("OnnxBackendPyTorchConvertedModelTest", "OnnxBackendPyTorchOperatorModelTest")

_backend_test = onnx.backend.test.BackendTest(fusionlang.onnx_backend, __name__)
_backend_test.include(r"_cpu$")

for _suite, _case in _backend_test.test_cases.items():
    if _suite not in SUITES:
        continue
    for _attr in [a for a in vars(_case) if a.startswith("test_")]:
        if not _attr.endswith("_cpu"):
            delattr(_case, _attr)
        elif _attr[: -len("_cpu")] in KNOWN_DEFECTS:
            setattr(_case, _attr, unittest.expectedFailure(getattr(_case, _attr)))
    globals()[_suite] = _case
del _suite, _case, _attr  # a class left in a module global is collected a second time


def test_suites_are_complete_and_defects_name_real_cases():
    cases = {a[: -len("_cpu")] for s in SUITES for a in vars(globals()[s]) if a.endswith("_cpu")}
    assert len(cases) == 117  # 82 pytorch-converted + 35 pytorch-operator models in onnx 1.23
    assert set(KNOWN_DEFECTS) <= cases
