"""nll_loss's NumPy reference against ONNX's definition written as a loop over elements."""

from __future__ import annotations

import numpy as np
import pytest

from fusionlang.ops import REGISTRY


def nll_by_loop(x, target, weight, ignore_index):
    loss = np.zeros(target.shape, x.dtype)
    carried = np.zeros(target.shape, x.dtype)
    for n, *rest in np.ndindex(*target.shape):
        t = target[(n, *rest)]
        if t == ignore_index:
            continue
        w = 1.0 if weight is None else weight[t]
        loss[(n, *rest)] = -x[(n, t, *rest)] * w
        carried[(n, *rest)] = w
    return loss, carried


@pytest.mark.parametrize("shape", [(4, 3), (2, 5, 3), (2, 3, 2, 2)])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [-1, 0, 2])
def test_reference_matches_the_loop(shape, weighted, ignore_index):
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    target = rng.integers(0, shape[1], (shape[0],) + shape[2:])
    weight = rng.uniform(0.5, 1.5, shape[1]).astype(np.float32) if weighted else None
    inputs = [x, target] + ([weight] if weighted else [])
    got = REGISTRY.get("nll_loss").reference(inputs, {"ignore_index": ignore_index})
    for g, w in zip(got, nll_by_loop(x, target, weight, ignore_index)):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
