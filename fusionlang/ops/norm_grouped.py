"""Mean-variance normalizations over chosen axes: GroupNormalization (statistics per group
of channels) and MeanVarianceNormalization (over the given axes, no scale or shift).
Compound: std/normalize.fuse opens them into reductions and elementwise ops."""

from __future__ import annotations

import numpy as np

from fusionlang.ir.types import TensorType
from fusionlang.ops.common import accumulator, require_float, same_dtype
from fusionlang.ops.norm import normalize
from fusionlang.ops.registry import Attr, OpCall, OpDef, register

#: MeanVarianceNormalization's epsilon, added to the standard deviation (ONNX's function body)
MVN_EPSILON = 1e-9


def _group_norm_infer(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    if x.rank < 2:
        raise call.fail(f"input {x} must have rank >= 2 (N, C, ...)")
    require_float(call, x)
    groups, channels = call.attrs["num_groups"], x.shape[1]
    if groups < 1 or channels % groups:
        raise call.fail(f"num_groups={groups} must be positive and divide the {channels} channels")
    for k, name in ((1, "scale"), (2, "bias")):
        if call.input(k).shape != (channels,):
            raise call.fail(f"{name} {call.input(k)} should have shape [{channels}] (one per channel)")
    same_dtype(call, [call.input(k) for k in range(3)])
    return [x]


def _group_norm_reference(xs, attrs):
    x, scale, bias = xs
    grouped = x.reshape(x.shape[0], attrs["num_groups"], -1)
    out = normalize(grouped, (2,), attrs["epsilon"]).reshape(x.shape)
    channel = (1, -1) + (1,) * (x.ndim - 2)
    return [(out * scale.reshape(channel) + bias.reshape(channel)).astype(x.dtype, copy=False)]


register(
    OpDef(
        name="group_norm",
        inputs=("x", "scale", "bias"),
        attrs={"num_groups": Attr("int", doc="groups of consecutive channels sharing statistics"),
               "epsilon": Attr("float", 1e-5)},
        infer=_group_norm_infer,
        reference=_group_norm_reference,
        compound=True,
        doc="Group normalization (ONNX GroupNormalization-21): statistics per sample over each group of "
            "C / num_groups consecutive channels and the spatial axes (biased variance), then scale and "
            "bias per channel.",
    )
)


def _mvn_infer(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    require_float(call, x)
    axes = [call.axis(a, x.rank, name="axes") for a in call.attrs["axes"]]
    if len(set(axes)) != len(axes):
        raise call.fail(f"axes {list(call.attrs['axes'])} repeat an axis")
    return [x]


def _mvn_reference(xs, attrs):
    x = xs[0]
    axes = tuple(a % x.ndim for a in attrs["axes"])
    wide = x.astype(accumulator(x.dtype))
    centered = wide - wide.mean(axis=axes, keepdims=True)
    std = np.sqrt(np.mean(centered * centered, axis=axes, keepdims=True))
    return [(centered / (std + MVN_EPSILON)).astype(x.dtype)]


register(
    OpDef(
        name="mean_variance_norm",
        inputs=("x",),
        attrs={"axes": Attr("ints", (0, 2, 3), "the axes the statistics run over")},
        infer=_mvn_infer,
        reference=_mvn_reference,
        compound=True,
        doc="(x - mean) / (standard deviation + 1e-9) over `axes`, with the biased variance "
            "(ONNX MeanVarianceNormalization).",
    )
)
