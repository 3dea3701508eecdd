"""The integer widths by their short names in `.fuse` test blocks (i16, u16, u32, u64),
and what the IR prints for them."""

from __future__ import annotations

import numpy as np
import pytest

from fusionlang.errors import FuseError, ShapeError
from fusionlang.ir.types import TensorType, canonical_dtype
from fusionlang.lang import parse_text
from fusionlang.testing.testblocks import run_test_blocks

WIDTHS = {"i16": "int16", "u16": "uint16", "u32": "uint32", "u64": "uint64"}

RULES = """\
rewrite double_neg: neg(neg(x)) => x
test wraps {
    input x: DTYPE[5]
    const c: DTYPE[5] = [0, 1, 2, 3, 7]
    y = neg(neg(x)) + c
    output y
    expect fired(double_neg) == 1
    expect equivalent
}
"""


@pytest.mark.parametrize("short", WIDTHS)
def test_short_names_parse_print_and_run_in_test_blocks(short):
    assert canonical_dtype(short) == WIDTHS[short]
    assert str(TensorType((2, 3), WIDTHS[short])) == f"{short}[2,3]"
    assert TensorType((4,), short).itemsize == np.dtype(WIDTHS[short]).itemsize
    results = run_test_blocks(parse_text(RULES.replace("DTYPE", short), "widths.fuse"))
    assert [(r.name, r.passed) for r in results] == [("wraps", True)], [str(r) for r in results]


def test_a_width_fusionlang_lacks_is_still_named_in_a_one_line_error():
    with pytest.raises(ShapeError, match=r"^unsupported dtype 'complex64' \(supported: .*uint64.*\)$"):
        canonical_dtype("complex64")
    with pytest.raises(FuseError, match=r"widths\.fuse:3:14: .*u128"):
        parse_text(RULES.replace("DTYPE", "u128"), "widths.fuse")
