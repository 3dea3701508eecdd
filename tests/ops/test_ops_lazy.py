"""fusionlang.ops.lazy: op modules reach sympy and the scalar functions only when they build
a formula, and what they get is sympy's and scalar's own objects, which the C printers and
the evaluator look up by identity."""

from __future__ import annotations

import sympy as sp

from fusionlang.ir.types import TensorType
from fusionlang.ops import REGISTRY, scalar
from fusionlang.ops.access import acc_sym
from fusionlang.ops.lazy import lazy_module


def _body(op: str, dtype: str = "float32"):
    types = [TensorType((2, 3), dtype)]
    _, call = REGISTRY.call(op, "n", {}, types)
    call.out_types = REGISTRY.get(op).run_infer(call)
    return REGISTRY.get(op).access(call)[0].body


def test_a_lazy_module_gives_the_modules_own_objects():
    assert lazy_module("sympy").Max is sp.Max
    assert lazy_module("fusionlang.ops.scalar").Sigmoid is scalar.Sigmoid


def test_formulas_hold_the_same_function_classes():
    assert _body("sigmoid").func is scalar.Sigmoid
    assert _body("round").func is scalar.RoundHalfEven
    assert _body("is_nan").func is scalar.IsNan
    assert _body("exp").func is sp.exp and _body("abs").func is sp.Abs


def test_the_accumulator_is_one_symbol_under_both_names():
    from fusionlang.ops import access
    assert access.ACC is acc_sym() and acc_sym() == sp.Symbol("acc")
