"""Integer arithmetic in generated code never traps: a zero divisor and INT_MIN / -1 have
defined results (NumPy's), the same in the compiled C and in the reference."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import sympy as sp

import fusionlang
from fusionlang import reference
from fusionlang.backend import cuda_sources, nvrtc_available, nvrtc_compile
from fusionlang.backend.ccompile import build_library, load_library
from fusionlang.backend.cexpr import C, ValuePrinter, helpers
from fusionlang.engine.plan import per_node_plan
from fusionlang.ops import GraphBuilder


def _extreme_pairs(dtype):
    info = np.iinfo(dtype)
    a = np.array([5, -5, 0, info.min, info.min, info.max, 7, -7, info.min, 1], dtype)
    b = np.array([0, 0, 0, -1, 0, -1, 2, 2, 1, info.min], dtype)
    return a, b


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_compiled_integer_division_matches_the_reference_without_a_trap(dtype):
    a, b = _extreme_pairs(dtype)
    gb = GraphBuilder("idiv")
    x, y = gb.input("x", a.shape, dtype), gb.input("y", b.shape, dtype)
    gb.output(gb.add(gb.div(x, y), x))  # fused with a consumer, not only alone
    graph = gb.build()
    feeds = {"x": a, "y": b}
    want = reference.run(graph, feeds)
    got = fusionlang.compile(per_node_plan(graph, lambda n: "kernel"), target="c").run(feeds)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_reference_integer_division_is_defined(dtype):
    a, b = _extreme_pairs(dtype)
    gb = GraphBuilder("idiv")
    gb.output(gb.div(gb.input("x", a.shape, dtype), gb.input("y", b.shape, dtype)))
    with np.errstate(all="raise"):  # no warning either: the result is defined, not an accident
        got = reference.run(gb.build(), {"x": a, "y": b})["div_0"]
    nonzero = b != 0
    assert np.all(got[~nonzero] == 0)
    info = np.iinfo(dtype)
    assert np.all(got[(a == info.min) & (b == -1)] == info.min)
    for p, q, value in zip(a[nonzero], b[nonzero], got[nonzero]):
        p, q = int(p), int(q)
        exact = abs(p) // abs(q) * (1 if (p < 0) == (q < 0) else -1)  # truncated toward zero
        if info.min <= exact <= info.max:
            assert value == exact, (p, q)


def _integer_function(expr, name):
    printer = ValuePrinter("float64", C, lambda s: s.name, lambda s: True)
    return f"int64_t {name}(int64_t a, int64_t b) {{ return {printer.doprint(expr)}; }}"


def test_integer_quotient_floor_division_and_modulo_in_c_follow_numpy():
    a_, b_ = sp.Symbol("a"), sp.Symbol("b")
    exprs = {"q": a_ / b_, "f": sp.floor(a_ / b_), "m": sp.Mod(a_, b_)}
    src = "#include <stdint.h>\n#include <math.h>\n" + helpers(C) + "\n".join(
        _integer_function(e, n) for n, e in exprs.items())
    assert "fl_idiv" in src and "fl_ifdiv" in src and "fl_imod" in src
    lib = load_library(build_library([src]))
    a, b = _extreme_pairs("int64")
    a = np.concatenate([a, np.arange(-9, 10, dtype=np.int64)])
    b = np.concatenate([b, np.array([3, -3, 4, -4, 0] * 4, np.int64)[:19]])
    with np.errstate(all="ignore"):
        want = {"q": reference_quotient(a, b), "f": np.floor_divide(a, b), "m": np.mod(a, b)}
    for name in exprs:
        fn = getattr(lib, name)
        fn.restype = ctypes.c_int64
        fn.argtypes = [ctypes.c_int64, ctypes.c_int64]
        got = np.array([fn(int(p), int(q)) for p, q in zip(a, b)], np.int64)
        np.testing.assert_array_equal(got, want[name], err_msg=name)


def reference_quotient(a, b):
    from fusionlang.ops.elementwise import truncated_divide

    return truncated_divide(a, b)


@pytest.mark.skipif(nvrtc_available() is not None, reason="NVRTC is not available")
def test_cuda_integer_division_goes_through_the_helpers():
    gb = GraphBuilder("idiv")
    x, y = gb.input("x", (8,), "int64"), gb.input("y", (8,), "int64")
    gb.output(gb.div(x, y))
    sources = cuda_sources(per_node_plan(gb.build(), lambda n: "kernel"))
    kernels = [text.split("fl_imod", 1)[1] for text in sources.values()]  # past the helpers
    assert any("fl_idiv(" in k for k in kernels) and not any("] / p" in k or "]/p" in k for k in kernels)
    for text in sources.values():
        nvrtc_compile(text)
