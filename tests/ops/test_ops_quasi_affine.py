"""The exact floor/mod forms of linear index expressions (fusionlang.ops.quasi_affine) and
the reshape indices built with them, checked point by point against integer arithmetic."""

from __future__ import annotations

import itertools
from math import prod

import numpy as np
import sympy as sp
from hypothesis import example, given
from hypothesis import strategies as st

from fusionlang.ops.access import i_sym
from fusionlang.ops.quasi_affine import floor_div, mod
from fusionlang.ops.shape import relinearize, unravel

SYMS = [sp.Symbol(f"x{k}", integer=True, nonnegative=True) for k in range(3)]


def _points(extents: dict):
    names = list(extents)
    for values in itertools.product(*(range(extents[x]) for x in names)):
        yield dict(zip(names, values))


def _value(expr: sp.Expr, point: dict) -> int:
    return int(expr.xreplace({k: sp.Integer(v) for k, v in point.items()}))


linear_forms = st.tuples(
    st.lists(st.tuples(st.integers(-40, 200), st.integers(1, 7)), min_size=1, max_size=3),
    st.integers(-50, 50),
    st.integers(1, 60),
)


@given(linear_forms)
@example(([(4, 3), (1, 5)], 0, 8))  # the low part reaches g = 4 exactly: no split
def test_floor_div_and_mod_equal_integer_arithmetic_at_every_point(form):
    raw_terms, const, divisor = form
    terms = tuple((c, SYMS[k]) for k, (c, _) in enumerate(raw_terms))
    extents = {SYMS[k]: e for k, (_, e) in enumerate(raw_terms)}
    quotient, remainder = floor_div(terms, const, divisor, extents), mod(terms, const, divisor, extents)
    for point in _points(extents):
        linear = const + sum(c * point[x] for c, x in terms)
        assert _value(quotient, point) == linear // divisor, (terms, const, divisor, quotient, point)
        assert _value(remainder, point) == linear % divisor, (terms, const, divisor, remainder, point)


shapes = st.lists(st.integers(1, 4), min_size=1, max_size=4)


@given(shapes, st.data())
def test_reshape_index_reads_the_same_row_major_element(out_shape, data):
    total = prod(out_shape)
    dims, rest = [], total
    while rest > 1:  # a random factorization of the same size, 1s mixed in
        d = data.draw(st.sampled_from([f for f in range(2, rest + 1) if rest % f == 0]))
        dims += [d] + [1] * data.draw(st.integers(0, 1))
        rest //= d
    in_shape = tuple(data.draw(st.permutations(dims))) or (1,)
    index = relinearize(tuple(out_shape), in_shape)
    for position, out_index in enumerate(np.ndindex(*out_shape)):
        point = {i_sym(k): v for k, v in enumerate(out_index)}
        got = tuple(_value(e, point) for e in index)
        assert got == tuple(int(v) for v in np.unravel_index(position, in_shape)), (out_shape, in_shape, index)


@given(shapes)
def test_unravel_of_one_index_matches_numpy(shape):
    x = SYMS[0]
    index = unravel(x, tuple(shape))
    for position in range(prod(shape)):
        got = tuple(_value(e, {x: position}) for e in index)
        assert got == tuple(int(v) for v in np.unravel_index(position, shape))
