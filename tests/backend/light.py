"""The light ONNX models: feeds, expected outputs, fused plans (shared by backend tests)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.test.runner import Runner

import fusionlang

LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
LIGHT_MODELS = ["resnet50", "densenet121", "inception_v1", "inception_v2", "shufflenet", "squeezenet", "vgg19",
                "zfnet512", "bvlc_alexnet"]


def feeds_and_expected(name: str) -> tuple[dict, np.ndarray]:
    """Inputs exactly as onnx's backend test runner makes them, and the stored output."""
    model = onnx.load(LIGHT_DIR / f"light_{name}.onnx", load_external_data=False)
    inits = {t.name for t in model.graph.initializer}
    feeds = {vi.name: Runner.generate_dummy_data(vi, seed=0, name=name, random=False)
             for vi in model.graph.input if vi.name not in inits}
    expected = numpy_helper.to_array(onnx.load_tensor(LIGHT_DIR / f"light_{name}_output_0.pb"))
    return feeds, expected


@lru_cache(maxsize=None)
def fused_plan(name: str):
    """The model imported and fused with the Apollo rules (cached per test session)."""
    graph = fusionlang.from_onnx(LIGHT_DIR / f"light_{name}.onnx")
    return fusionlang.fuse(graph, "apollo")
