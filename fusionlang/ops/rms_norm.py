"""RMS normalization (ONNX RMSNormalization): a compound op, opened by ``std/normalize.fuse``.

x divided by the root mean square of its trailing axes from ``axis``, times ``scale``;
unlike layer_norm nothing is subtracted and there is no bias.
"""

from __future__ import annotations

import numpy as np

from fusionlang.ir.types import TensorType
from fusionlang.ops.common import require_float, same_dtype
from fusionlang.ops.registry import Attr, OpCall, OpDef, register


def _infer(call: OpCall) -> list[TensorType]:
    x, scale = call.input(0), call.input(1)
    require_float(call, x)
    axis = call.axis(call.attrs["axis"], x.rank)
    normalized = x.shape[axis:]
    fits = scale.rank <= len(normalized) and all(
        d in (1, n) for d, n in zip(reversed(scale.shape), reversed(normalized)))
    if not fits:
        raise call.fail(f"scale {scale} does not broadcast to the normalized shape {list(normalized)}")
    same_dtype(call, [x, scale])
    return [x]


def _reference(xs, attrs):
    x, scale = xs
    axes = tuple(range(attrs["axis"] % x.ndim, x.ndim))
    mean_square = np.mean(x * x, axis=axes, keepdims=True)
    return [(x / np.sqrt(mean_square + x.dtype.type(attrs["epsilon"])) * scale).astype(x.dtype, copy=False)]


register(
    OpDef(
        name="rms_norm",
        inputs=("x", "scale"),
        attrs={"axis": Attr("int", -1, "normalize over axes axis..rank-1"),
               "epsilon": Attr("float", 1e-5, "added to the mean square before the root")},
        infer=_infer,
        reference=_reference,
        compound=True,
        doc="RMS normalization over the trailing axes from `axis`: x / sqrt(mean(x * x) + epsilon) * scale, "
            "scale broadcasting to those axes (ONNX RMSNormalization).",
    )
)
