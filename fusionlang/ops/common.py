"""Shared building blocks for op definitions: broadcasting, dtype rules, and the
elementwise-op factory (one formula gives the access spec; NumPy gives the reference)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol, Sequence

import numpy as np

if TYPE_CHECKING:
    import sympy as sp
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import sp

from fusionlang.ir.float8 import finite_range, is_narrow_float
from fusionlang.ir.narrow_int import int_range
from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, as_expr, broadcast_index, v_sym
from fusionlang.ops.registry import Attr, OpCall, OpDef, OpRegistry, register


def broadcast_shapes(call: OpCall, shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise call.fail("shapes " + ", ".join(str(list(s)) for s in shapes) + " do not broadcast") from None


def same_dtype(call: OpCall, types: Sequence[TensorType]) -> str:
    dtypes = {t.dtype for t in types}
    if len(dtypes) > 1:
        raise call.fail("inputs have different dtypes: " + ", ".join(sorted(dtypes)))
    return types[0].dtype


def require_float(call: OpCall, ttype: TensorType, what: str = "input") -> None:
    if not ttype.is_float:
        raise call.fail(f"{what} must be a floating-point tensor, got {ttype.dtype}")


def accumulator(dtype) -> np.dtype:
    """The dtype a reference sums in: double for floats, so the oracle's result does not
    depend on summation order (BLAS blocking, SIMD alignment) at the result's precision."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float64) if dtype.kind == "f" or is_narrow_float(dtype) else dtype


def lowest(dtype) -> np.generic:
    """The identity of max for ``dtype``: -inf, or the smallest integer."""
    dtype = np.dtype(dtype)
    if is_narrow_float(dtype):  # (only E5M2 has infinities)
        return dtype.type(-np.inf) if np.isinf(float(dtype.type(np.inf))) else dtype.type(finite_range(dtype)[0])
    if dtype.kind == "f":
        return dtype.type(-np.inf)
    return dtype.type(False) if dtype.kind == "b" else dtype.type(int_range(dtype)[0])


def highest(dtype) -> np.generic:
    """The identity of min for ``dtype``: +inf, or the largest integer."""
    dtype = np.dtype(dtype)
    if is_narrow_float(dtype):
        return dtype.type(np.inf) if np.isinf(float(dtype.type(np.inf))) else dtype.type(finite_range(dtype)[1])
    if dtype.kind == "f":
        return dtype.type(np.inf)
    return dtype.type(True) if dtype.kind == "b" else dtype.type(int_range(dtype)[1])


def present_types(call: OpCall) -> list[TensorType]:
    return [t for t in call.in_types if t is not None]


# Protocols rather than Callable aliases: mypy then accepts the lambdas that capture
# loop variables as defaults (``lambda v, a, f=f: ...``)
class FormulaFn(Protocol):
    """The output's expression from the inputs' symbols and the attributes."""

    def __call__(self, v: list[sp.Symbol], a: dict, /) -> sp.Expr: ...


class NumpyFn(Protocol):
    """The output from the inputs and the attributes, in NumPy."""

    def __call__(self, xs: list[np.ndarray], a: dict, /) -> np.ndarray: ...

DtypeRule = Callable[[OpCall, list[TensorType]], str]


def elementwise(
    name: str,
    formula: FormulaFn,
    numpy_fn: NumpyFn,
    *,
    inputs: tuple[str, ...] = ("x",),
    attrs: dict[str, Attr] | None = None,
    variadic: bool = False,
    min_inputs: int | None = None,
    out_dtype: str | None = None,
    mixed_dtypes: bool = False,
    float_only: bool = False,
    dtype_rule: DtypeRule | None = None,
    dtype_from: int = 0,
    unidirectional: bool = False,
    view: bool = False,
    commutative: bool = False,
    doc: str = "",
    registry: OpRegistry | None = None,
) -> OpDef:
    """Register an elementwise op with numpy broadcasting over all inputs.

    ``formula(values, attrs)`` gives the scalar result from the loaded values (sympy);
    ``numpy_fn(arrays, attrs)`` computes the same thing on whole arrays.
    ``out_dtype`` fixes the result dtype (e.g. 'bool'); otherwise it is the dtype of input
    ``dtype_from``. ``dtype_rule(call, types)`` replaces the default dtype checks (all inputs
    alike unless ``mixed_dtypes``; floats only with ``float_only``) and returns the result
    dtype. ``unidirectional``: inputs broadcast to the first input's shape, never beyond it.
    ``commutative``: the operands may be swapped (add, mul, max...).
    ``registry``: where to register (default: the built-in registry); rule files register
    their `def` ops into a child registry.
    """

    def infer(call: OpCall) -> list[TensorType]:
        types = present_types(call)
        shape = broadcast_shapes(call, [t.shape for t in types])
        if unidirectional and shape != types[0].shape:
            others = ", ".join(f"{name} {t}" for name, t in zip(inputs[1:], types[1:]))
            raise call.fail(f"{others} must broadcast to {inputs[0]} {types[0]} without growing it")
        if dtype_rule is not None:
            return [TensorType(shape, dtype_rule(call, types))]
        dtype = types[dtype_from].dtype if mixed_dtypes else same_dtype(call, types)
        if float_only:
            require_float(call, types[0])
        return [TensorType(shape, out_dtype or dtype)]

    def reference(arrays, attrs):
        result = numpy_fn(arrays, attrs)
        dtype = out_dtype or arrays[dtype_from].dtype
        return [np.asarray(result).astype(dtype, copy=False)]

    def access(call: OpCall) -> list[Stmt]:
        out = call.out_types[0]
        reads = tuple(Read(k, broadcast_index(call.input(k).shape, out.rank)) for k in range(len(call.in_types)))
        body = formula([v_sym(k) for k in range(len(reads))], call.attrs)
        return [Stmt(0, out.shape, reads, as_expr(body))]

    return (registry.register if registry is not None else register)(
        OpDef(
            name=name,
            inputs=inputs,
            infer=infer,
            reference=reference,
            access=access,
            attrs=attrs or {},
            variadic=variadic,
            min_inputs=min_inputs,
            view=view,
            commutative=commutative,
            doc=doc,
        )
    )


def fold_left(fn: Callable, values: Sequence):
    out = values[0]
    for v in values[1:]:
        out = fn(out, v)
    return out
