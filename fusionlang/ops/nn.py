"""Neural-network ops with windows or channels: conv, pooling."""

from __future__ import annotations

import numpy as np

from fusionlang.ir.types import TensorType
from fusionlang.ops.access import ACC, Read, Stmt, i_sym, r_sym, v_sym
from fusionlang.ops.common import require_float, same_dtype
from fusionlang.ops.registry import Attr, OpCall, OpDef, register
from fusionlang.ops.window import WINDOW_ATTRS, window_of

# ----- conv ------------------------------------------------------------------------


def _conv_geometry(call: OpCall):
    x, w = call.input(0), call.input(1)
    if x.rank < 3 or w.rank != x.rank:
        raise call.fail(f"input {x} and weight {w} must have the same rank >= 3")
    group = call.attrs["group"]
    if group < 1 or x.shape[1] % group or w.shape[0] % group:
        raise call.fail(f"group={group} does not divide input channels {x.shape[1]} and output channels {w.shape[0]}")
    if w.shape[1] * group != x.shape[1]:
        raise call.fail(f"weight {w} expects {w.shape[1] * group} input channels, input has {x.shape[1]}")
    kernel = call.attrs["kernel_shape"] or w.shape[2:]
    if tuple(kernel) != w.shape[2:]:
        raise call.fail(f"kernel_shape {list(kernel)} does not match weight {w}")
    return x, w, group, window_of(call, x.rank - 2, tuple(kernel))


def _conv_infer(call: OpCall) -> list[TensorType]:
    x, w, _, window = _conv_geometry(call)
    require_float(call, x)
    dtype = same_dtype(call, [x, w] + ([call.input(2)] if call.has_input(2) else []))
    if call.has_input(2) and call.input(2).shape != (w.shape[0],):
        raise call.fail(f"bias {call.input(2)} should have shape [{w.shape[0]}]")
    spatial = window.output_shape(x.shape[2:])
    if min(spatial, default=1) < 1:
        raise call.fail(f"window does not fit: output spatial shape {list(spatial)}")
    return [TensorType((x.shape[0], w.shape[0]) + spatial, dtype)]


def _conv_reference(xs, attrs):
    x, w = xs[0], xs[1]
    bias = xs[2] if len(xs) > 2 else None
    call = OpCall("conv", "?", attrs, [TensorType.of(x), TensorType.of(w)])
    _, _, group, window = _conv_geometry(call)
    out_spatial = window.output_shape(x.shape[2:])
    cols = window.windows(x, 0.0, out_spatial)  # N, C, *out, *k
    n, c = x.shape[:2]
    s = window.rank
    oc = w.shape[0]
    if group == 1:
        # contract C and kernel axes: (N, *out, C*k) @ (C*k, OC)
        axes_x = [1] + list(range(2 + s, 2 + 2 * s))
        out = np.tensordot(cols, w, axes=(axes_x, [1] + list(range(2, 2 + s))))  # N, *out, OC
        out = np.moveaxis(out, -1, 1)
    else:
        cols = cols.reshape((n, group, c // group) + cols.shape[2:])
        wg = w.reshape((group, oc // group) + w.shape[1:])
        letters = "abcdefgh"[:s]
        kletters = "pqrstuvw"[:s]
        spec = f"ngc{letters}{kletters},goc{kletters}->ngo{letters}"
        out = np.einsum(spec, cols, wg, optimize=True)
        out = out.reshape((n, oc) + out_spatial)
    if bias is not None:
        out = out + bias.reshape((1, oc) + (1,) * s)
    return [np.ascontiguousarray(out, dtype=x.dtype)]


def _conv_access(call: OpCall) -> list[Stmt]:
    x, w, group, window = _conv_geometry(call)
    out = call.out_types[0]
    s = window.rank
    cin_per_group = w.shape[1]
    oc_per_group = w.shape[0] // group
    channel = (i_sym(1) // oc_per_group) * cin_per_group + r_sym(0) if group > 1 else r_sym(0)
    x_read = Read(0, (i_sym(0), channel) + window.input_index(2, 1), pad=0.0)
    w_read = Read(1, (i_sym(1), r_sym(0)) + tuple(r_sym(1 + a) for a in range(s)))
    reads = [x_read, w_read]
    finalize = None
    if call.has_input(2):
        reads.append(Read(2, (i_sym(1),)))
        finalize = ACC + v_sym(2)
    return [Stmt(0, out.shape, tuple(reads), v_sym(0) * v_sym(1), reduce="sum",
                 reduce_extents=(cin_per_group,) + window.kernel, finalize=finalize)]


register(
    OpDef(
        name="conv",
        inputs=("x", "w", "b"),
        min_inputs=2,
        attrs={**WINDOW_ATTRS, "group": Attr("int", 1)},
        infer=_conv_infer,
        reference=_conv_reference,
        access=_conv_access,
        doc="N-d convolution (NCHW...), grouped, strided, dilated, explicitly padded.",
    )
)

# ----- max pool --------------------------------------------------------------------


def _pool_geometry(call: OpCall):
    x = call.input(0)
    if x.rank < 3:
        raise call.fail(f"input {x} must have rank >= 3 (N, C, spatial...)")
    if not call.attrs["kernel_shape"]:
        raise call.fail("kernel_shape is required")
    return x, window_of(call, x.rank - 2, call.attrs["kernel_shape"])


def _max_pool_infer(call: OpCall) -> list[TensorType]:
    x, window = _pool_geometry(call)
    spatial = window.output_shape(x.shape[2:], bool(call.attrs["ceil_mode"]))
    if min(spatial) < 1:
        raise call.fail(f"window does not fit: output spatial shape {list(spatial)}")
    return [TensorType(x.shape[:2] + spatial, x.dtype)]


def _max_pool_reference(xs, attrs):
    x = xs[0]
    call = OpCall("max_pool", "?", attrs, [TensorType.of(x)])
    _, window = _pool_geometry(call)
    out_spatial = window.output_shape(x.shape[2:], bool(attrs["ceil_mode"]))
    cols = window.windows(x, -np.inf, out_spatial)
    axes = tuple(range(2 + window.rank, 2 + 2 * window.rank))
    return [np.ascontiguousarray(cols.max(axis=axes))]


def _max_pool_access(call: OpCall) -> list[Stmt]:
    x, window = _pool_geometry(call)
    out = call.out_types[0]
    read = Read(0, (i_sym(0), i_sym(1)) + window.input_index(2, 0), pad=float("-inf"))
    return [Stmt(0, out.shape, (read,), v_sym(0), reduce="max", reduce_extents=window.kernel)]


register(
    OpDef(
        name="max_pool",
        inputs=("x",),
        attrs={**WINDOW_ATTRS, "ceil_mode": Attr("int", 0), "storage_order": Attr("int", 0)},
        infer=_max_pool_infer,
        reference=_max_pool_reference,
        access=_max_pool_access,
        doc="N-d max pooling; padding never wins the max.",
    )
)
