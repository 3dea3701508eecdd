"""The is_float guard holds for float16 and bfloat16 values (numpy calls bfloat16's kind
"V", and its name does not start with "float"), so float-only rules fire on 16-bit models."""

from __future__ import annotations

import pytest

from fusionlang.engine.rewrite import apply_rules
from fusionlang.lang import parse_text
from fusionlang.ops import GraphBuilder

RULE = "rewrite drop_relu_of_float: relu(x) where is_float(x) => neg(x)\n"


@pytest.mark.parametrize("dtype,fires", [("float16", 1), ("bfloat16", 1), ("float32", 1), ("int32", 0)])
def test_is_float_guard_by_dtype(dtype, fires):
    b = GraphBuilder()
    b.output(b.relu(b.input("x", (4,), dtype)))
    assert apply_rules(b.build(), parse_text(RULE, "p.fuse"), fold=False).fired["drop_relu_of_float"] == fires
