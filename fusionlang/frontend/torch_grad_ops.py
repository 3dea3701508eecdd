"""Converters for the ATen ops AOTAutograd's backward graphs hold (and a few forward ops
the training models bring): convolution_backward, max pooling with its indices and their
backward, the index_put that embedding's backward accumulates with (a segment_sum: rows
added in order), slice_scatter,
hardtanh, and bitwise ops on bool masks.

Each backward op is written with registry ops the forward converters already emit (conv,
reduce_sum, gather, segment_sum, pad), so the rules and the partitioner see a
backward graph as they see a forward one. Registered into ``torch_ops``' tables on import
(``torch_fx`` imports this module).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fusionlang.frontend.torch_ops import FxContext, per_axis, converts, refuses, row_index_refusal

#: a slice's end before the first row, for a negative step (as the ONNX importer reads it)
INT64_MIN = np.iinfo(np.int64).min


# ----- forward ops of the training models -------------------------------------------------
@converts("aten.hardtanh.default")
def _hardtanh(ctx: FxContext) -> str:
    return ctx.emit("clip", ctx.arg(0, "self"), min=float(ctx.arg(1, "min_val", -1.0)),
                    max=float(ctx.arg(2, "max_val", 1.0)))


BITWISE = {"bitwise_and": "and", "bitwise_or": "or", "bitwise_xor": "xor"}


def _bitwise(op: str):
    def convert(ctx: FxContext) -> str:
        a, b = ctx.arg(0, "self"), ctx.arg(1, "other")
        if not isinstance(b, str):
            b = ctx.constant(np.asarray(bool(b)))
        return ctx.emit(op, a, b)

    return convert


for _name, _op in BITWISE.items():
    converts(f"aten.{_name}.Tensor", f"aten.{_name}.Scalar")(_bitwise(_op))


@converts("aten.bitwise_not.default")
def _bitwise_not(ctx: FxContext) -> str:
    return ctx.emit("not", ctx.arg(0, "self"))


@refuses(*(f"aten.{name}.{overload}" for name in BITWISE for overload in ("Tensor", "Scalar")),
         "aten.bitwise_not.default")
def _integer_bitwise(node) -> str | None:
    # on bools these are logical ops; on integers they act on bits, which no converter spells
    tensors = [arg for arg in node.args if hasattr(arg, "meta")]
    dtypes = {str(getattr(arg.meta.get("val"), "dtype", "")) for arg in tensors}
    return None if dtypes == {"torch.bool"} else f"bitwise ops on {sorted(dtypes)} (not bool) have no converter"


# ----- convolution ----------------------------------------------------------------------------
@converts("aten.convolution_backward.default")
def _convolution_backward(ctx: FxContext) -> tuple:
    """(grad_input, grad_weight, grad_bias), each computed where the mask asks for it:
    grad_input the transposed convolution of the output's gradient (as a convolution), grad_weight a
    convolution of the input by the output's gradient (batch and channels swapped), and
    grad_bias the gradient summed over batch and space."""
    grad, x, weight = ctx.arg(0, "grad_output"), ctx.arg(1, "input"), ctx.arg(2, "weight")
    spatial = ctx.rank(x) - 2
    stride, padding, dilation = (per_axis(ctx.arg(k, name), spatial) for k, name in
                                 ((4, "stride"), (5, "padding"), (6, "dilation")))
    groups = int(ctx.arg(9, "groups"))
    mask = list(ctx.arg(10, "output_mask"))
    window = (stride, padding, dilation)
    grad_input = _grad_input(ctx, grad, x, weight, window, groups) if mask[0] else None
    depthwise = spatial == 2 and ctx.shape(x)[1] == groups == ctx.shape(weight)[0]
    weight_grad = _depthwise_grad_weight if depthwise else _grad_weight
    grad_weight = weight_grad(ctx, grad, x, weight, window, groups) if mask[1] else None
    axes = (0,) + tuple(range(2, ctx.rank(grad)))
    grad_bias = ctx.emit("reduce_sum", grad, axes=axes, keepdims=0) if mask[2] else None
    return (grad_input, grad_weight, grad_bias)


@refuses("aten.convolution_backward.default")
def _transposed_backward(node) -> str | None:
    return "the backward of a transposed convolution has no converter" if node.args[7] else None


def _grad_input(ctx: FxContext, grad: str, x: str, weight: str, window, groups: int) -> str:
    """The transposed convolution of the output's gradient, written as a convolution (the
    GEMM template takes it; conv_transpose is a loop nest, 70% of ResNet-18's training
    step): the gradient spread by the stride (zeros between its rows), padded so each
    input row sees the outputs its taps fed, convolved with the weight flipped in space and
    its channels swapped per group."""
    stride, padding, dilation = window
    kernel = ctx.shape(weight)[2:]
    spread = _spread(ctx, grad, stride)
    # input row h reads spread rows h - (d*(k-1) - p) + j*d: pad that much before, and
    # after up to the input's extent (negative pads crop rows no input row reads)
    before = [d * (k - 1) - p for k, p, d in zip(kernel, padding, dilation)]
    after = [n + p - length for n, p, length in zip(ctx.shape(x)[2:], padding, ctx.shape(spread)[2:])]
    if min(before + after) < 0:
        spread = ctx.emit("pad", spread, pads=(0, 0, *before, 0, 0, *after))
        before = after = [0] * len(kernel)
    return ctx.emit("conv", spread, _transposed_kernel(ctx, weight, groups), kernel_shape=kernel,
                    strides=(1,) * len(kernel), pads=tuple(before) + tuple(after), dilations=dilation, group=groups)


def _spread(ctx: FxContext, grad: str, stride) -> str:
    """``grad`` with stride - 1 zero rows (and columns) after each of its rows: where the
    input's rows between two windows' starts sit."""
    if all(s == 1 for s in stride):
        return grad
    batch, channels, *space = ctx.shape(grad)
    interleaved = [extent for n in space for extent in (n, 1)]
    grown = ctx.emit("reshape", grad, shape=(batch, channels, *interleaved))
    ends = [pad for s in stride for pad in (0, s - 1)]
    grown = ctx.emit("pad", grown, pads=(0,) * (2 + 2 * len(space)) + (0, 0, *ends))
    return ctx.emit("reshape", grown, shape=(batch, channels, *(n * s for n, s in zip(space, stride))))


def _transposed_kernel(ctx: FxContext, weight: str, groups: int) -> str:
    """(G*Co, Ci, *k) -> (G*Ci, Co, *k) flipped along every spatial axis longer than one
    (flipping a 1x1 kernel changes nothing, and its slice was a copy of the weight, a
    kernel of its own per pointwise conv)."""
    outputs, per_group_in, *kernel = ctx.shape(weight)
    per_group_out = outputs // groups
    spatial = tuple(range(3, 3 + len(kernel)))
    swapped = ctx.emit("reshape", weight, shape=(groups, per_group_out, per_group_in, *kernel))
    swapped = ctx.emit("transpose", swapped, perm=(0, 2, 1) + spatial)
    swapped = ctx.emit("reshape", swapped, shape=(groups * per_group_in, per_group_out, *kernel))
    flipped = tuple(axis for axis, extent in enumerate(kernel, start=2) if extent > 1)
    if not flipped:
        return swapped
    return ctx.emit("slice", swapped, starts=(-1,) * len(flipped), ends=(INT64_MIN,) * len(flipped), axes=flipped,
                    steps=(-1,) * len(flipped))


def _grad_weight(ctx: FxContext, grad: str, x: str, weight: str, window, groups: int) -> str:
    """grad_w[g*Co+o, c, k] = sum over n and output positions of x[n, g*Ci+c, ...] * grad[n, g*Co+o, ...]:
    a grouped convolution whose batch is the input's channels and whose channels are the
    batch (per group), with the forward's dilation as stride and its stride as dilation."""
    stride, padding, dilation = window
    batch, channels, *space = ctx.shape(x)
    outputs, out_space = ctx.shape(grad)[1], ctx.shape(grad)[2:]
    per_group_in, per_group_out = channels // groups, outputs // groups
    # x: (N, G*Ci, *S) -> (Ci, G*N, *S); grad: (N, G*Co, *So) -> (G*Co, N, *So)
    x_t = ctx.emit("reshape", x, shape=(batch, groups, per_group_in, *space))
    x_t = ctx.emit("transpose", x_t, perm=(2, 1, 0) + tuple(range(3, 3 + len(space))))
    x_t = ctx.emit("reshape", x_t, shape=(per_group_in, groups * batch, *space))
    g_t = ctx.emit("reshape", grad, shape=(batch, groups, per_group_out, *out_space))
    g_t = ctx.emit("transpose", g_t, perm=(1, 2, 0) + tuple(range(3, 3 + len(out_space))))
    g_t = ctx.emit("reshape", g_t, shape=(groups * per_group_out, batch, *out_space))
    if _pointwise(ctx.shape(weight)[2:], window, groups) and channels <= outputs:
        # a 1x1 window reads the plane as it is: the gradient correlated with the input is
        # grad_w itself, (Co, Ci, 1, 1), without the transpose of the (Ci, Co) taps (a
        # kernel of its own per pointwise conv, 0.2 to 0.4 ms for MobileNetV2's largest).
        # Only where Ci <= Co: the GEMM template is slow with many more rows (the kernel's
        # channels) than columns at k = N*H*W = 16, MobileNetV2's 4 x 2 x 2 planes, CPU ms:
        # Co=1280 Ci=320 1.21 as taps, 0.50 so; Co=320 Ci=960 0.30 + 0.2 transpose as taps, 0.89 so
        return ctx.emit("conv", g_t, x_t, kernel_shape=tuple(space), strides=(1,) * len(space),
                        pads=(0,) * (2 * len(space)), dilations=(1,) * len(space), group=1)
    taps = ctx.emit("conv", x_t, g_t, kernel_shape=tuple(out_space), strides=dilation, pads=padding + padding,
                    dilations=stride, group=groups)
    kernel = ctx.shape(weight)[2:]
    if tuple(ctx.shape(taps)[2:]) != tuple(kernel):  # windows past the kernel (stride leftovers)
        taps = ctx.emit("slice", taps, starts=(0,) * len(kernel), ends=tuple(kernel),
                        axes=tuple(range(2, 2 + len(kernel))))
    return ctx.emit("transpose", taps, perm=(1, 0) + tuple(range(2, 2 + len(kernel))))


def _pointwise(kernel, window, groups: int) -> bool:
    """A 1x1 convolution with stride 1, no padding, one group: output and input planes
    are the same positions."""
    stride, padding, dilation = window
    return groups == 1 and all(k == 1 for k in kernel) and all(s == 1 for s in stride) and \
        not any(padding) and all(d == 1 for d in dilation)


# ----- max pooling and its backward -----------------------------------------------------
@dataclass(frozen=True)
class PoolWindow:
    """A 2-D pooling window's geometry: the input's and output's planes, kernel, stride,
    padding and dilation. A position in a plane is flat (row * width + column), as torch's
    max pooling indices are."""

    plane: tuple[int, ...]
    out_plane: tuple[int, ...]
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]

    def rows(self, axis: int, out: np.ndarray, tap: np.ndarray | int) -> np.ndarray:
        """The input row (column, axis 1) that output row ``out``'s tap ``tap`` reads."""
        return out * self.stride[axis] - self.padding[axis] + tap * self.dilation[axis]

    def taps(self) -> np.ndarray:
        """(output positions, kernel taps): the flat input position each tap of each
        window reads; the plane's size (one past its end) for a tap in the padding."""
        (height, width), (out_h, out_w), (k_h, k_w) = self.plane, self.out_plane, self.kernel
        row = self.rows(0, np.arange(out_h)[:, None, None, None], np.arange(k_h)[None, None, :, None])
        col = self.rows(1, np.arange(out_w)[None, :, None, None], np.arange(k_w)[None, None, None, :])
        inside = (row >= 0) & (row < height) & (col >= 0) & (col < width)
        return np.where(inside, row * width + col, height * width).reshape(out_h * out_w, k_h * k_w)

    def windows(self) -> np.ndarray:
        """(input positions, kernel taps): the flat output position whose window reads
        each input position through each tap; the output plane's size where none does."""
        (height, width), (out_h, out_w), (k_h, k_w) = self.plane, self.out_plane, self.kernel
        out_row = _window_of(np.arange(height)[:, None, None, None], np.arange(k_h)[None, None, :, None], out_h,
                             self.stride[0], self.padding[0], self.dilation[0])
        out_col = _window_of(np.arange(width)[None, :, None, None], np.arange(k_w)[None, None, None, :], out_w,
                             self.stride[1], self.padding[1], self.dilation[1])
        found = (out_row >= 0) & (out_col >= 0)
        return np.where(found, out_row * out_w + out_col, out_h * out_w).reshape(height * width, k_h * k_w)


def _window_of(position, tap, extent: int, stride: int, padding: int, dilation: int) -> np.ndarray:
    """The output row whose tap ``tap`` reads input row ``position``; -1 where none does."""
    offset = position + padding - tap * dilation
    out = offset // stride
    return np.where((offset % stride == 0) & (out >= 0) & (out < extent), out, -1)


def _pool_window(ctx: FxContext, x: str, out_plane, kernel_k: int = 1, stride_k: int = 2, padding_k: int = 3,
                 dilation_k: int = 4) -> PoolWindow:
    kernel = per_axis(ctx.arg(kernel_k, "kernel_size"), 2)
    return PoolWindow(tuple(ctx.shape(x)[-2:]), tuple(out_plane), kernel,
                      per_axis(ctx.arg(stride_k, "stride", []) or kernel, 2),
                      per_axis(ctx.arg(padding_k, "padding", 0), 2), per_axis(ctx.arg(dilation_k, "dilation", 1), 2))


@converts("aten.max_pool2d_with_indices.default")
def _max_pool(ctx: FxContext) -> tuple:
    """(maxima, indices): max_pool, and where its indices are read (training: the
    backward reads them) each window's first maximum's flat position in its plane."""
    x = ctx.arg(0, "self")
    kernel = per_axis(ctx.arg(1, "kernel_size"), 2)
    stride = per_axis(ctx.arg(2, "stride", []) or kernel, 2)
    padding = per_axis(ctx.arg(3, "padding", 0), 2)
    out = ctx.emit("max_pool", x, kernel_shape=kernel, strides=stride, pads=padding + padding,
                   dilations=per_axis(ctx.arg(4, "dilation", 1), 2), ceil_mode=int(ctx.arg(5, "ceil_mode", False)))
    if 1 not in ctx.results_used():
        return (out, None)
    return (out, _max_indices(ctx, x, _pool_window(ctx, x, ctx.shape(out)[-2:])))


def _max_indices(ctx: FxContext, x: str, window: PoolWindow) -> str:
    """Each window's taps gathered from the plane (padding reads -inf), the first tap
    that holds their maximum, and that tap's flat position (torch's order: rows, then
    columns, the first of equal maxima)."""
    *lead, height, width = ctx.shape(x)
    flat = ctx.emit("reshape", x, shape=(*lead, height * width))
    padded = ctx.emit("pad", flat, pads=(0,) * (2 * len(lead) + 1) + (1,), value=float("-inf"))
    taps_at = window.taps()
    taps = ctx.emit("gather", padded, ctx.constant(taps_at), axis=len(lead))
    best = ctx.emit("reduce_max", taps, axes=(len(lead) + 1,), keepdims=1)
    tap = ctx.emit("index_of", taps, best, axis=len(lead) + 1, keepdims=0)
    # a window's tap k sits at its first tap's position plus k's offset in the kernel
    k_h, k_w = window.kernel
    offsets = (np.arange(k_h)[:, None] * window.dilation[0] * width + np.arange(k_w) * window.dilation[1]).reshape(-1)
    starts = window.rows(0, np.arange(window.out_plane[0])[:, None], 0) * width + window.rows(
        1, np.arange(window.out_plane[1])[None, :], 0)
    position = ctx.emit("add", ctx.emit("gather", ctx.constant(offsets.astype(np.int64)), tap, axis=0),
                        ctx.constant(starts.reshape(-1).astype(np.int64)))
    return ctx.emit("reshape", position, shape=(*lead, *window.out_plane))


@converts("aten.max_pool2d_with_indices_backward.default")
def _max_pool_backward(ctx: FxContext) -> str:
    """The input's gradient: each input position gathers, through each kernel tap, the
    output whose window reads it there, and keeps that output's gradient where the
    output's index is this position (a gather per position, not a scatter per output)."""
    grad, x, indices = ctx.arg(0, "grad_output"), ctx.arg(1, "self"), ctx.arg(7, "indices")
    window = _pool_window(ctx, x, ctx.shape(grad)[-2:], 2, 3, 4, 5)
    *lead, height, width = ctx.shape(x)
    out_size = window.out_plane[0] * window.out_plane[1]
    end_pad = (0,) * (2 * len(lead) + 1) + (1,)
    # the sentinel past each output plane: gradient 0, an index no position has
    grads = ctx.emit("pad", ctx.emit("reshape", grad, shape=(*lead, out_size)), pads=end_pad, value=0.0)
    picks = ctx.emit("pad", ctx.emit("reshape", ctx.cast(indices, "int64"), shape=(*lead, out_size)), pads=end_pad,
                     value=-1.0)
    reads = ctx.constant(window.windows())
    positions = ctx.constant(np.arange(height * width, dtype=np.int64)[:, None])
    picked = ctx.emit("equal", ctx.emit("gather", picks, reads, axis=len(lead)), positions)
    zero = ctx.constant(np.zeros((), ctx.dtype(grad)))
    kept = ctx.emit("where", picked, ctx.emit("gather", grads, reads, axis=len(lead)), zero)
    total = ctx.emit("reduce_sum", kept, axes=(len(lead) + 1,), keepdims=0)
    return ctx.emit("reshape", total, shape=(*lead, height, width))


def _depthwise_grad_weight(ctx: FxContext, grad: str, x: str, weight: str, window, groups: int) -> str:
    """A depthwise convolution's weight gradient: per image and channel, the input's plane
    correlated with the output's gradient (a depthwise convolution of N*C channels whose
    kernel is the gradient's plane, the forward's dilation as stride and its stride as
    dilation: the template's correlation method), summed over the images. (Gathering
    every tap's inputs wrote 9 copies of the input, a kernel of its own; as the
    batch-for-channel grouped convolution, a GEMM template per channel.)"""
    stride, padding, dilation = window
    batch, channels, *space = ctx.shape(x)
    out_space, kernel = ctx.shape(grad)[2:], ctx.shape(weight)[2:]
    planes = ctx.emit("reshape", x, shape=(1, batch * channels, *space))
    taps = ctx.emit("reshape", grad, shape=(batch * channels, 1, *out_space))
    # the bottom (right) padding only the stride's leftover windows read is dropped
    after = [p - (n + 2 * p - s * (o - 1) - 1 - d * (k - 1)) for n, p, s, o, d, k in
             zip(space, padding, stride, out_space, dilation, kernel)]
    cropped = min(after) >= 0
    correlated = ctx.emit("conv", planes, taps, kernel_shape=tuple(out_space), strides=dilation,
                          pads=tuple(padding) + tuple(after if cropped else padding), dilations=stride,
                          group=batch * channels)
    if not cropped:  # windows past the kernel (stride leftovers beyond the padding)
        correlated = ctx.emit("slice", correlated, starts=(0,) * len(kernel), ends=tuple(kernel),
                              axes=tuple(range(2, 2 + len(kernel))))
    per_image = ctx.emit("reshape", correlated, shape=(batch, *ctx.shape(weight)))
    return ctx.emit("reduce_sum", per_image, axes=(0,), keepdims=0)


# ----- scatters -------------------------------------------------------------------------------
@converts("aten.slice_scatter.default")
def _slice_scatter(ctx: FxContext) -> str:
    """base with src written over base[start:end] along dim: src padded with zeros to
    base's extent, picked where the slice lies."""
    base, src = ctx.arg(0, "self"), ctx.arg(1, "src")
    rank = ctx.rank(base)
    dim = ctx.axis(ctx.arg(2, "dim", 0), rank)
    length = ctx.shape(base)[dim]
    start = _clamped(ctx.arg(3, "start"), 0, length)
    end = _clamped(ctx.arg(4, "end"), length, length)
    pads = [0] * (2 * rank)
    pads[dim], pads[rank + dim] = start, length - end
    placed = ctx.emit("pad", ctx.cast(src, ctx.dtype(base)), pads=tuple(pads))
    inside = np.zeros([length if axis == dim else 1 for axis in range(rank)], bool)
    inside.reshape(-1)[start:end] = True
    return ctx.emit("where", ctx.constant(inside), placed, base)


def _clamped(value, default: int, length: int) -> int:
    if value is None:
        return default
    value = int(value)
    value = value + length if value < 0 else value
    return min(max(value, 0), length)


@refuses("aten.slice_scatter.default")
def _stepped_slice_scatter(node) -> str | None:
    step = node.args[5] if len(node.args) > 5 else node.kwargs.get("step", 1)
    return "slice_scatter with a step other than 1 has no converter" if step != 1 else None


@converts("aten.index_put.default")
def _index_put(ctx: FxContext) -> str:
    """self with values added (accumulate) at the rows one index tensor picks along the
    first axis (what embedding's backward is; values hold one row per index): the rows
    summed into their segments, in order (segment_sum, a scatter-add on the C target),
    added to self unless self is zeros (embedding's backward starts from zeros)."""
    data, (index,), values = ctx.arg(0, "self"), ctx.arg(1, "indices"), ctx.arg(2, "values")
    rows = int(np.prod(ctx.shape(index)))
    row_shape = ctx.shape(data)[1:]
    flat = ctx.emit("reshape", ctx.cast(index, "int64"), shape=(rows,))
    updates = ctx.emit("reshape", ctx.cast(values, ctx.dtype(data)), shape=(rows, *row_shape))
    summed = ctx.emit("segment_sum", updates, flat, num_segments=ctx.shape(data)[0])
    return summed if _all_zeros(ctx, data) else ctx.emit("add", data, summed)


def _all_zeros(ctx: FxContext, value: str) -> bool:
    """Whether ``value`` is a constant of zeros (what ``aten.full(..., 0)`` imports as)."""
    array = ctx.builder.graph.constants.get(value)
    return array is not None and not np.any(array)


@refuses("aten.index_put.default")
def _index_put_form(node) -> str | None:
    indices = node.args[1]
    accumulate = node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False)
    if not accumulate:
        return "index_put without accumulate (an overwrite) has no converter"
    return row_index_refusal("index_put", indices)

