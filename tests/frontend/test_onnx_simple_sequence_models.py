"""ONNX's simple-model conformance cases built on sequences (``test_sequence_model1..8``), run in CI.

Each builds, edits and reads a sequence inside the model (positions and split lengths as
initializers or fed inputs, one input with a symbolic dim): the import resolves the
sequence ops into tensor ops, and the model compiles to C (a fallback to the reference
interpreter fails the case).
"""

from __future__ import annotations

import onnx.backend.test
import pytest

import fusionlang.onnx_backend

SEQUENCE_MODELS = [f"test_sequence_model{k}" for k in range(1, 9)]

_backend_test = onnx.backend.test.BackendTest(fusionlang.onnx_backend, __name__)
_backend_test.include(r"^test_sequence_model\d+_cpu$")
OnnxBackendSimpleModelTest = _backend_test.test_cases["OnnxBackendSimpleModelTest"]
for _attr in [a for a in vars(OnnxBackendSimpleModelTest) if a.startswith("test_")]:
    if _attr[: -len("_cpu")] not in SEQUENCE_MODELS or not _attr.endswith("_cpu"):
        delattr(OnnxBackendSimpleModelTest, _attr)
del _attr

# a case that runs on the reference interpreter has not compiled: that is a failure here
pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")


def test_every_sequence_model_is_collected():
    collected = {a[: -len("_cpu")] for a in vars(OnnxBackendSimpleModelTest) if a.endswith("_cpu")}
    assert collected == set(SEQUENCE_MODELS)
