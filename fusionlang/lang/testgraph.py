"""The graph a `test` block states: inputs, constants, let-bound ops and outputs.

Let-bound names become value (and node) names, so expectations such as
``grouped(a, b)`` refer to what the test wrote. Constant initializers are data:
a number fills, a (nested) list gives the elements, ``random`` or ``random(lo, hi)``
draws from a generator seeded by the test's name, so every run sees the same graph.
"""

from __future__ import annotations

import zlib

import numpy as np

from fusionlang.errors import FuseError
from fusionlang.ir.graph import Graph
from fusionlang.ir.types import TensorType, canonical_dtype
from fusionlang.lang import ast as A
from fusionlang.lang.guards import Bindings
from fusionlang.lang.instantiate import InstantiateError, Instantiator
from fusionlang.ops.registry import OpRegistry


def seed_of(name: str) -> int:
    return zlib.crc32(name.encode())


def const_array(stmt: A.TConst, ttype: TensorType, rng: np.random.Generator) -> np.ndarray:
    init = stmt.init
    if init is None or (isinstance(init, A.Var) and init.name == "random"):
        lo, hi = -1.0, 1.0
    elif isinstance(init, A.Call) and init.func.text == "random":
        if len(init.args) != 2 or init.attrs is not None:
            raise InstantiateError(init.span, "random(lo, hi) takes two numbers")
        lo, hi = (_number(a) for a in init.args)
        if not lo <= hi:
            raise InstantiateError(init.span, f"random({lo}, {hi}): the low end is above the high end")
    else:
        value = _literal(init)
        try:
            array = np.asarray(value, dtype=ttype.dtype)
        except (ValueError, TypeError, OverflowError) as exc:
            raise InstantiateError(init.span, f"cannot make {ttype} from {value!r}: {exc}") from None
        if array.ndim == 0:
            return np.full(ttype.shape, array, dtype=ttype.dtype)
        if array.size != ttype.size:
            raise InstantiateError(init.span, f"{array.size} values given for {ttype} ({ttype.size} elements)")
        return array.reshape(ttype.shape)
    if np.dtype(ttype.dtype).kind in "iu":
        return rng.integers(int(lo), int(hi) + 1, size=ttype.shape).astype(ttype.dtype)
    if ttype.dtype == "bool":
        return rng.random(ttype.shape) < 0.5
    return rng.uniform(lo, hi, size=ttype.shape).astype(ttype.dtype)


def _number(e) -> float:
    if isinstance(e, A.Num):
        return e.value
    if isinstance(e, A.Neg) and isinstance(e.operand, A.Num):
        return -e.operand.value
    raise InstantiateError(getattr(e, "span", None), "random(lo, hi) takes two numbers")


def _literal(e):
    if isinstance(e, (A.Num,)):
        return e.value
    if isinstance(e, A.Neg):
        return -_literal(e.operand)
    if isinstance(e, A.ListE):
        return [_literal(i) for i in e.items]
    raise InstantiateError(getattr(e, "span", None), "a constant is a number, a list of numbers, random or "
                           "random(lo, hi)")


def ttype_of(tt: A.TType) -> TensorType:
    try:
        return TensorType(tt.shape, canonical_dtype(tt.dtype.text))
    except FuseError as exc:
        raise InstantiateError(tt.dtype.span, str(exc)) from None


def build_test_graph(test: A.TestDecl, registry: OpRegistry) -> Graph:
    """The graph of ``test``; raises InstantiateError at the failing statement."""
    graph = Graph(test.name.text, registry)
    rng = np.random.default_rng(seed_of(test.name.text))
    bindings = Bindings()
    inst = Instantiator(graph, registry, bindings, provenance=(f"test {test.name.text}",))
    for stmt in test.stmts:
        if isinstance(stmt, A.TInput):
            graph.add_input(stmt.name.text, ttype_of(stmt.ttype))
            bindings.tensors[stmt.name.text] = stmt.name.text
        elif isinstance(stmt, A.TConst):
            ttype = ttype_of(stmt.ttype)
            graph.add_constant(stmt.name.text, const_array(stmt, ttype, rng))
            bindings.tensors[stmt.name.text] = stmt.name.text
        elif isinstance(stmt, A.Let):
            if len(stmt.names) == 1:
                _let_named(inst, graph, stmt)
            else:
                inst.let(stmt)
        elif isinstance(stmt, A.TOutput):
            for name in stmt.names:
                value = bindings.tensors.get(name.text)
                if value is None:
                    raise InstantiateError(name.span, f"unknown value {name.text!r}")
                graph.outputs.append(value)
    return graph


def _let_named(inst: Instantiator, graph: Graph, stmt: A.Let) -> None:
    """``y = op(...)``: the node and its value are called ``y``."""
    name = stmt.names[0].text
    before = len(inst.created)
    value = inst.value(stmt.value, hint=name)
    if isinstance(value, str) and len(inst.created) > before and inst.created[-1].outputs == [value] \
            and name not in graph.types:
        node = inst.created[-1]
        ttype = graph.types.pop(value)
        node.outputs = [name]
        node.name = name
        graph.invalidate()  # the node was renamed in place
        graph.types[name] = ttype
        value = name
    elif not isinstance(value, str):
        value = inst.materialize(value, "float32")
    inst.bindings.tensors[name] = value
