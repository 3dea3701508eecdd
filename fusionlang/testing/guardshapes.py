"""Shapes drawn *for* a guard: the shape relations a rewrite's guard demands, read from
its conjuncts, and applied to the operands the instance builder creates.

Rejection sampling finds an instance of ``rank(c) == 2 and dim(c, 1) == 1 and
dim(c, 0) == dim(w, 1)`` only by luck; a rule with several such conjuncts was skipped
as "no instance satisfies". Here each top-level conjunct that pins a shape fact becomes
a demand on a pattern variable, and when the builder makes that variable's leaf it
builds a shape that meets the demands, given the shapes of the variables built before
it. Conjuncts that are not shape facts (or relate values not built yet) are left to the
guard itself, which the real matcher still evaluates on every instance.

Understood conjuncts (either side of ``==`` may be the constant):

* ``rank(v) == k``; ``dim(v, i) == k``; ``dim(v, i) == dim(u, j)``;
* ``same_shape(a, b, ...)``; ``is_scalar(v)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from fusionlang.ir.types import TensorType
from fusionlang.lang import ast as A

#: a dimension term: (variable, axis)
DimTerm = tuple[str, int]

#: demands past these are left to the guard: instances stay small enough to run (and
#: shrink) in microseconds
MAX_RANK = 6
MAX_SIDE = 16


@dataclass
class ShapeDemands:
    """What the guard says about the shapes of pattern variables."""

    ranks: dict[str, int] = field(default_factory=dict)
    #: dim(v, i) == constant
    dims: dict[DimTerm, int] = field(default_factory=dict)
    #: dim(v, i) == dim(u, j)
    links: list[tuple[DimTerm, DimTerm]] = field(default_factory=list)
    #: same_shape(a, b, ...)
    same: list[tuple[str, ...]] = field(default_factory=list)
    scalars: set[str] = field(default_factory=set)
    #: every dim(v, i) the guard names, pinned or not (coverage tells size 1 from larger)
    mentioned: list[DimTerm] = field(default_factory=list)

    def about(self, var: str) -> bool:
        """Does the guard demand anything of ``var``'s shape?"""
        return (var in self.ranks or var in self.scalars or any(v == var for v, _ in self.dims)
                or any(var in (a[0], b[0]) for a, b in self.links) or any(var in group for group in self.same))


def conjuncts(guard) -> list:
    if guard is None:
        return []
    if isinstance(guard, A.BoolOp) and guard.op == "and":
        return [part for item in guard.items for part in conjuncts(item)]
    return [guard]


def _int_literal(e) -> int | None:
    if isinstance(e, A.Num) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    if isinstance(e, A.Neg) and isinstance(e.operand, A.Num) and isinstance(e.operand.value, int):
        return -e.operand.value
    return None


def _call_of(e, name: str) -> A.Call | None:
    return e if isinstance(e, A.Call) and e.func.text == name else None


def _var_arg(call: A.Call, k: int = 0) -> str | None:
    arg = call.args[k] if len(call.args) > k else None
    return arg.name if isinstance(arg, A.Var) else None


def _dim_term(e) -> DimTerm | None:
    call = _call_of(e, "dim")
    if call is None or len(call.args) != 2:
        return None
    var, axis = _var_arg(call), _int_literal(call.args[1])
    return (var, axis) if var is not None and axis is not None else None


def _read_equation(left, right, demands: ShapeDemands) -> None:
    for a, b in ((left, right), (right, left)):
        number = _int_literal(b)
        rank = _call_of(a, "rank")
        if rank is not None and number is not None and (name := _var_arg(rank)) is not None:
            demands.ranks[name] = number
            return
        term = _dim_term(a)
        if term is not None and number is not None:
            demands.dims[term] = number
            return
    first, second = _dim_term(left), _dim_term(right)
    if first is not None and second is not None:
        demands.links.append((first, second))


def shape_demands(guard) -> ShapeDemands:
    """The shape demands of ``guard``'s top-level conjuncts."""
    demands = ShapeDemands()
    for e in A.walk(guard) if guard is not None else ():
        term = _dim_term(e)
        if term is not None and term not in demands.mentioned:
            demands.mentioned.append(term)
    for part in conjuncts(guard):
        if isinstance(part, A.Compare) and part.op == "==":
            _read_equation(part.left, part.right, demands)
        elif _call_of(part, "same_shape") is not None:
            names = tuple(a.name for a in part.args if isinstance(a, A.Var))
            if len(names) >= 2:
                demands.same.append(names)
        elif _call_of(part, "is_scalar") is not None and (name := _var_arg(part)) is not None:
            demands.scalars.add(name)
    return demands


def _axis(shape: list[int], axis: int) -> int | None:
    k = axis + len(shape) if axis < 0 else axis
    return k if 0 <= k < len(shape) else None


def shape_for(draw, var: str, proposed: TensorType, demands: ShapeDemands,
              known: dict[str, TensorType]) -> TensorType:
    """A type for the fresh leaf ``var`` that meets the guard's demands, given the
    ``known`` types of variables built before it (``proposed`` where nothing is demanded)."""
    shape = list(proposed.shape)
    for group in demands.same:
        if var in group:
            other = next((known[v] for v in group if v != var and v in known), None)
            if other is not None:
                shape = list(other.shape)
    rank = demands.ranks.get(var)
    if rank is not None and 0 <= rank <= MAX_RANK and len(shape) != rank:
        # keep the trailing axes (they are the ones that broadcast) and add leading ones
        shape = shape[len(shape) - rank:] if len(shape) > rank else \
            [draw(st.integers(1, 4)) for _ in range(rank - len(shape))] + shape
    if var in demands.scalars:
        shape = [1] * len(shape)
    for (v, axis), size in demands.dims.items():
        k = _axis(shape, axis) if v == var else None
        if k is not None and 0 <= size <= MAX_SIDE:
            shape[k] = size
    for first, second in demands.links:
        for (v, axis), (u, other_axis) in ((first, second), (second, first)):
            k = _axis(shape, axis) if v == var else None
            source = shape if u == var else (list(known[u].shape) if u in known else None)
            j = _axis(source, other_axis) if source is not None else None
            if k is not None and j is not None and source is not None:
                shape[k] = source[j]
    return TensorType(tuple(shape), proposed.dtype)


__all__ = ["DimTerm", "MAX_RANK", "MAX_SIDE", "ShapeDemands", "conjuncts", "shape_demands", "shape_for"]
