"""The small models of ONNX's backend test data (pytorch-converted, pytorch-operator,
simple), fused by the Apollo rules and compiled to C, reproduce their stored outputs."""

from __future__ import annotations

import glob
import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import fusionlang
import fusionlang.backend as backend
from fusionlang.errors import FuseError

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
CASES = sorted(glob.glob(os.path.join(DATA, "pytorch-converted", "*")) + glob.glob(os.path.join(DATA, "pytorch-operator", "*"))
               + glob.glob(os.path.join(DATA, "simple", "*")))


def load(case: str):
    model = onnx.load(os.path.join(case, "model.onnx"))
    data = sorted(glob.glob(os.path.join(case, "test_data_set_*")))[0]
    inputs = [numpy_helper.to_array(onnx.load_tensor(f)) for f in sorted(glob.glob(os.path.join(data, "input_*.pb")))]
    outputs = [numpy_helper.to_array(onnx.load_tensor(f)) for f in sorted(glob.glob(os.path.join(data, "output_*.pb")))]
    inits = {t.name for t in model.graph.initializer}
    names = [vi.name for vi in model.graph.input if vi.name not in inits]
    return model, dict(zip(names, inputs)), outputs


@pytest.mark.parametrize("case", CASES, ids=[os.path.basename(c) for c in CASES])
def test_onnx_test_model_compiled_to_c(case):
    model, feeds, expected = load(case)
    try:
        graph = fusionlang.from_onnx(model)
    except FuseError as exc:
        pytest.skip(f"the frontend does not import it: {exc}")
    feeds = {k: v for k, v in feeds.items() if k in graph.inputs}
    out = backend.compile(fusionlang.fuse(graph, "apollo"), "c").run(feeds)
    for name, want in zip(graph.outputs, expected):
        got = out[name]
        assert got.shape == want.shape
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4, equal_nan=True, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)
