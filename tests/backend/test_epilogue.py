"""backend.epilogue's printing of 16-bit statements: each value rounded to its dtype once,
except one that already is a value of that dtype (a max, min, negation or absolute value
of such values and of constants it holds exactly), whose rounding changes nothing; the
rounded one checked end to end in tests/backend/test_gemm_bf16.py."""

from __future__ import annotations

import pytest
import sympy as sp

from fusionlang.backend.cexpr import C
from fusionlang.backend.epilogue import Define, Load, StatementPrinter, statements_text

x, y = sp.symbols("x y")
ROUND = {"bfloat16": "fl_bf_round(", "float16": "fl_h2f(fl_f2h("}


def _lines(*stmts):
    return statements_text(stmts, C)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_relu_of_a_rounded_sum_is_not_rounded_again(dtype):
    add = Define("e0", x + y, ((x, "v"), (y, Load("p2", sp.Integer(0), dtype))), dtype)
    relu = Define("e1", sp.Max(0, x), ((x, "e0"),), dtype)
    first, second = _lines(add, relu)
    assert ROUND[dtype] in first and ROUND[dtype] not in second


@pytest.mark.parametrize("value, exact", [
    (sp.Max(0, x), False),  # v: the float32 product
    (sp.Max(sp.Rational(1, 10), y), False),  # 0.1 is no bfloat16
    (sp.Min(sp.Rational(1, 2), y), True),
    (-y, True),
    (sp.Abs(y), True),
    (sp.Max(y, 2 * y), False),  # 2 y may overflow: a product is computed
    (y + y, False),
])
def test_only_values_of_the_dtype_skip_the_rounding(value, exact):
    stmt = Define("e1", value, ((x, "v"), (y, Load("p2", sp.Integer(0), "bfloat16"))), "bfloat16")
    (line,) = _lines(stmt)
    assert ("fl_bf_round(" not in line) == exact, line


def test_a_variable_defined_again_in_float32_is_not_taken_for_a_bfloat16_one():
    # one printer for two epilogues: e0 bfloat16 in the first, float32 in the second
    printer = StatementPrinter(C, str)
    printer(Define("e0", x, ((x, "v"),), "bfloat16"))
    printer(Define("e0", x, ((x, "v"),), "float32"))
    assert "fl_bf_round(" in printer(Define("e1", sp.Max(0, x), ((x, "e0"),), "bfloat16"))
    printer(Define("e0", x, ((x, "v"),), "float16"))  # another 16-bit dtype
    assert "fl_bf_round(" in printer(Define("e1", sp.Max(0, x), ((x, "e0"),), "bfloat16"))
