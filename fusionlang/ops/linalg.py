"""Matrix products: gemm (2-D, transposes, alpha/beta, bias) and matmul (numpy semantics)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import sympy as sp
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import sp

from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, acc_sym, broadcast_index, i_sym, r_sym, v_sym
from fusionlang.ops.common import accumulator, require_float, same_dtype
from fusionlang.ops.registry import Attr, OpCall, OpDef, register

# ----- gemm ------------------------------------------------------------------------


def _gemm_dims(call: OpCall) -> tuple[int, int, int]:
    a, b = call.input(0), call.input(1)
    if a.rank != 2 or b.rank != 2:
        raise call.fail(f"a {a} and b {b} must be matrices")
    m, k = a.shape[::-1] if call.attrs["trans_a"] else a.shape
    kb, n = b.shape[::-1] if call.attrs["trans_b"] else b.shape
    if k != kb:
        raise call.fail(f"inner dimensions differ: op(a) is [{m}, {k}], op(b) is [{kb}, {n}]")
    return m, k, n


def _gemm_infer(call: OpCall) -> list[TensorType]:
    m, _, n = _gemm_dims(call)
    for name in ("trans_a", "trans_b"):
        if call.attrs[name] not in (0, 1):
            raise call.fail(f"{name}={call.attrs[name]} should be 0 or 1")
    types = [t for t in call.in_types if t is not None]
    require_float(call, types[0])
    dtype = same_dtype(call, types)
    if call.has_input(2):
        c = call.input(2)
        fits = c.rank <= 2 and all(d in (1, full) for d, full in zip(reversed(c.shape), (n, m)))
        if not fits:
            raise call.fail(f"c {c} does not broadcast to [{m}, {n}]")
    return [TensorType((m, n), dtype)]


def _gemm_reference(xs, attrs):
    a, b = xs[0], xs[1]
    dtype, wide = a.dtype, accumulator(a.dtype)
    a = a.T if attrs["trans_a"] else a
    b = b.T if attrs["trans_b"] else b
    out = a.astype(wide) @ b.astype(wide)
    if attrs["alpha"] != 1.0:
        out = out * attrs["alpha"]
    if len(xs) > 2 and xs[2] is not None and attrs["beta"] != 0.0:
        out = out + attrs["beta"] * xs[2].astype(wide)
    return [np.asarray(out, dtype=dtype, order="C")]


def _gemm_access(call: OpCall) -> list[Stmt]:
    _, k, _ = _gemm_dims(call)
    out = call.out_types[0]
    row, col, red = i_sym(0), i_sym(1), r_sym(0)
    a_read = Read(0, (red, row) if call.attrs["trans_a"] else (row, red))
    b_read = Read(1, (col, red) if call.attrs["trans_b"] else (red, col))
    reads = [a_read, b_read]
    finalize = acc_sym() * call.attrs["alpha"] if call.attrs["alpha"] != 1.0 else acc_sym()
    if call.has_input(2) and call.attrs["beta"] != 0.0:
        reads.append(Read(2, broadcast_index(call.input(2).shape, 2)))
        finalize = finalize + call.attrs["beta"] * v_sym(2)
    return [Stmt(0, out.shape, tuple(reads), v_sym(0) * v_sym(1), reduce="sum", reduce_extents=(k,),
                 finalize=None if finalize == acc_sym() else finalize)]


register(
    OpDef(
        name="gemm",
        inputs=("a", "b", "c"),
        min_inputs=2,
        attrs={"alpha": Attr("float", 1.0), "beta": Attr("float", 1.0),
               "trans_a": Attr("int", 0), "trans_b": Attr("int", 0)},
        infer=_gemm_infer,
        reference=_gemm_reference,
        access=_gemm_access,
        doc="alpha * op(a) @ op(b) + beta * c for matrices, op transposing when trans_*=1; "
            "c broadcasts to the [M, N] result.",
    )
)

# ----- matmul ----------------------------------------------------------------------


def _matmul_shapes(call: OpCall) -> tuple[tuple[int, ...], int]:
    """The output shape, and the contracted extent."""
    a, b = call.input(0), call.input(1)
    if a.rank < 1 or b.rank < 1:
        raise call.fail(f"operands must have rank >= 1, got {a} and {b}")
    ka = a.shape[-1]
    kb = b.shape[-2] if b.rank > 1 else b.shape[0]
    if ka != kb:
        raise call.fail(f"inner dimensions differ: a {a} has {ka} columns, b {b} has {kb} rows")
    try:
        batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    except ValueError:
        raise call.fail(f"batch dimensions {list(a.shape[:-2])} and {list(b.shape[:-2])} do not broadcast") from None
    rows = a.shape[-2:-1] if a.rank > 1 else ()
    cols = b.shape[-1:] if b.rank > 1 else ()
    return batch + rows + cols, ka


def _matmul_infer(call: OpCall) -> list[TensorType]:
    shape, _ = _matmul_shapes(call)
    a, b = call.input(0), call.input(1)
    dtype = same_dtype(call, [a, b])
    if dtype == "bool":
        raise call.fail("matmul needs numeric operands, got bool")
    return [TensorType(shape, dtype)]


def _batch_index(batch_shape: tuple[int, ...], out_batch_rank: int) -> tuple[sp.Expr, ...]:
    offset = out_batch_rank - len(batch_shape)
    return tuple(sp.Integer(0) if d == 1 else i_sym(offset + k) for k, d in enumerate(batch_shape))


def _matmul_access(call: OpCall) -> list[Stmt]:
    shape, k = _matmul_shapes(call)
    a, b = call.input(0), call.input(1)
    batch_rank = len(shape) - (a.rank > 1) - (b.rank > 1)
    red = r_sym(0)
    a_index = (red,) if a.rank == 1 else _batch_index(a.shape[:-2], batch_rank) + (i_sym(batch_rank), red)
    col = i_sym(batch_rank + (a.rank > 1))
    b_index = (red,) if b.rank == 1 else _batch_index(b.shape[:-2], batch_rank) + (red, col)
    reads = (Read(0, a_index), Read(1, b_index))
    return [Stmt(0, shape, reads, v_sym(0) * v_sym(1), reduce="sum", reduce_extents=(k,))]


def _matmul_reference(xs, attrs):
    a, b = xs
    wide = accumulator(a.dtype)
    return [np.asarray(np.matmul(a.astype(wide), b.astype(wide)), dtype=a.dtype, order="C")]


register(
    OpDef(
        name="matmul",
        inputs=("a", "b"),
        infer=_matmul_infer,
        reference=_matmul_reference,
        access=_matmul_access,
        doc="Matrix product with numpy semantics: 1-D operands gain and lose a unit axis, "
            "leading batch axes broadcast.",
    )
)
