"""The ONNX sequence ops, resolved at import time.

fusionlang's graphs hold tensors only. A sequence whose length and positions the import
knows is an :class:`OnnxSequence` (a tuple of graph values) held by the importer, and
each sequence op becomes tensor ops on its elements, or a constant: SplitToSequence is a
split (and squeezes), SequenceAt an alias of one element, ConcatFromSequence a concat
(of unsqueezed elements with ``new_axis``), SequenceLength a constant. Positions and
split sizes must be known at import time: fed as graph inputs, they make the model
specialize on their values (``NodeContext.const`` names them, as for Reshape's shape).
A sequence that is a graph input or output is refused by the importer.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from fusionlang.errors import InputError, ModelError, ShapeError
from fusionlang.frontend.onnx_context import NodeContext, OnnxSequence, onnx_dtype

SEQUENCE_CONVERTERS: dict[str, Callable[[NodeContext], None]] = {}


def _converts(op_type: str):
    def register(fn):
        SEQUENCE_CONVERTERS[op_type] = fn
        return fn

    return register


def _made_by(ctx: NodeContext, elements, dtype: str) -> OnnxSequence:
    return OnnxSequence(tuple(elements), dtype, f"{ctx.label!r} ({ctx.op_type})")


def _position(ctx: NodeContext, k: int, length: int, *, one_past_end: bool) -> int:
    """Input k as a position in a sequence of ``length`` tensors, negative ones counted
    from the end (the spec's range: [-length, length - 1], or up to ``length`` where
    one past the end is allowed); an error naming the range otherwise."""
    values = ctx.ints(k, "position")
    if len(values) != 1:
        raise ctx.fail(f"input {k} (position) must hold one integer, got {len(values)}")
    position, last = values[0], length if one_past_end else length - 1
    if not -length <= position <= last:
        # a position the run fed is the caller's mistake; one stored in the model, the model's
        kind = InputError if ctx.fed_by_run(k) else ModelError
        accepted = f"{-length} to {last}" if last >= -length else "none: the sequence is empty"
        raise ctx.fail(f"position {position} is out of range for a sequence of {length} tensors "
                       f"(accepted: {accepted})", kind)
    return position + length if position < 0 else position


def _element(ctx: NodeContext, k: int, dtype: str | None) -> str:
    """Input k as a sequence element of element type ``dtype`` (any, when None)."""
    actual = ctx.type(k).dtype
    if dtype is not None and actual != dtype:
        raise ctx.fail(f"input {k} ({ctx.proto.input[k]!r}) is {actual}, but the sequence holds {dtype}")
    return ctx.input(k)


@_converts("SequenceEmpty")
def _sequence_empty(ctx: NodeContext) -> None:
    dtype = onnx_dtype(ctx.attr("dtype", 1), f"node {ctx.label!r} (SequenceEmpty) dtype")  # 1: FLOAT
    ctx.set_sequence(0, _made_by(ctx, (), dtype))


@_converts("SequenceConstruct")
def _sequence_construct(ctx: NodeContext) -> None:
    if not ctx.num_inputs:
        raise ctx.fail("needs at least one input tensor")
    dtype = ctx.type(0).dtype
    ctx.set_sequence(0, _made_by(ctx, [_element(ctx, k, dtype) for k in range(ctx.num_inputs)], dtype))


@_converts("SequenceInsert")
def _sequence_insert(ctx: NodeContext) -> None:
    sequence = ctx.sequence(0, "input_sequence")
    tensor = _element(ctx, 1, sequence.dtype)
    elements = list(sequence.elements)
    at = _position(ctx, 2, len(elements), one_past_end=True) if ctx.has_input(2) else len(elements)
    elements.insert(at, tensor)
    ctx.set_sequence(0, _made_by(ctx, elements, sequence.dtype))


@_converts("SequenceErase")
def _sequence_erase(ctx: NodeContext) -> None:
    sequence = ctx.sequence(0, "input_sequence")
    elements = list(sequence.elements)
    if ctx.has_input(1):
        del elements[_position(ctx, 1, len(elements), one_past_end=False)]
    elif elements:
        elements.pop()  # no position: the last tensor
    else:
        raise ctx.fail("cannot erase from an empty sequence", ModelError)
    ctx.set_sequence(0, _made_by(ctx, elements, sequence.dtype))


@_converts("SequenceAt")
def _sequence_at(ctx: NodeContext) -> None:
    sequence = ctx.sequence(0, "input_sequence")
    ctx.alias(0, sequence.elements[_position(ctx, 1, len(sequence.elements), one_past_end=False)])


@_converts("SequenceLength")
def _sequence_length(ctx: NodeContext) -> None:
    ctx.set_constant(0, np.array(len(ctx.sequence(0, "input_sequence").elements), np.int64))


@_converts("ConcatFromSequence")
def _concat_from_sequence(ctx: NodeContext) -> None:
    sequence = ctx.sequence(0, "input_sequence")
    if not sequence.elements:
        raise ctx.fail("cannot concatenate an empty sequence")
    if "axis" not in ctx.attrs:
        raise ctx.fail("attribute axis is required")
    new_axis = bool(ctx.attr("new_axis", 0))
    rank = len(ctx.graph.types[sequence.elements[0]].shape) + new_axis
    axis = ctx.attr("axis")
    if not -rank <= axis < rank:
        raise ctx.fail(f"axis={axis} is out of range for rank {rank}"
                       f"{' (element rank + 1, for new_axis=1)' if new_axis else ''}", ShapeError)
    axis %= rank
    parts = list(sequence.elements)
    if new_axis:
        parts = [ctx.emit1("unsqueeze", [part], {"axes": (axis,)}) for part in parts]
    ctx.emit_output("concat", parts, {"axis": axis})


@_converts("SplitToSequence")
def _split_to_sequence(ctx: NodeContext) -> None:
    shape = ctx.type(0).shape
    axis = ctx.attr("axis", 0)
    if not -len(shape) <= axis < len(shape):
        raise ctx.fail(f"axis={axis} is out of range for rank {len(shape)}", ShapeError)
    axis %= len(shape)
    if ctx.has_input(1):
        sizes, keepdims = _split_sizes(ctx, shape[axis]), True  # keepdims is ignored when split is given
    else:
        sizes, keepdims = [1] * shape[axis], bool(ctx.attr("keepdims", 1))
    parts = ctx.emit("split", [ctx.input(0)], {"axis": axis, "split": tuple(sizes)}, [""] * len(sizes)) \
        if sizes else []
    if not keepdims:
        parts = [ctx.emit1("squeeze", [part], {"axes": (axis,)}) for part in parts]
    ctx.set_sequence(0, _made_by(ctx, parts, ctx.type(0).dtype))


def _split_sizes(ctx: NodeContext, dim: int) -> list[int]:
    """The chunk lengths input 1 asks for: a scalar is one chunk length (the last chunk
    takes what is left), a 1-D tensor lists them (summing to ``dim``)."""
    split = ctx.const(1, "split")
    if split.dtype.kind not in "iu":
        raise ctx.fail(f"input 1 (split) must hold integers, got {split.dtype}")
    kind = InputError if ctx.fed_by_run(1) else ModelError
    if split.ndim == 0:
        chunk = int(split)
        if chunk <= 0:
            raise ctx.fail(f"split={chunk}: a chunk length must be positive", kind)
        return [chunk] * (dim // chunk) + ([dim % chunk] if dim % chunk else [])
    if split.ndim != 1:
        raise ctx.fail(f"input 1 (split) must be a scalar or 1-D, got shape {list(split.shape)}", kind)
    sizes = [int(v) for v in split]
    if any(size < 0 for size in sizes) or sum(sizes) != dim:
        raise ctx.fail(f"split {sizes} does not divide dim {dim} of axis {ctx.attr('axis', 0)} "
                       "(lengths must be non-negative and sum to it)", kind)
    return sizes
