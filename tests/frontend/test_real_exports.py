"""Real exports of torch.onnx's default (dynamo) exporter: import, fuse, compile to C, compare.

tests/data/exports/ holds tiny random-weight Hugging Face models that tools/make_exports.py
exported at a static shape, each with its inputs and onnxruntime's outputs (``in:NAME`` and
``out:NAME`` in ``<model>.npz``). They pin the op mix today's exporter emits (IsNaN and
GatherND from the attention masks, Gelu, LayerNormalization at its default opset 20; Attention
and RMSNormalization in the ``*_opset23`` exports) without torch in CI.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx.external_data_helper import uses_external_data

import fusionlang
from fusionlang.frontend.unsupported import UnsupportedOpsError

ROOT = Path(__file__).resolve().parents[2]
EXPORTS_DIR = ROOT / "tests" / "data" / "exports"
EXPORTS = ["bert", "distilbert", "gpt2", "t5_encoder", "vit", "whisper_encoder",
           "bert_opset23", "gpt2_opset23", "t5_encoder_opset23"]
#: exports that import fails on today, with the op types it refuses (strict xfail: the test fails
#: loudly once they import, so the entry gets removed)
MISSING_OPS: dict[str, list[str]] = {}
#: float32 through a few layers: tolerances relative to each output's largest magnitude
RTOL, ATOL_OF_MAX = 1e-4, 1e-5


def saved_sample(name: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    sample = np.load(EXPORTS_DIR / f"{name}.npz")
    inputs = {key[3:]: sample[key] for key in sample.files if key.startswith("in:")}
    outputs = {key[4:]: sample[key] for key in sample.files if key.startswith("out:")}
    return inputs, outputs


def assert_close_to_magnitude(got: np.ndarray, want: np.ndarray, name: str) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, name
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL_OF_MAX * scale, err_msg=name)


def with_known_blockers(names: list[str]) -> list:
    return [pytest.param(name, marks=pytest.mark.xfail(strict=True, raises=UnsupportedOpsError,
                                                         reason=f"not imported: {' and '.join(MISSING_OPS[name])} "
                                                                "(opset 23)"))
            if name in MISSING_OPS else name for name in names]


@pytest.mark.parametrize("name", with_known_blockers(EXPORTS))
def test_export_compiles_to_c_and_matches_onnxruntime(name):
    inputs, expected = saved_sample(name)
    try:
        graph = fusionlang.from_onnx(EXPORTS_DIR / f"{name}.onnx")
    except UnsupportedOpsError as error:
        # each entry starts with the refused op type: exactly the known blockers, no others
        assert sorted(entry.split(" ")[0] for entry in error.entries) == MISSING_OPS.get(name, []), str(error)
        raise
    assert sorted(graph.outputs) == sorted(expected)
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), target="c")
    results = compiled.run({k: v for k, v in inputs.items() if k in graph.inputs})
    for output, want in expected.items():
        assert_close_to_magnitude(results[output], want, f"{name}:{output}")


@pytest.mark.parametrize("name", EXPORTS)
def test_export_is_self_contained_with_a_sample(name):
    # weights inside the .onnx, so a checkout alone runs the test above
    model = onnx.load(EXPORTS_DIR / f"{name}.onnx", load_external_data=False)
    assert not [t.name for t in model.graph.initializer if uses_external_data(t)]
    inputs, outputs = saved_sample(name)
    assert sorted(inputs) == sorted(i.name for i in model.graph.input)
    assert sorted(outputs) == sorted(o.name for o in model.graph.output)


def test_masked_exports_pad_a_row():
    # a mask of all ones would leave the masking ops (IsNaN, GatherND, Where) untested
    for name in ["bert", "distilbert", "gpt2", "t5_encoder"]:
        mask = saved_sample(name)[0]["attention_mask"]
        assert set(np.unique(mask)) == {0, 1}, name


@pytest.mark.skipif(find_spec("torch") is not None and find_spec("transformers") is not None,
                    reason="torch and transformers are installed: the script would export")
def test_generator_without_torch_says_so_in_one_line():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "make_exports.py")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("make_exports.py needs torch, transformers, onnxscript and onnxruntime: ")
    assert done.stderr.count("\n") == 1
