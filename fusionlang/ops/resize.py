"""Resize: nearest, linear or cubic interpolation (optionally antialiased) of every axis to a
fixed output shape.

Interpolation is separable, so each resized axis gets a table, computed once from the
attributes: for every output position, the input cells it reads (taps) and their weights,
and (tf_crop_and_resize) whether the position falls outside the input and takes
``extrapolation_value``. The reference applies the tables one axis at a time; the access
spec reads them as constant (aux) arrays and sums the tensor product of the taps in one
statement, so a resize fuses with its neighbours and compiles like any other op.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import sympy as sp
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import sp

from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, i_sym, v_sym
from fusionlang.ops.common import require_float
from fusionlang.ops.registry import Attr, OpCall, OpDef, register

MODES = ("nearest", "linear", "cubic")
COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


@dataclass(frozen=True)
class AxisTable:
    """How one resized axis reads its input: ``taps[j]`` cells weighted by ``weights[j]``
    make output position j; ``outside[j]`` (or None when never) marks extrapolated ones."""

    taps: np.ndarray  # (out, T) int64, inside [0, n)
    weights: np.ndarray  # (out, T) float64
    outside: np.ndarray | None  # (out,) int64 0/1


def _check(call: OpCall) -> None:
    x, attrs = call.input(0), call.attrs
    for name, allowed in (("mode", MODES), ("coordinate_transformation_mode", COORDINATE_MODES),
                          ("nearest_mode", NEAREST_MODES)):
        if attrs[name] not in allowed:
            raise call.fail(f"{name}={attrs[name]!r} should be one of {', '.join(allowed)}")
    if len(attrs["sizes"]) != x.rank or len(attrs["scales"]) != x.rank:
        raise call.fail(f"sizes {list(attrs['sizes'])} and scales {list(attrs['scales'])} should have one entry "
                        f"per axis of {x}")
    if any(n < 0 for n in attrs["sizes"]) or any(not s > 0 for s in attrs["scales"]):
        raise call.fail(f"sizes {list(attrs['sizes'])} must be >= 0 and scales {list(attrs['scales'])} > 0")
    if any(n == 0 < m for n, m in zip(x.shape, attrs["sizes"])):
        raise call.fail(f"cannot resize the empty {x} to {list(attrs['sizes'])}: there is nothing to interpolate")
    if attrs["coordinate_transformation_mode"] == "tf_crop_and_resize" and len(attrs["roi"]) != 2 * x.rank:
        raise call.fail(f"tf_crop_and_resize needs roi with {2 * x.rank} entries (starts, then ends), "
                        f"got {list(attrs['roi'])}")
    if attrs["mode"] != "nearest":
        require_float(call, x)
    elif attrs["antialias"]:
        raise call.fail("antialias applies to linear and cubic modes, not nearest")


def _infer(call: OpCall) -> list[TensorType]:
    _check(call)
    return [call.input(0).with_shape(tuple(call.attrs["sizes"]))]


def _source_coordinates(attrs: dict, axis: int, n: int, m: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Input coordinate of each output position of one axis, and which are extrapolated."""
    mode, scale = attrs["coordinate_transformation_mode"], float(attrs["scales"][axis])
    y = np.arange(m, dtype=np.float64)
    width = scale * n  # the output length before rounding to an integer
    if mode == "align_corners":
        return (np.zeros(m) if width == 1 else y * (n - 1) / (width - 1)), None
    if mode == "asymmetric":
        return y / scale, None
    if mode == "pytorch_half_pixel":
        return (np.full(m, -0.5) if width == 1 else (y + 0.5) / scale - 0.5), None
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5, None
    if mode == "half_pixel_symmetric":
        offset = n / 2 * (1 - m / width)
        return offset + (y + 0.5) / scale - 0.5, None
    rank = len(attrs["sizes"])
    start, end = float(attrs["roi"][axis]), float(attrs["roi"][rank + axis])
    if width == 1:
        x = np.full(m, (end - start) * (n - 1) / 2)
    else:
        x = y * (end - start) * (n - 1) / (width - 1)
    x = x + start * (n - 1)
    return x, ((x < 0) | (x > n - 1)).astype(np.int64)


def _nearest_weights(ratio: np.ndarray, rule: str) -> np.ndarray:
    """Weights of the two cells around each coordinate (ratio in (0, 1]): one of them 1."""
    if rule == "round_prefer_floor":
        right = ratio > 0.5
    elif rule == "round_prefer_ceil":
        right = ratio >= 0.5
    else:
        right = np.full(ratio.shape, rule == "ceil")
    right = right | (ratio == 1)  # an integer coordinate is its own cell
    return np.stack([~right, right], axis=1).astype(np.float64)


def _cubic_weights(ratio: np.ndarray, a: float) -> np.ndarray:
    r = ratio[:, None] + np.array([1.0, 0.0, -1.0, -2.0])  # distance of the 4 cells
    d = np.abs(r)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, far)


def _antialias_weights(ratio: np.ndarray, scale: float, mode: str, a: float) -> np.ndarray:
    """Downsampling by ``scale`` < 1 widens the kernel by 1 / scale (a low-pass filter);
    the weights are renormalized to sum to 1."""
    scale = min(scale, 1.0)
    reach = 1 if mode == "linear" else 2
    first = int(np.floor(-reach / scale) + 1)
    r = (np.arange(first, 2 - first)[None, :] - ratio[:, None]) * scale  # scaled distance of each cell
    if mode == "linear":
        weights = np.clip(1 - np.abs(r), 0, 1)
    else:
        d = np.abs(r)
        near = ((a + 2) * d - (a + 3)) * d * d + 1
        far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
        weights = np.where(d <= 1, near, np.where(d < 2, far, 0.0))
    return weights / weights.sum(axis=1, keepdims=True)


def axis_table(attrs: dict, axis: int, n: int) -> AxisTable:
    """The taps and weights of one axis of length n (as ONNX's reference defines them: the
    cells nearest the coordinate, edge cells repeated past the ends)."""
    m = attrs["sizes"][axis]
    x, outside = _source_coordinates(attrs, axis, n, m)
    base = np.floor(x)
    ratio = np.where(x == base, 1.0, x - base)  # in (0, 1]: the left cell is preferred
    mode = attrs["mode"]
    if mode == "nearest":
        weights = _nearest_weights(ratio, attrs["nearest_mode"])
    elif attrs["antialias"]:
        weights = _antialias_weights(ratio, float(attrs["scales"][axis]), mode, float(attrs["cubic_coeff_a"]))
    elif mode == "linear":
        weights = np.stack([1 - ratio, ratio], axis=1)
    else:
        weights = _cubic_weights(ratio, float(attrs["cubic_coeff_a"]))
    taps = weights.shape[1]
    # the taps straddle the coordinate, half each side; with ratio in (0, 1] an integer
    # coordinate counts as lying just right of the cell before it (the left cell wins ties)
    left = base.astype(np.int64) - (ratio == 1) - (taps // 2 - 1)
    cells = left[:, None] + np.arange(taps)[None, :]
    if attrs["exclude_outside"]:
        weights = np.where((cells < 0) | (cells >= n), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    cells = np.clip(cells, 0, max(n - 1, 0))
    if mode == "nearest":  # keep only the chosen cell
        cells = np.where(weights[:, 1] > 0, cells[:, 1], cells[:, 0])[:, None]
        weights = np.ones((m, 1))
    return AxisTable(cells, weights, outside if outside is not None and outside.any() else None)


def resized_axes(attrs: dict, shape: tuple[int, ...]) -> list[int]:
    """Axes whose table is not the identity (same length, scale 1, whole roi)."""
    rank = len(shape)
    roi = attrs["roi"] if attrs["coordinate_transformation_mode"] == "tf_crop_and_resize" else ()

    def identity(axis: int) -> bool:
        whole = not roi or (math.isclose(roi[axis], 0.0) and math.isclose(roi[rank + axis], 1.0))
        return attrs["sizes"][axis] == shape[axis] and math.isclose(attrs["scales"][axis], 1.0) and whole

    return [axis for axis in range(rank) if not identity(axis)]


def _reference(xs, attrs):
    x = xs[0]
    _check(OpCall("resize", "?", attrs, [TensorType.of(x)]))
    # nearest copies cells: no detour through float64, which would round large int64 values
    result = x if attrs["mode"] == "nearest" else x.astype(np.float64)
    extrapolated = np.zeros(tuple(attrs["sizes"]), bool)
    for axis in resized_axes(attrs, x.shape):
        table = axis_table(attrs, axis, x.shape[axis])
        if result.shape[axis] == 0 or table.taps.shape[0] == 0:
            shape = list(result.shape)
            shape[axis] = table.taps.shape[0]
            result = np.zeros(shape, result.dtype)
            continue
        if table.outside is not None:
            extrapolated |= table.outside.astype(bool).reshape((1,) * axis + (-1,) + (1,) * (x.ndim - axis - 1))
        picked = np.take(result, table.taps, axis=axis)  # axis -> (out, T)
        if attrs["mode"] == "nearest":  # one tap of weight 1
            result = picked.squeeze(axis + 1)
            continue
        w = table.weights.reshape((1,) * axis + table.weights.shape + (1,) * (x.ndim - axis - 1))
        result = (picked * w).sum(axis=axis + 1)
    if extrapolated.any():
        result = np.where(extrapolated, attrs["extrapolation_value"], result)
    return [np.asarray(result.astype(x.dtype), order="C")]  # ascontiguousarray makes a scalar 1-d


def _access(call: OpCall) -> list[Stmt]:
    _check(call)
    x, out = call.input(0), call.out_types[0]
    axes = resized_axes(call.attrs, x.shape)
    tables = {axis: axis_table(call.attrs, axis, x.shape[axis]) for axis in axes}
    aux, reads, outside, loaded = {}, [], [], {}

    def read(source, index) -> sp.Symbol:
        """The value of one load; a table entry every tap combination uses is loaded once."""
        key = (source, tuple(index))
        if key not in loaded:
            reads.append(Read(source, tuple(index)))
            loaded[key] = v_sym(len(reads) - 1)
        return loaded[key]

    for axis, table in tables.items():
        aux[f"taps{axis}"], aux[f"weights{axis}"] = table.taps, table.weights
        if table.outside is not None:
            aux[f"outside{axis}"] = table.outside
            outside.append(read(f"outside{axis}", (i_sym(axis),)))
    total = sp.Integer(0)
    for combo in itertools.product(*(range(tables[a].taps.shape[1]) for a in axes)):
        index, weight = [i_sym(k) for k in range(x.rank)], sp.Integer(1)
        for axis, tap in zip(axes, combo):
            index[axis] = read(f"taps{axis}", (i_sym(axis), sp.Integer(tap)))
            if call.attrs["mode"] != "nearest":
                weight = weight * read(f"weights{axis}", (i_sym(axis), sp.Integer(tap)))
        total = total + weight * read(0, index)
    if outside:
        any_outside = sp.Or(*(sp.Ne(v, 0) for v in outside))
        total = sp.Piecewise((sp.Float(call.attrs["extrapolation_value"]), any_outside), (total, True))
    return [Stmt(0, out.shape, tuple(reads), total, aux=aux)]


register(
    OpDef(
        name="resize",
        inputs=("x",),
        attrs={"sizes": Attr("ints", doc="output shape (every axis)"),
               "scales": Attr("floats", doc="scale of every axis (output / input before rounding)"),
               "mode": Attr("str", "nearest", "nearest, linear or cubic"),
               "coordinate_transformation_mode": Attr("str", "half_pixel", "how an output position maps "
                                                      "to an input coordinate (ONNX's modes)"),
               "nearest_mode": Attr("str", "round_prefer_floor", "rounding of nearest mode"),
               "cubic_coeff_a": Attr("float", -0.75, "the cubic kernel's a"),
               "exclude_outside": Attr("int", 0, "1: weights of cells past the ends are 0, the rest rescaled"),
               "extrapolation_value": Attr("float", 0.0, "value outside the roi (tf_crop_and_resize)", nan_ok=True),
               "roi": Attr("floats", (), "starts then ends of every axis, as fractions (tf_crop_and_resize)"),
               "antialias": Attr("int", 0, "1: linear and cubic downsampling widen the kernel by 1 / scale")},
        infer=_infer,
        reference=_reference,
        access=_access,
        doc="ONNX Resize to a fixed output shape: per-axis tables of taps and weights, "
            "read as constants by the compiled code.",
    )
)
