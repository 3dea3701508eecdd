"""Ops that relabel a tensor's axes: reshape, flatten, squeeze, unsqueeze, transpose."""

from __future__ import annotations

from functools import lru_cache
from math import prod
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import sympy as sp
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import sp

from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, i_sym, v_sym
from fusionlang.ops.quasi_affine import Terms, floor_div, linear_form, mod
from fusionlang.ops.registry import Attr, OpCall, OpDef, register


def row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


@lru_cache(maxsize=4096)  # bounded: a long-lived process meets many shapes
def relinearize(out_shape: tuple[int, ...], in_shape: tuple[int, ...]) -> tuple[sp.Expr, ...]:
    """Input index reading the same row-major element as output index i (a reshape).
    Cached: an expression is immutable, and a model repeats its reshapes (shufflenet's
    channel shuffles) while the planner and the compiler each ask for them."""
    terms = tuple((s, i_sym(k)) for k, s in enumerate(row_major_strides(out_shape)) if out_shape[k] != 1)
    return unravel_terms(terms, {i_sym(k): n for k, n in enumerate(out_shape)}, in_shape)


def unravel(linear: sp.Symbol, shape: tuple[int, ...]) -> tuple[sp.Expr, ...]:
    """Row-major index into ``shape`` of the linear position ``linear`` (an index symbol
    known to be < prod(shape))."""
    return unravel_terms(((1, linear),), {linear: prod(shape)}, shape)


def unravel_terms(terms: Terms, extents: dict[sp.Symbol, int], shape: tuple[int, ...]) -> tuple[sp.Expr, ...]:
    """Row-major index into ``shape`` of the linear position sum(c * x) over ``terms``,
    each x an integer in [0, extents[x]) and the sum < prod(shape). The floors and mods
    are worked out on the integers (:mod:`.quasi_affine`): sympy reaches the same simple
    forms only through its assumption system, which cost shufflenet 0.4 s per compile."""
    if prod(shape) == 0:
        return (sp.Integer(0),) * len(shape)  # nothing is read from an empty tensor
    index = []
    for k, (n, s) in enumerate(zip(shape, row_major_strides(shape))):
        if n == 1:
            index.append(sp.Integer(0))
        elif all(d == 1 for d in shape[:k]):  # the outermost digit: below n already
            index.append(floor_div(terms, 0, s, extents))
        else:  # floor(L / s) mod n = floor((L mod s*n) / s)
            wrapped = mod(terms, 0, s * n, extents)
            form = linear_form(wrapped, extents)
            index.append(floor_div(form[0], form[1], s * form[2], extents) if form else
                         sp.Mod(floor_div(terms, 0, s, extents), n))
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
        reference=lambda xs, a: [np.asarray(np.transpose(xs[0], a["perm"] or None), order="C")],
        access=_transpose_access,
        view=_transpose_is_view,
        doc="Permute axes.",
    )
)


def _inferred_reshape(op: str, infer):
    """Reference of a view op: reshape the input to the shape inference gives."""

    def reference(xs, attrs):
        x = xs[0]
        return [x.reshape(infer(OpCall(op, "?", attrs, [TensorType.of(x)]))[0].shape)]

    return reference


# ----- flatten ---------------------------------------------------------------------


def _flatten_split(call: OpCall) -> tuple[tuple[int, ...], tuple[int, ...]]:
    x = call.input(0)
    axis = call.attrs["axis"]
    # ONNX: axis in [-rank, rank], a negative one counting from the back (-1 is rank - 1)
    if not -x.rank <= axis <= x.rank:
        raise call.fail(f"axis={axis} is out of range for rank {x.rank}")
    axis = axis + x.rank if axis < 0 else axis
    return x.shape[:axis], x.shape[axis:]


def _flatten_infer(call: OpCall) -> list[TensorType]:
    outer, inner = _flatten_split(call)
    return [call.input(0).with_shape((prod(outer), prod(inner)))]


def _flatten_access(call: OpCall) -> list[Stmt]:
    outer, inner = _flatten_split(call)
    return copy_stmt(call, unravel(i_sym(0), outer) + unravel(i_sym(1), inner))


register(
    OpDef(
        name="flatten",
        inputs=("x",),
        attrs={"axis": Attr("int", 1, "axes before it form the rows, the rest the columns")},
        infer=_flatten_infer,
        reference=_inferred_reshape("flatten", _flatten_infer),
        access=_flatten_access,
        view=True,
        doc="Reshape to a matrix [prod(shape[:axis]), prod(shape[axis:])]: a view.",
    )
)

# ----- squeeze / unsqueeze ---------------------------------------------------------


def _distinct_axes(call: OpCall, axes: tuple[int, ...], rank: int) -> tuple[int, ...]:
    normalized = tuple(sorted({call.axis(a, rank, name="axes") for a in axes}))
    if len(normalized) != len(axes):
        raise call.fail(f"axes {list(axes)} repeat an axis")
    return normalized


def _squeezed_axes(call: OpCall) -> tuple[int, ...]:
    x = call.input(0)
    if not call.attrs["axes"]:
        return tuple(k for k, n in enumerate(x.shape) if n == 1)
    axes = _distinct_axes(call, call.attrs["axes"], x.rank)
    wide = [a for a in axes if x.shape[a] != 1]
    if wide:
        raise call.fail(f"cannot squeeze axis {wide[0]} of {x}: its size is not 1")
    return axes


def _squeeze_infer(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    axes = _squeezed_axes(call)
    return [x.with_shape(tuple(n for k, n in enumerate(x.shape) if k not in axes))]


def _squeeze_access(call: OpCall) -> list[Stmt]:
    axes = _squeezed_axes(call)
    index, kept = [], 0
    for k in range(call.input(0).rank):
        if k in axes:
            index.append(sp.Integer(0))
        else:
            index.append(i_sym(kept))
            kept += 1
    return copy_stmt(call, tuple(index))


register(
    OpDef(
        name="squeeze",
        inputs=("x",),
        attrs={"axes": Attr("ints", (), "size-1 axes to drop; empty drops every size-1 axis")},
        infer=_squeeze_infer,
        reference=_inferred_reshape("squeeze", _squeeze_infer),
        access=_squeeze_access,
        view=True,
        doc="Drop size-1 axes: a view.",
    )
)


def _inserted_axes(call: OpCall) -> tuple[int, ...]:
    return _distinct_axes(call, call.attrs["axes"], call.input(0).rank + len(call.attrs["axes"]))


def _unsqueeze_shape(in_shape: tuple[int, ...], inserted: tuple[int, ...]) -> tuple[int, ...]:
    rest = iter(in_shape)
    return tuple(1 if k in inserted else next(rest) for k in range(len(in_shape) + len(inserted)))


def _unsqueeze_infer(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    return [x.with_shape(_unsqueeze_shape(x.shape, _inserted_axes(call)))]


def _unsqueeze_access(call: OpCall) -> list[Stmt]:
    inserted = _inserted_axes(call)
    out_rank = call.input(0).rank + len(inserted)
    return copy_stmt(call, tuple(i_sym(k) for k in range(out_rank) if k not in inserted))


register(
    OpDef(
        name="unsqueeze",
        inputs=("x",),
        attrs={"axes": Attr("ints", doc="positions of the new size-1 axes in the output")},
        infer=_unsqueeze_infer,
        reference=_inferred_reshape("unsqueeze", _unsqueeze_infer),
        access=_unsqueeze_access,
        view=True,
        doc="Insert size-1 axes: a view.",
    )
)
