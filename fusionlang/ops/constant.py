"""Ops whose results depend only on shapes: shape and constant_of_shape.

They have no loop form: constant folding evaluates them with the reference.
"""

from __future__ import annotations

import numpy as np

from fusionlang.errors import ShapeError
from fusionlang.ir.types import TensorType, canonical_dtype
from fusionlang.ops.registry import Attr, OpCall, OpDef, register

_INT64_MAX = int(np.iinfo(np.int64).max)
_ZERO = np.zeros(1, np.float32)
_ZERO.flags.writeable = False  # a default shared by every node

# ----- shape -----------------------------------------------------------------------


def _dims(rank: int, start: int, end: int) -> range:
    """ONNX Shape's start/end: negative counts from the end, then clamp to [0, rank]."""
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return range(start, max(start, end))


def _shape_infer(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    return [TensorType((len(_dims(x.rank, call.attrs["start"], call.attrs["end"])),), "int64")]


def _shape_reference(xs, attrs):
    x = xs[0]
    return [np.array([x.shape[k] for k in _dims(x.ndim, attrs["start"], attrs["end"])], dtype=np.int64)]


register(
    OpDef(
        name="shape",
        inputs=("x",),
        attrs={"start": Attr("int", 0), "end": Attr("int", _INT64_MAX, "exclusive; the default means the last axis")},
        infer=_shape_infer,
        reference=_shape_reference,
        doc="The dimensions start..end-1 of x as an int64 vector (ONNX Shape).",
    )
)

# ----- constant_of_shape -----------------------------------------------------------


def _fill_value(call: OpCall) -> np.ndarray:
    value = call.attrs["value"]
    if value.size != 1:
        raise call.fail(f"value must hold one element, got shape {list(value.shape)}")
    try:
        canonical_dtype(value.dtype)
    except ShapeError as exc:
        raise call.fail(f"value: {exc}") from None
    return value


def _constant_shape(call: OpCall) -> tuple[int, ...]:
    """The output shape: the value of the shape input, else the `shape` attribute."""
    if call.has_input(0):
        if call.attrs["shape"] is not None:
            raise call.fail("give the shape as an input or as an attribute, not both")
        shape_type = call.input(0)
        if shape_type.rank != 1 or shape_type.dtype != "int64":
            raise call.fail(f"shape must be a 1-D int64 tensor, got {shape_type}")
        dims = tuple(int(d) for d in call.value(0))
    elif call.attrs["shape"] is None:
        raise call.fail("the shape is missing: give a shape input or a `shape` attribute")
    else:
        dims = call.attrs["shape"]
    if any(d < 0 for d in dims):
        raise call.fail(f"shape {list(dims)} has a negative dimension")
    return dims


def _constant_infer(call: OpCall) -> list[TensorType]:
    return [TensorType(_constant_shape(call), str(_fill_value(call).dtype))]


def _constant_reference(xs, attrs):
    value = attrs["value"]
    shape = tuple(int(d) for d in xs[0]) if xs else attrs["shape"]
    return [np.full(shape, value.reshape(()), dtype=value.dtype)]


register(
    OpDef(
        name="constant_of_shape",
        inputs=("shape",),
        min_inputs=0,
        attrs={"value": Attr("tensor", _ZERO, "one element: the fill value and dtype"),
               "shape": Attr("ints", None, "the output shape when there is no shape input")},
        infer=_constant_infer,
        reference=_constant_reference,
        doc="A tensor filled with `value`, shaped by the (constant) int64 input or, without "
            "one, by the `shape` attribute.",
    )
)
