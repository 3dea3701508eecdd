"""ONNX's simple-model conformance cases built on sequences (``test_sequence_model1..8``), run in CI.

Each builds, edits and reads a sequence inside the model (positions and split lengths as
initializers or fed inputs, one input with a symbolic dim): the import resolves the
sequence ops into tensor ops, and the model compiles to C (a fallback to the reference
interpreter fails the case).
"""

from __future__ import annotations

import pytest

from onnx_cases import backend_cases

SEQUENCE_MODELS = [f"test_sequence_model{k}" for k in range(1, 9)]

OnnxBackendSimpleModelTest, _ = backend_cases("OnnxBackendSimpleModelTest", SEQUENCE_MODELS, __name__)

# a case that runs on the reference interpreter has not compiled: that is a failure here
pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")


def test_every_sequence_model_is_collected():
    collected = {a[: -len("_cpu")] for a in vars(OnnxBackendSimpleModelTest) if a.endswith("_cpu")}
    assert collected == set(SEQUENCE_MODELS)
