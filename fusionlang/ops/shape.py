"""Ops that move data without arithmetic: reshape, transpose, and their kin."""

from __future__ import annotations

from math import prod

import numpy as np
import sympy as sp

from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, i_sym, v_sym
from fusionlang.ops.registry import Attr, OpCall, OpDef, register


def row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def relinearize(out_shape: tuple[int, ...], in_shape: tuple[int, ...]) -> tuple[sp.Expr, ...]:
    """Input index reading the same row-major element as output index i (a reshape)."""
    linear = sum((i_sym(k) * s for k, s in enumerate(row_major_strides(out_shape)) if out_shape[k] != 1),
                 sp.Integer(0))
    index = []
    for n, s in zip(in_shape, row_major_strides(in_shape)):
        if n == 1:
            index.append(sp.Integer(0))
            continue
        q = sp.floor(linear / s) if s != 1 else linear
        # the outermost non-unit axis never wraps
        index.append(q if n * s == prod(in_shape) else sp.Mod(q, n))
    return tuple(index)


def copy_stmt(call: OpCall, index: tuple[sp.Expr, ...]) -> list[Stmt]:
    out = call.out_types[0]
    return [Stmt(0, out.shape, (Read(0, index),), v_sym(0))]


# ----- reshape ---------------------------------------------------------------------


def resolve_reshape(call: OpCall, in_shape: tuple[int, ...], spec: tuple[int, ...], allowzero: int) -> tuple[int, ...]:
    shape = []
    for k, d in enumerate(spec):
        if d == 0 and not allowzero:
            if k >= len(in_shape):
                raise call.fail(f"shape {list(spec)}: 0 at position {k} copies a dimension the input lacks")
            shape.append(in_shape[k])
        else:
            shape.append(d)
    if shape.count(-1) > 1:
        raise call.fail(f"shape {list(spec)} has more than one -1")
    if any(d < -1 for d in shape):
        raise call.fail(f"shape {list(spec)} has a negative dimension")
    total = prod(in_shape)
    if -1 in shape:
        known = prod(d for d in shape if d != -1)
        if known == 0 or total % known:
            raise call.fail(f"cannot reshape {list(in_shape)} to {list(spec)}")
        shape[shape.index(-1)] = total // known
    if prod(shape) != total:
        raise call.fail(f"cannot reshape {list(in_shape)} ({total} elements) to {shape} ({prod(shape)} elements)")
    return tuple(shape)


def _reshape_infer(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    return [x.with_shape(resolve_reshape(call, x.shape, call.attrs["shape"], call.attrs["allowzero"]))]


register(
    OpDef(
        name="reshape",
        inputs=("x",),
        attrs={"shape": Attr("ints", doc="target shape; 0 copies the input dim, -1 is inferred"),
               "allowzero": Attr("int", 0)},
        infer=_reshape_infer,
        reference=lambda xs, a: [xs[0].reshape(
            resolve_reshape(OpCall("reshape", "?", a, []), xs[0].shape, a["shape"], a["allowzero"]))],
        access=lambda call: copy_stmt(call, relinearize(call.out_types[0].shape, call.input(0).shape)),
        view=True,
        doc="Row-major reshape: a view of contiguous data.",
    )
)

# ----- transpose -------------------------------------------------------------------


def _perm(call: OpCall, rank: int) -> tuple[int, ...]:
    perm = call.attrs["perm"] or tuple(reversed(range(rank)))
    if sorted(perm) != list(range(rank)):
        raise call.fail(f"perm {list(perm)} is not a permutation of {rank} axes")
    return tuple(perm)


def _transpose_infer(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    return [x.with_shape(tuple(x.shape[p] for p in _perm(call, x.rank)))]


def _transpose_access(call: OpCall) -> list[Stmt]:
    x = call.input(0)
    perm = _perm(call, x.rank)
    index = [None] * x.rank
    for k, p in enumerate(perm):
        index[p] = i_sym(k)
    return copy_stmt(call, tuple(index))


def _transpose_is_view(call: OpCall) -> bool:
    # moving only size-1 axes keeps the row-major layout
    x = call.input(0)
    kept = [p for p in _perm(call, x.rank) if x.shape[p] != 1]
    return kept == sorted(kept)


register(
    OpDef(
        name="transpose",
        inputs=("x",),
        attrs={"perm": Attr("ints", (), "output axis k is input axis perm[k]; default reverses")},
        infer=_transpose_infer,
        reference=lambda xs, a: [np.ascontiguousarray(np.transpose(xs[0], a["perm"] or None))],
        access=_transpose_access,
        view=_transpose_is_view,
        doc="Permute axes.",
    )
)
