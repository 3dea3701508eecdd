"""The bitcast op's checks: one width on both sides, and the source dtype it names is its
input's (the reference needs it: 16-bit float inputs reach it widened to float32)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from fusionlang import reference
from fusionlang.errors import ShapeError
from fusionlang.ops import GraphBuilder


def bitcast_graph(dtype: str, **attrs):
    b = GraphBuilder("bits")
    b.output(b.op("bitcast", b.input("x", (3,), dtype), **attrs))
    return b.build()


@pytest.mark.parametrize("dtype, attrs, message", [
    ("float32", {"source": "float32", "to": "float64"}, "float32 (32 bits) and float64 (64 bits) differ in width"),
    ("int8", {"source": "int8", "to": "bool"}, None),
    ("float16", {"source": "bfloat16", "to": "int16"}, "source=bfloat16 but the input is float16"),
])
def test_bitcast_checks(dtype, attrs, message):
    if message is None:  # bool is one byte wide: allowed
        x = np.array([0, 1, 0], np.int8)
        graph = bitcast_graph(dtype, **attrs)
        np.testing.assert_array_equal(reference.run(graph, {"x": x})[graph.outputs[0]], x.view(bool))
        return
    with pytest.raises(ShapeError, match=re.escape(message)):
        bitcast_graph(dtype, **attrs)


def test_bitcast_of_float16_reads_its_bits_not_its_widened_value():
    x = np.array([1.0, -2.5, np.inf], np.float16)
    graph = bitcast_graph("float16", source="float16", to="uint16")
    np.testing.assert_array_equal(reference.run(graph, {"x": x})[graph.outputs[0]], x.view(np.uint16))
