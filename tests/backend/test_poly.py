"""Polyhedral statements: what an op's access spec becomes in isl."""

from __future__ import annotations

import islpy as isl
import numpy as np
import pytest
import sympy as sp
from helpers import operand_sizes

from fusionlang.backend.poly import NotAffine, access_map_text, build_program, isl_constraint, isl_expr
from fusionlang.ops import GraphBuilder
from fusionlang.ops.access import i_sym, v_sym

I0, I1 = i_sym(0), i_sym(1)
# the same names without the non-negativity assumption, to evaluate at negative points
A0, A1 = sp.Symbol("i0", integer=True), sp.Symbol("i1", integer=True)


@pytest.mark.parametrize("expr", [
    A0 + 2 * A1 - 3,
    sp.floor((A0 + 1) / 3),
    sp.Mod(2 * A0 + A1, 4),
    sp.Min(A0, A1 + 1) + sp.Max(A0 - 2, 0),
    sp.ceiling(A1 / 2),
])
def test_quasi_affine_expressions_translate_exactly(expr):
    ctx = isl.Context()
    m = isl.Map.read_from_str(ctx, f"{{ [i0, i1] -> [{isl_expr(expr, {'i0', 'i1'})}] }}")
    for a in range(-4, 5):
        for b in range(-4, 5):
            point = isl.Set.read_from_str(ctx, f"{{ [{a}, {b}] }}")
            (value,) = [p.get_coordinate_val(isl.dim_type.set, 0).to_python()
                        for p in _points(point.apply(m))]
            assert value == int(expr.subs({A0: a, A1: b})), (expr, a, b)


def _points(s):
    out = []
    s.foreach_point(out.append)
    return out


@pytest.mark.parametrize("expr", [I0 * I1, I0 / 2, v_sym(0) + I0, sp.exp(I0)])
def test_non_affine_expressions_are_refused(expr):
    with pytest.raises(NotAffine):
        isl_expr(expr, {"i0", "i1"})


def test_constraints_translate():
    assert isl_constraint(sp.And(I0 >= 1, sp.Lt(I1, 3))) == "((i0 >= 1) and (i1 < 3))"


def test_a_reduction_becomes_init_update_final_with_an_accumulator():
    b = GraphBuilder("r")
    x = b.input("x", (4, 6))
    b.output(b.reduce_mean(x, axes=[1]))
    graph = b.build()
    prog = build_program(graph, [n.name for n in graph.nodes])
    kinds = [s.kind for s in prog.stmts]
    assert kinds == ["init", "update", "final"]
    init, update, final = prog.stmts
    assert init.acc is update.acc is final.acc and update.acc.role == "acc"
    assert update.red_extents == (6,) and update.reduce == "sum"
    # flow dependences: init -> update, update -> update (carried), update -> final
    assert not prog.deps_acc_carried.is_empty() and not prog.deps_acc.is_empty()


def test_views_are_inlined_into_their_readers():
    b = GraphBuilder("v")
    x = b.input("x", (2, 3, 4))
    t = b.transpose(x, perm=[2, 0, 1], name="t")
    r = b.reshape(t, shape=[4, 6], name="r")
    b.output(b.relu(r, name="y"))
    graph = b.build()
    prog = build_program(graph, [n.name for n in graph.nodes])
    (stmt,) = prog.stmts  # only relu computes; it reads x through both views
    (read,) = stmt.reads
    assert read.array.value == "x"
    assert {a.value for a in prog.arrays} == {"x", "y"}


def test_a_padded_window_read_becomes_domain_constraints():
    b = GraphBuilder("p")
    x = b.input("x", (1, 1, 5, 5))
    b.output(b.max_pool(x, kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    graph = b.build()
    prog = build_program(graph, [n.name for n in graph.nodes])
    update = next(s for s in prog.stmts if s.kind == "update")
    assert update.constraints and not update.reads[0].guarded
    dom = isl.Set.read_from_str(prog.ctx, "{ " + update.domain_text() + " }")
    assert dom.count_val().to_python() < 25 * 9  # the out-of-range taps are gone


def test_a_read_through_data_is_exact_in_its_other_dimensions():
    b = GraphBuilder("g")
    x = b.input("x", (3, 5))
    b.output(b.gather(x, b.constant(np.array([1, 4], np.int64)), axis=1))
    graph = b.build()
    prog = build_program(graph, [n.name for n in graph.nodes])
    (stmt,) = prog.stmts
    data = next(a for a in stmt.reads if a.array.value == "x")
    text = access_map_text(stmt, data)
    assert "o0 = i0" in text and "0 <= o1 < 5" in text


def test_one_element_constants_become_literals():
    b = GraphBuilder("c")
    x = b.input("x", (4,))
    b.output(b.mul(x, b.constant(np.float32(0.5))))
    graph = b.build()
    prog = build_program(graph, [n.name for n in graph.nodes])
    (stmt,) = prog.stmts
    assert len(stmt.reads) == 1 and sp.Float(0.5) in stmt.expr.atoms(sp.Float)
    assert [a.value for a in prog.arrays if a.role == "input"] == ["x"]


class _CountedList(list):
    """A list that counts the walks over it."""

    walks = 0

    def __iter__(self):
        self.walks += 1
        return super().__iter__()


def long_concat_program(parts: int):
    b = GraphBuilder("long_concat")
    x = b.input("x", (4,))
    b.output(b.concat(*[b.unsqueeze(b.relu(x), axes=(0,)) for _ in range(parts)], axis=0))
    graph = b.build()
    return build_program(graph, [n.name for n in graph.nodes])


def test_statements_are_found_by_name_without_walking_the_list_each_time():
    """The scheduler asks for each statement by name; walking the list every time made a
    concat of 5,000 slices (10,000 statements) spend 6 s there."""
    prog = long_concat_program(50)
    prog.stmts = _CountedList(prog.stmts)
    for s in list.__iter__(prog.stmts):
        assert prog.stmt(s.name) is s
    assert prog.stmts.walks <= 1


def test_a_domain_of_many_statements_is_joined_pairwise(monkeypatch):
    """Each union copies both sides: adding one statement's domain at a time to the growing
    union copied 1 + 2 + .. + n pieces (7 s for the domain of a 10,000-statement group)."""
    prog = long_concat_program(200)
    copied = operand_sizes(monkeypatch, isl.UnionSet, "union", isl.UnionSet.n_set)
    domain = prog.domain
    assert domain.n_set() == len(prog.stmts)
    assert sum(copied) <= len(prog.stmts) * (len(prog.stmts).bit_length() + 1)
