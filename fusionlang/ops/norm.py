"""Normalizations: batch (inference and training), instance, layer, and local response.

Only inference batch_norm and lrn have a single loop form; the others need statistics
first and are compound (a `decompose` rule opens them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import sympy as sp

    from fusionlang.ops import scalar
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import lazy_module, sp

    scalar = lazy_module("fusionlang.ops.scalar")

from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, acc_sym, i_sym, out_indices, r_sym, v_sym
from fusionlang.ops.common import accumulator, require_float, same_dtype
from fusionlang.ops.registry import Attr, OpCall, OpDef, register

_EPSILON = {"epsilon": Attr("float", 1e-5)}


def _float_input(call: OpCall, min_rank: int, layout: str) -> TensorType:
    x = call.input(0)
    if x.rank < min_rank:
        raise call.fail(f"input {x} must have rank >= {min_rank} ({layout})")
    require_float(call, x)
    return x


def _channel_params(call: OpCall, names: tuple[str, ...]) -> None:
    """Inputs 1.. are per-channel vectors of shape (C,) with x's dtype."""
    x = call.input(0)
    for k, name in enumerate(names, start=1):
        t = call.input(k)
        if t.shape != (x.shape[1],):
            raise call.fail(f"{name} {t} should have shape [{x.shape[1]}] (one per channel)")
    same_dtype(call, [call.input(k) for k in range(1 + len(names))])


def _per_channel(v: np.ndarray, ndim: int) -> np.ndarray:
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def normalize(x: np.ndarray, axes: tuple[int, ...], epsilon: float) -> np.ndarray:
    """(x - mean) / sqrt(var + epsilon) over ``axes``, with the biased variance (two-pass),
    computed in double and returned in x's dtype.

    Near the largest float the answer is defined by x's dtype: x - mean and its square are
    held in it, as the generated code (the opened norms) holds them. A square past the
    largest float is inf there, so the variance is inf and the normalized value 0 (NaN
    where x - mean itself overflowed): the same answer the compiled code gives, not a
    double-precision one no float32 program computes. (ONNX Runtime, which takes the
    variance as E[x^2] - E[x]^2, gives 0 or NaN on such rows as well.)"""
    centered, _, deviation = _moments(x, axes, epsilon)
    with np.errstate(over="ignore", invalid="ignore"):
        return (centered / deviation).astype(x.dtype)


def _moments(x: np.ndarray, axes: tuple[int, ...], epsilon: float) -> tuple[np.ndarray, ...]:
    """(x - mean, mean, sqrt(var + epsilon)) over ``axes`` in double, as normalize takes them."""
    wide = accumulator(x.dtype)
    x64 = x.astype(wide)
    with np.errstate(over="ignore", invalid="ignore"):
        mean = x64.mean(axis=axes, keepdims=True)
        centered = (x64 - mean).astype(x.dtype).astype(wide)
        squares = (centered * centered).astype(x.dtype).astype(wide)
        return centered, mean, np.sqrt(np.mean(squares, axis=axes, keepdims=True) + epsilon)


# ----- batch_norm (inference) ------------------------------------------------------


def _batch_norm_infer(call: OpCall) -> list[TensorType]:
    x = _float_input(call, 2, "N, C, ...")
    _channel_params(call, ("scale", "bias", "mean", "var"))
    return [x]


def _batch_norm_reference(xs, attrs):
    x, scale, bias, mean, var = xs
    eps = x.dtype.type(attrs["epsilon"])
    factor = _per_channel(scale / np.sqrt(var + eps), x.ndim)
    out = x * factor + (_per_channel(bias, x.ndim) - _per_channel(mean, x.ndim) * factor)
    return [out.astype(x.dtype, copy=False)]


def _batch_norm_access(call: OpCall) -> list[Stmt]:
    out = call.out_types[0]
    channel = (i_sym(1),)
    reads = (Read(0, out_indices(out.rank)),) + tuple(Read(k, channel) for k in range(1, 5))
    x, scale, bias, mean, var = (v_sym(k) for k in range(5))
    factor = scale / sp.sqrt(var + call.attrs["epsilon"])
    # as onnxruntime applies it: a zero result has its sign ((x - mean) * factor + bias gave
    # -0 where onnxruntime gives +0)
    return [Stmt(0, out.shape, reads, x * factor + scalar.Grouped(bias - mean * factor))]


register(
    OpDef(
        name="batch_norm",
        inputs=("x", "scale", "bias", "mean", "var"),
        attrs=dict(_EPSILON),
        infer=_batch_norm_infer,
        reference=_batch_norm_reference,
        access=_batch_norm_access,
        doc="Inference batch normalization with running statistics, per channel (axis 1): "
            "x * k + (bias - mean * k) with k = scale / sqrt(var + epsilon), as onnxruntime computes it.",
    )
)

# ----- compound normalizations -----------------------------------------------------


def _batch_norm_train_infer(call: OpCall) -> list[TensorType]:
    x = _float_input(call, 2, "N, C, ...")
    _channel_params(call, ("scale", "bias"))
    return [x]


def _batch_norm_train_reference(xs, attrs):
    x, scale, bias = xs
    axes = (0,) + tuple(range(2, x.ndim))
    out = normalize(x, axes, attrs["epsilon"]) * _per_channel(scale, x.ndim) + _per_channel(bias, x.ndim)
    return [out.astype(x.dtype, copy=False)]


register(
    OpDef(
        name="batch_norm_train",
        inputs=("x", "scale", "bias"),
        attrs=dict(_EPSILON),
        infer=_batch_norm_train_infer,
        reference=_batch_norm_train_reference,
        compound=True,
        doc="Training-mode batch normalization forward: statistics of the batch over every axis "
            "but 1 (biased variance), then scale and bias per channel. Decomposed into BN_A "
            "(statistics) and BN_B (normalize).",
    )
)


def _instance_norm_infer(call: OpCall) -> list[TensorType]:
    x = _float_input(call, 3, "N, C, spatial...")
    _channel_params(call, ("scale", "bias"))
    return [x]


def _instance_norm_reference(xs, attrs):
    x, scale, bias = xs
    _, mean, deviation = _moments(x, tuple(range(2, x.ndim)), attrs["epsilon"])
    # as onnxruntime (and the decomposition) apply it, x * k + (bias - mean * k): a zero
    # result has its sign ((x - mean) * k + bias gave -0 where onnxruntime gives +0)
    with np.errstate(over="ignore", invalid="ignore"):
        k = _per_channel(scale, x.ndim) / deviation
        out = x.astype(k.dtype) * k + (_per_channel(bias, x.ndim) - mean * k)
    return [out.astype(x.dtype, copy=False)]


register(
    OpDef(
        name="instance_norm",
        inputs=("x", "scale", "bias"),
        attrs=dict(_EPSILON),
        infer=_instance_norm_infer,
        reference=_instance_norm_reference,
        compound=True,
        doc="Instance normalization: statistics per (n, c) over the spatial axes, then scale "
            "and bias per channel.",
    )
)


def _layer_norm_infer(call: OpCall) -> list[TensorType]:
    x = _float_input(call, 1, "any rank")
    axis = call.axis(call.attrs["axis"], x.rank)
    normalized = x.shape[axis:]
    for k, name in ((1, "scale"), (2, "bias")):
        if k == 2 and not call.has_input(k):
            continue
        t = call.input(k)
        fits = t.rank <= len(normalized) and all(
            d in (1, n) for d, n in zip(reversed(t.shape), reversed(normalized)))
        if not fits:
            raise call.fail(f"{name} {t} does not broadcast to the normalized shape {list(normalized)}")
    same_dtype(call, [t for t in call.in_types if t is not None])
    return [x]


def _layer_norm_reference(xs, attrs):
    x, scale = xs[0], xs[1]
    axis = attrs["axis"] % x.ndim
    out = normalize(x, tuple(range(axis, x.ndim)), attrs["epsilon"]) * scale
    if len(xs) > 2 and xs[2] is not None:
        out = out + xs[2]
    return [out.astype(x.dtype, copy=False)]


register(
    OpDef(
        name="layer_norm",
        inputs=("x", "scale", "bias"),
        min_inputs=2,
        attrs={"axis": Attr("int", -1, "normalize over axes axis..rank-1"), **_EPSILON},
        infer=_layer_norm_infer,
        reference=_layer_norm_reference,
        compound=True,
        doc="Layer normalization over the trailing axes from `axis`; scale and bias broadcast "
            "to those axes. Output 0 (the normalized tensor) only. Deviations whose square "
            "overflows x's dtype give a normalized 0 (NaN where the deviation overflows), as "
            "the compiled code computes.",
    )
)

# ----- lrn -------------------------------------------------------------------------


def _lrn_infer(call: OpCall) -> list[TensorType]:
    x = _float_input(call, 2, "N, C, ...")
    if call.attrs["size"] < 1:
        raise call.fail(f"size={call.attrs['size']} must be positive")
    return [x]


def _lrn_window(size: int) -> tuple[int, int]:
    """Channels before and after c in c's window."""
    return (size - 1) // 2, size // 2


def _lrn_reference(xs, attrs):
    x = xs[0]
    size = attrs["size"]
    if x.size == 0:
        return [x.copy()]
    before, after = _lrn_window(size)
    squares = np.square(x.astype(accumulator(x.dtype)))
    widths = [(0, 0), (before, after)] + [(0, 0)] * (x.ndim - 2)
    padded = np.pad(squares, widths)
    windows = np.lib.stride_tricks.sliding_window_view(padded, size, axis=1)
    total = windows.sum(axis=-1)
    scale = attrs["bias"] + attrs["alpha"] / size * total
    return [(x / scale ** attrs["beta"]).astype(x.dtype)]


def _lrn_access(call: OpCall) -> list[Stmt]:
    out = call.out_types[0]
    a = call.attrs
    before, _ = _lrn_window(a["size"])
    rest = tuple(i_sym(k) for k in range(2, out.rank))
    neighbour = Read(0, (i_sym(0), i_sym(1) - before + r_sym(0)) + rest, pad=0.0)
    center = Read(0, out_indices(out.rank))
    finalize = v_sym(1) / (a["bias"] + sp.Float(a["alpha"] / a["size"]) * acc_sym()) ** sp.Float(a["beta"])
    return [Stmt(0, out.shape, (neighbour, center), v_sym(0) ** 2, reduce="sum", reduce_extents=(a["size"],),
                 finalize=finalize)]


register(
    OpDef(
        name="lrn",
        inputs=("x",),
        attrs={"size": Attr("int", doc="channels in the window"), "alpha": Attr("float", 1e-4),
               "beta": Attr("float", 0.75), "bias": Attr("float", 1.0)},
        infer=_lrn_infer,
        reference=_lrn_reference,
        access=_lrn_access,
        doc="Local response normalization across channels: x / (bias + alpha/size * sum of "
            "squares over channels c-floor((size-1)/2) .. c+ceil((size-1)/2))**beta.",
    )
)
