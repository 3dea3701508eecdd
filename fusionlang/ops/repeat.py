"""Copies that repeat the input: expand (broadcast to a shape) and tile."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import sympy as sp
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import sp

from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, broadcast_index, i_sym, v_sym
from fusionlang.ops.common import broadcast_shapes
from fusionlang.ops.registry import Attr, OpCall, OpDef, register

# ----- expand ----------------------------------------------------------------------


def _expand_shape(call: OpCall) -> tuple[int, ...]:
    target = call.attrs["shape"]
    if any(d < 0 for d in target):
        raise call.fail(f"shape {list(target)} has a negative dimension")
    return broadcast_shapes(call, [call.input(0).shape, target])


def _expand_access(call: OpCall) -> list[Stmt]:
    out = call.out_types[0]
    return [Stmt(0, out.shape, (Read(0, broadcast_index(call.input(0).shape, out.rank)),), v_sym(0))]


def _expand_reference(xs, attrs):
    x = xs[0]
    shape = np.broadcast_shapes(x.shape, attrs["shape"])
    return [np.asarray(np.broadcast_to(x, shape), order="C")]


register(
    OpDef(
        name="expand",
        inputs=("x",),
        attrs={"shape": Attr("ints", doc="broadcast together with x's shape (either may be 1)")},
        infer=lambda call: [call.input(0).with_shape(_expand_shape(call))],
        reference=_expand_reference,
        access=_expand_access,
        doc="Broadcast x to its shape broadcast with `shape` (ONNX Expand, bidirectional).",
    )
)

# ----- tile ------------------------------------------------------------------------


def _repeats(call: OpCall) -> tuple[int, ...]:
    x, repeats = call.input(0), call.attrs["repeats"]
    if len(repeats) != x.rank:
        raise call.fail(f"repeats {list(repeats)} should have one entry per axis of {x}")
    if any(r < 0 for r in repeats):
        raise call.fail(f"repeats {list(repeats)} has a negative entry")
    return repeats


def _tile_infer(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    return [x.with_shape(tuple(n * r for n, r in zip(x.shape, _repeats(call))))]


def _tile_access(call: OpCall) -> list[Stmt]:
    x = call.input(0)
    index = []
    for k, (n, r) in enumerate(zip(x.shape, _repeats(call))):
        index.append(sp.Integer(0) if n == 1 else i_sym(k) if r == 1 or n == 0 else sp.Mod(i_sym(k), n))
    return [Stmt(0, call.out_types[0].shape, (Read(0, tuple(index)),), v_sym(0))]


register(
    OpDef(
        name="tile",
        inputs=("x",),
        attrs={"repeats": Attr("ints", doc="copies along each axis")},
        infer=_tile_infer,
        reference=lambda xs, a: [np.tile(xs[0], a["repeats"]) if xs[0].ndim else xs[0].copy()],
        access=_tile_access,
        doc="Repeat x `repeats[k]` times along each axis k.",
    )
)
