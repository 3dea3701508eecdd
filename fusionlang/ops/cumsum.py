"""CumSum and CumProd: running sums and products along one axis (inclusive or exclusive,
forward or reverse). Both are one reduction over the axis whose terms are read only where
they are in the element's prefix (or suffix)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

if TYPE_CHECKING:
    import sympy as sp
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import sp

from fusionlang.ir.types import HALF_FLOATS, TensorType
from fusionlang.ops.access import Read, Stmt, acc_sym, i_sym, out_indices, r_sym, v_sym
from fusionlang.ops.registry import Attr, OpCall, OpDef, register

#: op name -> (access-spec reduction, its identity, NumPy running function)
RUNNING: dict[str, tuple[str, float, Callable[..., np.ndarray]]] = {
    "cumsum": ("sum", 0.0, np.cumsum), "cumprod": ("prod", 1.0, np.cumprod)}


def _axis(call: OpCall) -> int:
    x = call.input(0)
    if x.dtype == "bool":
        raise call.fail(f"{call.op} needs a numeric input, got bool")
    if x.rank < 1:
        raise call.fail("input must have rank >= 1")
    return call.axis(call.attrs["axis"], x.rank)


def _infer(call: OpCall) -> list[TensorType]:
    _axis(call)
    return [call.input(0)]


def _exclusive(y: np.ndarray, axis: int, identity: float) -> np.ndarray:
    """y shifted one place along axis, the identity first: each running value then leaves
    its own element out (a product cannot divide it out again: it may be 0)."""
    first = np.full_like(np.take(y, [0], axis=axis), identity)
    return np.concatenate([first, np.take(y, np.arange(y.shape[axis] - 1), axis=axis)], axis=axis)


def _running_dtype(dtype: np.dtype) -> np.dtype:
    """What the reference runs in: the input's own type, float32 for the 16-bit floats, as
    onnxruntime and the generated code run (a running sum -32752, 0.0002, 32752 ends at 0
    there; in double at 0.0002, which a float16 result kept), integers wrapping."""
    return np.dtype(np.float32) if dtype.name in HALF_FLOATS else dtype


def _reference_of(name: str):
    _, identity, running = RUNNING[name]

    def reference(xs, attrs):
        x = xs[0]
        axis = attrs["axis"] % x.ndim
        y = np.flip(x, axis) if attrs["reverse"] else x
        if attrs["exclusive"] and y.shape[axis]:
            y = _exclusive(y, axis, identity)
        total = running(y, axis=axis, dtype=_running_dtype(x.dtype))
        total = np.flip(total, axis) if attrs["reverse"] else total
        return [np.asarray(total.astype(x.dtype), order="C")]

    return reference


def _access_of(name: str):
    reduction, identity, _ = RUNNING[name]

    def access(call: OpCall) -> list[Stmt]:
        axis = _axis(call)
        out = call.out_types[0]
        here, r = i_sym(axis), r_sym(0)
        # the reduction over the whole axis, each term read only where it is in this element's prefix
        if call.attrs["reverse"]:
            counted = r > here if call.attrs["exclusive"] else r >= here
        else:
            counted = r < here if call.attrs["exclusive"] else r <= here
        index = list(out_indices(out.rank))
        index[axis] = r
        read = Read(0, tuple(index), pad=identity, cond=counted)
        return [Stmt(0, out.shape, (read,), v_sym(0), reduce=reduction, reduce_extents=(out.shape[axis],),
                     finalize=_zero_start(name, call))]

    return access


def _zero_start(name: str, call: OpCall):
    """An exclusive float running sum starts at +0, as onnxruntime's and the reference's do:
    a zero total is +0 (the generated sum starts at -0, IEEE's identity, which an inclusive
    sum of -0.0s keeps); None for the plain total."""
    if name != "cumsum" or not call.attrs["exclusive"] or not call.input(0).is_float:
        return None
    return sp.Piecewise((0, sp.Eq(acc_sym(), 0)), (acc_sym(), True))


def _register(name: str, what: str, onnx: str) -> None:
    register(
        OpDef(
            name=name,
            inputs=("x",),
            attrs={"axis": Attr("int", 0), "exclusive": Attr("int", 0, f"1: leave each element out of its {what}"),
                   "reverse": Attr("int", 0, "1: run from the end")},
            infer=_infer,
            reference=_reference_of(name),
            access=_access_of(name),
            doc=f"Running {what}s of x along `axis` (ONNX {onnx}): exclusive leaves each element out, reverse "
                "runs from the end.",
        )
    )


_register("cumsum", "sum", "CumSum")
_register("cumprod", "product", "CumProd")
