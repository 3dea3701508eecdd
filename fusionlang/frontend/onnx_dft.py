"""ONNX DFT (and STFT, a DFT of each frame) as one matmul with a constant matrix.

A DFT along one axis is linear in the real and imaginary parts of its input, so every form
ONNX defines (forward or inverse, full or one-sided, a dft_length that pads or truncates,
the inverse of a one-sided spectrum) is one real matrix: built here by applying NumPy's
FFT (what ONNX's reference computes) to each unit input, then multiplied by the signal
with the signal axis moved last. The matrix is (signal length * parts) by (output length
* parts), so long transforms are refused rather than folded into a huge constant.
"""

from __future__ import annotations

import math

import numpy as np

from fusionlang.errors import ShapeError
from fusionlang.frontend.onnx_context import NodeContext

#: the most elements the constant DFT matrix may have (64 MiB of float32)
MAX_DFT_MATRIX = 2**24


def dft_matrix(length: int, parts: int, n: int, inverse: bool, onesided: bool) -> np.ndarray:
    """The real matrix taking a signal of ``length`` samples, each ``parts`` (1: real, 2:
    real then imaginary) values, to ONNX's DFT output, also interleaved by part, as rows."""
    def transform(signal: np.ndarray) -> np.ndarray:
        if not inverse:
            out = np.fft.fft(signal, n=n)
            return out[: n // 2 + 1] if onesided else out
        return np.fft.irfft(signal, n=n) if onesided else np.fft.ifft(signal, n=n)

    rows = []
    for j in range(length):
        for part in range(parts):
            unit = np.zeros(length, np.complex128)
            unit[j] = 1j if part else 1
            out = transform(unit)
            rows.append(out.real[:, None] if inverse and onesided else np.stack([out.real, out.imag], axis=-1))
    return np.stack(rows).reshape(length * parts, -1)


def convert_dft(ctx: NodeContext) -> None:
    x = ctx.type(0)
    _check_parts(ctx, x)
    axis = _signal_axis(ctx, x.rank)
    inverse, onesided = bool(ctx.attr("inverse", 0)), bool(ctx.attr("onesided", 0))
    n = _dft_length(ctx, x.shape[axis], inverse and onesided)
    emit_dft(ctx, ctx.input(0), axis, n, inverse, onesided)


def convert_stft(ctx: NodeContext) -> None:
    # frames of frame_length samples every frame_step samples (gathered with a constant
    # index table), times the window, then the DFT of each frame
    x = ctx.type(0)
    _check_parts(ctx, x)
    if x.rank != 3:
        raise ctx.fail(f"signal {x} must be [batch, samples, 1 or 2]", ShapeError)
    step = int(ctx.scalar(1, "frame_step"))
    window = ctx.input(2) if ctx.has_input(2) else None
    if ctx.has_input(3):
        length = int(ctx.scalar(3, "frame_length"))
    elif window is not None:
        length = ctx.type(2).shape[0] if ctx.type(2).rank == 1 else -1
    else:
        raise ctx.fail("one of window and frame_length is required")
    if window is not None and ctx.type(2).shape != (length,):
        raise ctx.fail(f"window {ctx.type(2)} should have shape [{length}] (the frame length)", ShapeError)
    if step < 1 or not 1 <= length <= x.shape[1]:
        raise ctx.fail(f"frame_step={step} must be positive and frame_length={length} in [1, {x.shape[1]}]",
                       ShapeError)
    frames = 1 + (x.shape[1] - length) // step
    starts = np.arange(frames, dtype=np.int64)[:, None] * step + np.arange(length, dtype=np.int64)
    framed = ctx.emit1("gather", [ctx.input(0), ctx.constant(starts)], {"axis": 1})
    if window is not None:
        column = ctx.emit1("reshape", [window], {"shape": (length, 1)})
        framed = ctx.emit1("mul", [framed, column])
    emit_dft(ctx, framed, 2, length, False, bool(ctx.attr("onesided", 1)))


def _check_parts(ctx: NodeContext, x) -> None:
    if x.rank < 2 or x.shape[-1] not in (1, 2):
        raise ctx.fail(f"input {x} must be [..., signal, 1 or 2] (real, or real and imaginary parts)", ShapeError)


def emit_dft(ctx: NodeContext, value: str, axis: int, n: int, inverse: bool, onesided: bool) -> None:
    """Output 0: the DFT of ``value`` (parts last) along ``axis``."""
    x = ctx.graph.types[value]
    length, parts = x.shape[axis], x.shape[-1]
    out_parts = 1 if inverse and onesided else 2
    out_length = n // 2 + 1 if onesided and not inverse else n
    if length * parts * out_length * out_parts > MAX_DFT_MATRIX:
        raise ctx.unsupported(f"a DFT of {length} to {out_length} points (its matrix would exceed "
                              f"{MAX_DFT_MATRIX} elements)")
    matrix = ctx.constant(dft_matrix(length, parts, n, inverse, onesided).astype(x.dtype))
    # the signal axis next to the parts, both flattened into one row per batch element
    perm = tuple(k for k in range(x.rank - 1) if k != axis) + (axis, x.rank - 1)
    moved = ctx.emit1("transpose", [value], {"perm": perm}) if perm != tuple(range(x.rank)) else value
    batch = tuple(x.shape[k] for k in perm[:-2])
    rows = ctx.emit1("reshape", [moved], {"shape": (math.prod(batch), length * parts)})
    product = ctx.emit1("matmul", [rows, matrix])
    back = [perm.index(k) for k in range(x.rank)]
    shaped = batch + (out_length, out_parts)
    if back == list(range(x.rank)):
        ctx.emit_output("reshape", [product], {"shape": shaped})
        return
    ctx.emit_output("transpose", [ctx.emit1("reshape", [product], {"shape": shaped})], {"perm": tuple(back)})


def _signal_axis(ctx: NodeContext, rank: int) -> int:
    """DFT-17's axis attribute (default 1), or DFT-20's optional axis input (default -2);
    never the last axis, which holds the parts."""
    if ctx.opset < 20:
        axis = ctx.attr("axis", 1)
    else:
        axis = int(ctx.scalar(2, "axis")) if ctx.has_input(2) else -2
    if not -rank <= axis < rank or axis % rank == rank - 1:
        raise ctx.fail(f"axis={axis} must be a signal axis of rank {rank} (not the last, which holds the parts)",
                       ShapeError)
    return axis % rank


def _dft_length(ctx: NodeContext, length: int, irfft: bool) -> int:
    if not ctx.has_input(1):
        # the inverse of a one-sided spectrum of m points is 2 (m - 1) points long
        return 2 * (length - 1) if irfft else length
    n = int(ctx.scalar(1, "dft_length"))
    if n < 1:
        raise ctx.fail(f"dft_length={n} must be positive")
    return n
