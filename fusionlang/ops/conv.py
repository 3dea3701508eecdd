"""Convolutions: conv and its transpose (N-d, NCHW..., grouped, strided, dilated, padded)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import sympy as sp
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import sp

from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, acc_sym, i_sym, r_sym, v_sym
from fusionlang.ops.common import accumulator, require_float, same_dtype
from fusionlang.ops.registry import Attr, OpCall, OpDef, register
from fusionlang.ops.window import WINDOW_ATTRS, Window, window_of

# ----- conv ------------------------------------------------------------------------



def multiply_accumulate(call: OpCall, out, x_read: Read, w_read: Read, extents: tuple[int, ...]) -> list[Stmt]:
    """One statement: sum of x * w over ``extents``, plus the per-channel bias if given."""
    reads = [x_read, w_read]
    finalize = None
    if call.has_input(2):
        reads.append(Read(2, (i_sym(1),)))
        finalize = acc_sym() + v_sym(2)
    return [Stmt(0, out.shape, tuple(reads), v_sym(0) * v_sym(1), reduce="sum",
                 reduce_extents=extents, finalize=finalize)]

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


def _check_bias(call: OpCall, channels: int) -> None:
    if call.has_input(2) and call.input(2).shape != (channels,):
        raise call.fail(f"bias {call.input(2)} should have shape [{channels}]")


def _conv_infer(call: OpCall) -> list[TensorType]:
    x, w, _, window = _conv_geometry(call)
    require_float(call, x)
    dtype = same_dtype(call, [x, w] + ([call.input(2)] if call.has_input(2) else []))
    _check_bias(call, w.shape[0])
    spatial = window.output_shape(x.shape[2:])
    if min(spatial, default=1) < 1:
        raise call.fail(f"window does not fit: output spatial shape {list(spatial)}")
    return [TensorType((x.shape[0], w.shape[0]) + spatial, dtype)]


def convolve(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, group: int, window: Window) -> np.ndarray:
    """Grouped N-d convolution of (N, C, *spatial) by (OC, C/group, *kernel)."""
    result_dtype = x.dtype
    wide = accumulator(result_dtype)
    x, w = x.astype(wide, copy=False), w.astype(wide, copy=False)
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
        letters = "dehijklm"[:s]  # none of n, g, c, o used for batch, group and channels
        kletters = "pqrstuvw"[:s]
        spec = f"ngc{letters}{kletters},goc{kletters}->ngo{letters}"
        out = np.einsum(spec, cols, wg, optimize=True)
        out = out.reshape((n, oc) + out_spatial)
    if bias is not None:
        out = out + bias.reshape((1, oc) + (1,) * s)
    return np.asarray(out, dtype=result_dtype, order="C")


def _conv_reference(xs, attrs):
    x, w = xs[0], xs[1]
    call = OpCall("conv", "?", attrs, [TensorType.of(x), TensorType.of(w)])
    _, _, group, window = _conv_geometry(call)
    return [convolve(x, w, xs[2] if len(xs) > 2 else None, group, window)]


def _conv_access(call: OpCall) -> list[Stmt]:
    x, w, group, window = _conv_geometry(call)
    out = call.out_types[0]
    s = window.rank
    cin_per_group = w.shape[1]
    oc_per_group = w.shape[0] // group
    channel = (i_sym(1) // oc_per_group) * cin_per_group + r_sym(0) if group > 1 else r_sym(0)
    x_read = Read(0, (i_sym(0), channel) + window.input_index(2, 1), pad=0.0)
    w_read = Read(1, (i_sym(1), r_sym(0)) + tuple(r_sym(1 + a) for a in range(s)))
    return multiply_accumulate(call, out, x_read, w_read, (cin_per_group,) + window.kernel)


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

# ----- conv_transpose --------------------------------------------------------------
# y[n, g*Mg + m, o] = sum over c < C/group and kernel offsets k with o + pad = i*stride + k*dilation
#                     of x[n, g*C/group + c, i] * w[g*C/group + c, m, k]


def _transpose_geometry(call: OpCall):
    x, w = call.input(0), call.input(1)
    if x.rank < 3 or w.rank != x.rank:
        raise call.fail(f"input {x} and weight {w} must have the same rank >= 3")
    group = call.attrs["group"]
    if group < 1 or x.shape[1] % group:
        raise call.fail(f"group={group} does not divide input channels {x.shape[1]}")
    if w.shape[0] != x.shape[1]:
        raise call.fail(f"weight {w} expects {w.shape[0]} input channels, input has {x.shape[1]}")
    kernel = call.attrs["kernel_shape"] or w.shape[2:]
    if tuple(kernel) != w.shape[2:]:
        raise call.fail(f"kernel_shape {list(kernel)} does not match weight {w}")
    window = window_of(call, x.rank - 2, tuple(kernel))
    extra = call.attrs["output_padding"] or (0,) * window.rank
    if len(extra) != window.rank or min(extra) < 0:
        raise call.fail(f"output_padding {list(extra)} should have {window.rank} non-negative entries")
    return x, w, group, window, tuple(extra)


def _transpose_spatial(window: Window, spatial: tuple[int, ...], extra: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(
        s * (n - 1) + e + d * (k - 1) + 1 - pb - pe
        for n, k, s, pb, pe, d, e in zip(spatial, window.kernel, window.strides, window.pads_begin,
                                         window.pads_end, window.dilations, extra)
    )


def _transpose_infer(call: OpCall) -> list[TensorType]:
    x, w, group, window, extra = _transpose_geometry(call)
    require_float(call, x)
    dtype = same_dtype(call, [x, w] + ([call.input(2)] if call.has_input(2) else []))
    channels = w.shape[1] * group
    _check_bias(call, channels)
    spatial = _transpose_spatial(window, x.shape[2:], extra)
    if min(spatial) < 1:
        raise call.fail(f"pads are larger than the output: output spatial shape {list(spatial)}")
    return [TensorType((x.shape[0], channels) + spatial, dtype)]


def _transpose_reference(xs, attrs):
    # a transposed conv is a stride-1 conv of the zero-upsampled input, suitably padded,
    # with the kernel flipped and its channel axes swapped per group
    x, w = xs[0], xs[1]
    call = OpCall("conv_transpose", "?", attrs, [TensorType.of(x), TensorType.of(w)])
    _, _, group, window, extra = _transpose_geometry(call)
    n, c = x.shape[:2]
    s = window.rank
    up = np.zeros((n, c) + tuple(st * (m - 1) + 1 for st, m in zip(window.strides, x.shape[2:])), x.dtype)
    up[(slice(None), slice(None)) + tuple(slice(None, None, st) for st in window.strides)] = x
    span = [d * (k - 1) for k, d in zip(window.kernel, window.dilations)]
    begin = [sp_ - pb for sp_, pb in zip(span, window.pads_begin)]
    end = [sp_ - pe + e for sp_, pe, e in zip(span, window.pads_end, extra)]
    # pad, then crop: a crop may reach past the data into the other side's padding
    up = np.pad(up, [(0, 0), (0, 0)] + [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)])
    crop = tuple(slice(max(-b, 0), up.shape[2 + a] - max(-e, 0)) for a, (b, e) in enumerate(zip(begin, end)))
    up = up[(slice(None), slice(None)) + crop]
    mg = w.shape[1]
    flipped = np.flip(w, axis=tuple(range(2, 2 + s)))
    wt = flipped.reshape((group, c // group, mg) + window.kernel).swapaxes(1, 2)
    wt = wt.reshape((group * mg, c // group) + window.kernel)
    unit = Window(window.kernel, (1,) * s, (0,) * s, (0,) * s, window.dilations)
    return [convolve(up, wt, xs[2] if len(xs) > 2 else None, group, unit)]


def _transpose_access(call: OpCall) -> list[Stmt]:
    x, w, group, window, _ = _transpose_geometry(call)
    out = call.out_types[0]
    cin_per_group, mg = x.shape[1] // group, w.shape[1]
    in_channel = (i_sym(1) // mg) * cin_per_group + r_sym(0) if group > 1 else r_sym(0)
    out_channel = sp.Mod(i_sym(1), mg) if group > 1 else i_sym(1)
    spatial, divisible = [], []
    for a, (st, pb, d) in enumerate(zip(window.strides, window.pads_begin, window.dilations)):
        numerator = i_sym(2 + a) + pb - r_sym(1 + a) * d
        spatial.append(sp.floor(numerator / st) if st > 1 else numerator)
        if st > 1:
            divisible.append(sp.Eq(sp.Mod(numerator, st), 0))
    cond = sp.And(*divisible) if divisible else None
    x_read = Read(0, (i_sym(0), in_channel) + tuple(spatial), pad=0.0, cond=cond)
    w_read = Read(1, (in_channel, out_channel) + tuple(r_sym(1 + a) for a in range(window.rank)))
    return multiply_accumulate(call, out, x_read, w_read, (cin_per_group,) + window.kernel)


register(
    OpDef(
        name="conv_transpose",
        inputs=("x", "w", "b"),
        min_inputs=2,
        attrs={**WINDOW_ATTRS, "group": Attr("int", 1),
               "output_padding": Attr("ints", (), "extra cells at the end of each spatial axis (cells no "
                                      "input reaches hold the bias)")},
        infer=_transpose_infer,
        reference=_transpose_reference,
        access=_transpose_access,
        doc="N-d transposed convolution (the gradient of conv): weight (C, M/group, *kernel), "
            "explicit pads; output_shape and auto_pad are resolved by the importer.",
    )
)
