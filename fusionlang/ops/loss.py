"""Negative log-likelihood per element (ONNX NegativeLogLikelihoodLoss before its
reduction); a compound op, opened by ``std/loss.fuse``.

Output 0 is the weighted loss ``-x[n, t, d...] * weight[t]`` and output 1 the weight
``weight[t]`` each element carries, both 0 where the target is ``ignore_index``. The
reductions are left to the caller: ``sum`` sums output 0, ``mean`` divides that sum by
the sum of output 1 (the total weight of the elements not ignored), as ONNX specifies.
"""

from __future__ import annotations

import numpy as np

from fusionlang.ir.types import TensorType
from fusionlang.ops.common import require_float
from fusionlang.ops.gather import INDEX_DTYPES
from fusionlang.ops.gather_elements import checked_indices
from fusionlang.ops.registry import Attr, OpCall, OpDef, register


def _infer(call: OpCall) -> list[TensorType]:
    x, target = call.input(0), call.input(1)
    require_float(call, x)
    if x.rank < 2:
        raise call.fail(f"input must be (N, C, d...) of rank >= 2, got {x}")
    if target.dtype not in INDEX_DTYPES:
        raise call.fail(f"target must be int64 or int32, got {target.dtype}")
    expected = (x.shape[0],) + x.shape[2:]
    if target.shape != expected:
        raise call.fail(f"target {target} should have shape {list(expected)} for input {x}")
    if call.has_input(2):
        weight = call.input(2)
        if weight.shape != (x.shape[1],) or weight.dtype != x.dtype:
            raise call.fail(f"weight {weight} should be {x.dtype}[{x.shape[1]}], one per class")
    out = TensorType(target.shape, x.dtype)
    return [out, out]


def _reference(xs, attrs):
    x, target = xs[0], xs[1]
    keep = target != attrs["ignore_index"]
    classes = checked_indices(np.where(keep, target, 0), x.shape[1], 1).astype(np.int64)
    picked = np.take_along_axis(x, classes[:, None], axis=1)[:, 0]
    weight = xs[2][classes] if len(xs) > 2 and xs[2] is not None else np.ones_like(picked)
    weight = np.where(keep, weight, 0).astype(x.dtype)
    return [(-picked * weight).astype(x.dtype), weight]


register(
    OpDef(
        name="nll_loss",
        inputs=("x", "target", "weight"),
        min_inputs=2,
        attrs={"ignore_index": Attr("int", -1, "targets equal to it count for nothing (weight 0); "
                                              "the default -1 is never a class, so nothing is ignored")},
        infer=_infer,
        reference=_reference,
        num_outputs=2,
        compound=True,
        doc="Negative log-likelihood per element of x (N, C, d...) at the class target (N, d...) says: "
            "output 0 is -x[n, target, d...] * weight[target], output 1 the weight itself (1 without "
            "`weight`), both 0 where target == ignore_index. ONNX's sum and mean reductions are "
            "sum(output 0) and sum(output 0) / sum(output 1).",
    )
)
