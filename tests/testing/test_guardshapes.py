"""Shapes drawn for a guard: its shape conjuncts read as demands, and leaves built to meet them."""

from __future__ import annotations

from fusionlang.ir.types import TensorType
from fusionlang.lang import parse_text
from fusionlang.testing.guardshapes import shape_demands, shape_for


def _guard(text: str):
    rules = parse_text(f'import "std/algebra.fuse"\nrewrite r: mul(m @ matmul(x, w), c) where {text} => m\n', "g.fuse")
    return rules.rewrites[0].guard


def _no_draw(strategy):
    raise AssertionError("nothing should be drawn here")


def test_shape_conjuncts_become_demands():
    demands = shape_demands(_guard("const(w, c) and rank(w) == 2 and 1 == dim(c, 1) and dim(c, 0) == dim(w, 1) "
                                   "and same_shape(x, m) and is_scalar(c)"))
    assert demands.ranks == {"w": 2}
    assert demands.dims == {("c", 1): 1}
    assert demands.links == [(("c", 0), ("w", 1))]
    assert demands.same == [("x", "m")] and demands.scalars == {"c"}
    assert demands.mentioned == [("c", 1), ("c", 0), ("w", 1)]
    assert demands.about("c") and demands.about("w") and not demands.about("y")


def test_a_disjunction_demands_nothing():
    demands = shape_demands(_guard("rank(w) == 2 or rank(w) == 3"))
    assert not demands.about("w")


def test_a_leaf_is_built_to_meet_rank_dims_and_links():
    demands = shape_demands(_guard("rank(c) == 2 and dim(c, 1) == 1 and dim(c, 0) == dim(w, 1)"))
    known = {"w": TensorType((3, 5), "float32")}
    built = shape_for(_no_draw, "c", TensorType((4, 2), "float32"), demands, known)
    assert built == TensorType((5, 1), "float32")


def test_same_shape_copies_a_known_variable():
    demands = shape_demands(_guard("same_shape(c, x)"))
    built = shape_for(_no_draw, "c", TensorType((1,), "float64"), demands, {"x": TensorType((2, 3), "float32")})
    assert built.shape == (2, 3) and built.dtype == "float64"


def test_a_missing_rank_is_made_up_with_drawn_leading_axes():
    demands = shape_demands(_guard("rank(c) == 3"))
    built = shape_for(lambda strategy: 2, "c", TensorType((4,), "float32"), demands, {})
    assert built.shape == (2, 2, 4)


def test_demands_past_the_size_limits_are_left_to_the_guard():
    demands = shape_demands(_guard("rank(c) == 40 and dim(c, 0) == 100000"))
    built = shape_for(_no_draw, "c", TensorType((2, 3), "float32"), demands, {})
    assert built.shape == (2, 3)
