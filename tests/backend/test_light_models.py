"""The nine light ONNX models, fused by the Apollo rules and compiled to C, reproduce the
outputs stored with them (rtol 1e-3). Compiled kernels are cached on disk, so reruns
mostly pay for running."""

from __future__ import annotations

import numpy as np
import pytest
from light import LIGHT_MODELS, feeds_and_expected, fused_plan

import fusionlang.backend as backend


@pytest.mark.slow
@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_model_compiled_to_c_matches_expected_output(name):
    plan = fused_plan(name)
    feeds, expected = feeds_and_expected(name)
    feeds = {k: v for k, v in feeds.items() if k in plan.graph.inputs}
    compiled = backend.compile(plan, "c")
    out = compiled.run(feeds)[plan.graph.outputs[0]]
    np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-5)
    # every kernel group is one loop nest unless the partitioner was told otherwise; the
    # compiled plan may cut a concat out of its group to run it in place (it runs nothing)
    assert compiled.stats.kernels == len(compiled.plan.kernels) - compiled.stats.concats_in_place
    assert len(compiled.plan.kernels) >= len(plan.kernels)
    # fusion removed intermediates and the arena reuses storage
    assert compiled.stats.intermediates_never_allocated > 0
    assert compiled.buffers.arena_bytes < compiled.buffers.unshared_bytes
