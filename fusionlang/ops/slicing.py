"""Slice: a strided box of the input (ONNX Slice, starts/ends clamped, negative steps)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, i_sym, v_sym
from fusionlang.ops.registry import Attr, OpCall, OpDef, register


@dataclass(frozen=True)
class AxisSlice:
    """The elements start, start + step, ... (``size`` of them) of one axis."""

    start: int
    step: int
    size: int

    def as_slice(self) -> slice:
        stop = self.start + self.step * self.size
        # a negative stop would count from the end in Python
        return slice(self.start, stop if stop >= 0 else None, self.step)


def _clamp(value: int, low: int, high: int) -> int:
    return min(max(value, low), high)


def axis_slice(n: int, start: int, end: int, step: int) -> AxisSlice:
    """ONNX semantics: negative start/end count from the end, then clamp to the axis."""
    start = start + n if start < 0 else start
    end = end + n if end < 0 else end
    if step > 0:
        start, end = _clamp(start, 0, n), _clamp(end, 0, n)
        size = max(0, -(-(end - start) // step))
    else:
        start, end = _clamp(start, 0, n - 1), _clamp(end, -1, n - 1)
        size = max(0, -(-(start - end) // -step))
    return AxisSlice(start if size else 0, step, size)


def slices(call: OpCall) -> list[AxisSlice]:
    """One AxisSlice per input axis (untouched axes are whole)."""
    x = call.input(0)
    a = call.attrs
    starts, ends = a["starts"], a["ends"]
    axes = a["axes"] or tuple(range(len(starts)))
    steps = a["steps"] or (1,) * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise call.fail(f"starts, ends, axes and steps have different lengths "
                        f"({len(starts)}, {len(ends)}, {len(axes)}, {len(steps)})")
    if 0 in steps:
        raise call.fail(f"steps {list(steps)} contain 0")
    result = [AxisSlice(0, 1, n) for n in x.shape]
    seen = set()
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = call.axis(axis, x.rank, name="axes")
        if axis in seen:
            raise call.fail(f"axes {list(axes)} repeat axis {axis}")
        seen.add(axis)
        result[axis] = axis_slice(x.shape[axis], start, end, step)
    return result


def _infer(call: OpCall) -> list[TensorType]:
    return [call.input(0).with_shape(tuple(s.size for s in slices(call)))]


def _reference(xs, attrs):
    x = xs[0]
    boxes = slices(OpCall("slice", "?", attrs, [TensorType.of(x)]))
    return [np.asarray(x[tuple(s.as_slice() for s in boxes)], order="C")]


def _access(call: OpCall) -> list[Stmt]:
    index = tuple(s.start + s.step * i_sym(k) for k, s in enumerate(slices(call)))
    return [Stmt(0, call.out_types[0].shape, (Read(0, index),), v_sym(0))]


register(
    OpDef(
        name="slice",
        inputs=("x",),
        attrs={"starts": Attr("ints"), "ends": Attr("ints", doc="exclusive; INT64 max/min mean 'to the end'"),
               "axes": Attr("ints", (), "default 0..len(starts)-1"), "steps": Attr("ints", (), "default 1")},
        infer=_infer,
        reference=_reference,
        access=_access,
        doc="ONNX Slice: per listed axis, elements start, start+step, ... before end, with "
            "negative indices counting from the end and out-of-range bounds clamped.",
    )
)
