"""Pooling: windowed max and average, and their global (whole spatial extent) forms."""

from __future__ import annotations

from math import prod

import numpy as np

from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, acc_sym, i_sym, r_sym, v_sym
from fusionlang.ops.common import accumulator, lowest, require_float
from fusionlang.ops.registry import Attr, OpCall, OpDef, register
from fusionlang.ops.window import WINDOW_ATTRS, Window, window_of

_POOL_ATTRS = {**WINDOW_ATTRS, "ceil_mode": Attr("int", 0, "1: a last partial window is kept")}


def _pool_geometry(call: OpCall) -> tuple[TensorType, Window, tuple[int, ...]]:
    x = call.input(0)
    if x.rank < 3:
        raise call.fail(f"input {x} must have rank >= 3 (N, C, spatial...)")
    if not call.attrs["kernel_shape"]:
        raise call.fail("kernel_shape is required")
    window = window_of(call, x.rank - 2, call.attrs["kernel_shape"])
    if any(p >= k for p, k in zip(window.pads_begin + window.pads_end, window.kernel * 2)):
        raise call.fail(f"pads {list(window.pads_begin + window.pads_end)} must be smaller than "
                        f"kernel_shape {list(window.kernel)}")
    spatial = window.output_shape(x.shape[2:], bool(call.attrs["ceil_mode"]))
    if min(spatial) < 1:
        raise call.fail(f"window does not fit: output spatial shape {list(spatial)}")
    return x, window, spatial


def _reference_geometry(op: str, x: np.ndarray, attrs: dict):
    return _pool_geometry(OpCall(op, "?", attrs, [TensorType.of(x)]))


def _pool_infer(call: OpCall) -> list[TensorType]:
    x, _, spatial = _pool_geometry(call)
    return [TensorType(x.shape[:2] + spatial, x.dtype)]


def _window_axes(window: Window) -> tuple[int, ...]:
    return tuple(range(2 + window.rank, 2 + 2 * window.rank))


# ----- max pool --------------------------------------------------------------------


def _max_pool_reference(xs, attrs):
    x = xs[0]
    _, window, spatial = _reference_geometry("max_pool", x, attrs)
    cols = window.windows(x, lowest(x.dtype), spatial)
    return [np.ascontiguousarray(cols.max(axis=_window_axes(window)))]


def _max_pool_access(call: OpCall) -> list[Stmt]:
    _, window, _ = _pool_geometry(call)
    out = call.out_types[0]
    read = Read(0, (i_sym(0), i_sym(1)) + window.input_index(2, 0), pad=float("-inf"))
    return [Stmt(0, out.shape, (read,), v_sym(0), reduce="max", reduce_extents=window.kernel)]


register(
    OpDef(
        name="max_pool",
        inputs=("x",),
        attrs={**_POOL_ATTRS, "storage_order": Attr("int", 0, "layout of the (unsupported) indices output")},
        infer=_pool_infer,
        reference=_max_pool_reference,
        access=_max_pool_access,
        doc="N-d max pooling; padding never wins the max.",
    )
)

# ----- average pool ----------------------------------------------------------------


def window_counts(include_pad: bool, in_spatial: tuple[int, ...], window: Window,
                  spatial: tuple[int, ...]) -> np.ndarray:
    """Divisor of each output cell: the window cells inside the input (count_include_pad=0)
    or inside the padded input (count_include_pad=1); ceil_mode windows may hang past both.

    A dilated window can miss the input entirely; its sum is 0 and its divisor 1 (so the
    average is 0, as onnxruntime computes)."""
    per_axis = []
    for n, o, k, s, pb, pe, d in zip(in_spatial, spatial, window.kernel, window.strides, window.pads_begin,
                                     window.pads_end, window.dilations):
        lo, hi = (-pb, n + pe) if include_pad else (0, n)
        cells = np.arange(o)[:, None] * s - pb + np.arange(k)[None, :] * d
        per_axis.append(((cells >= lo) & (cells < hi)).sum(axis=1))
    counts = per_axis[0]
    for axis_counts in per_axis[1:]:
        counts = np.multiply.outer(counts, axis_counts)
    return np.maximum(counts, 1).astype(np.int64)


def _average_pool_infer(call: OpCall) -> list[TensorType]:
    require_float(call, call.input(0))
    return _pool_infer(call)


def _average_pool_reference(xs, attrs):
    x = xs[0]
    _, window, spatial = _reference_geometry("average_pool", x, attrs)
    counts = window_counts(bool(attrs["count_include_pad"]), x.shape[2:], window, spatial)
    total = window.windows(x, 0.0, spatial).sum(axis=_window_axes(window), dtype=accumulator(x.dtype))
    return [np.asarray(total / counts, dtype=x.dtype, order="C")]


def _average_pool_access(call: OpCall) -> list[Stmt]:
    x, window, spatial = _pool_geometry(call)
    counts = window_counts(bool(call.attrs["count_include_pad"]), x.shape[2:], window, spatial)
    out = call.out_types[0]
    reads = [Read(0, (i_sym(0), i_sym(1)) + window.input_index(2, 0), pad=0.0)]
    aux = {}
    if counts.min() == counts.max():
        finalize = acc_sym() / int(counts.flat[0])
    else:
        # the divisor varies near the borders: a constant table indexed by output position
        aux["count"] = counts
        reads.append(Read("count", tuple(i_sym(2 + a) for a in range(window.rank))))
        finalize = acc_sym() / v_sym(1)
    return [Stmt(0, out.shape, tuple(reads), v_sym(0), reduce="sum", reduce_extents=window.kernel,
                 finalize=finalize, aux=aux)]


register(
    OpDef(
        name="average_pool",
        inputs=("x",),
        attrs={**_POOL_ATTRS, "count_include_pad": Attr("int", 0, "1: padding cells count in the divisor")},
        infer=_average_pool_infer,
        reference=_average_pool_reference,
        access=_average_pool_access,
        doc="N-d average pooling (ONNX AveragePool with explicit pads).",
    )
)

# ----- global pools ----------------------------------------------------------------


def _global_infer(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    if x.rank < 3:
        raise call.fail(f"input {x} must have rank >= 3 (N, C, spatial...)")
    if call.op == "global_average_pool":
        require_float(call, x)
    return [x.with_shape(x.shape[:2] + (1,) * (x.rank - 2))]


def _global_access(kind: str):
    def access(call: OpCall) -> list[Stmt]:
        x = call.input(0)
        extents = x.shape[2:]
        read = Read(0, (i_sym(0), i_sym(1)) + tuple(r_sym(a) for a in range(len(extents))))
        finalize = acc_sym() / prod(extents) if kind == "sum" else None
        return [Stmt(0, call.out_types[0].shape, (read,), v_sym(0), reduce=kind, reduce_extents=extents,
                     finalize=finalize)]

    return access


def _global_reference(fn):
    def reference(xs, attrs):
        x = xs[0]
        return [np.asarray(fn(x, axis=tuple(range(2, x.ndim)), keepdims=True)).astype(x.dtype, copy=False)]

    return reference


def _spatial_max(x, axis, keepdims):
    return np.max(x, axis=axis, keepdims=keepdims, initial=lowest(x.dtype))


def _spatial_mean(x, axis, keepdims):
    return np.mean(x, axis=axis, keepdims=keepdims, dtype=accumulator(x.dtype))


for _name, _kind, _fn, _what in (("global_average_pool", "sum", _spatial_mean, "mean"),
                                 ("global_max_pool", "max", _spatial_max, "max")):
    register(
        OpDef(
            name=_name,
            inputs=("x",),
            infer=_global_infer,
            reference=_global_reference(_fn),
            access=_global_access(_kind),
            doc=f"The {_what} over all spatial axes of (N, C, spatial...), keeping them as size 1.",
        )
    )
