"""Rule files and models are data: expressions are built in code, never parsed from text."""

import numpy as np
import pytest
import sympy as sp

from fusionlang.ops.access import as_expr, i_sym


def test_values_built_in_code_become_expressions():
    assert as_expr(2) == sp.Integer(2) and float(as_expr(np.float32(1.5))) == 1.5
    assert as_expr(i_sym(0) + 1) == i_sym(0) + 1


@pytest.mark.parametrize("text", ["x + 1", "__import__('os').system('true')"])
def test_text_is_never_parsed(text):
    with pytest.raises(TypeError, match="not text"):
        as_expr(text)
