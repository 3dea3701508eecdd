"""Einsum lowered to transpose/reshape/matmul/reduce_sum, compiled to C, against numpy.einsum."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import fusionlang.onnx_backend as backend
from fusionlang.cli import main
from fusionlang.errors import ModelError, ShapeError
from fusionlang.frontend import from_onnx
from onnx_cases import make_model, run_fusionlang

pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")


def einsum_model(equation: str, shapes, elem=TensorProto.FLOAT) -> onnx.ModelProto:
    names = [f"x{k}" for k in range(len(shapes))]
    node = helper.make_node("Einsum", names, ["y"], name="e", equation=equation)
    return make_model([node], {n: (list(s), elem) for n, s in zip(names, shapes)}, {"y": None}, 12)


CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("bij, bjk -> bik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("ii", [(4, 4)]),
    ("ii->i", [(4, 4)]),
    ("...ii ->...i", [(2, 3, 3)]),
    ("iij,jk->ik", [(3, 3, 2), (2, 4)]),
    ("i,i", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij->", [(3, 4)]),
    ("->", [()]),
    ("ijk->kji", [(2, 3, 4)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ij,kj->ik", [(3, 4), (5, 4)]),
    ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 2)]),
    ("i,i,i->", [(6,), (6,), (6,)]),
    ("Ab,bC->AC", [(2, 3), (3, 2)]),
    ("ij,j->i", [(3, 1), (4,)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
]


@pytest.mark.parametrize("equation, shapes", CASES, ids=[c[0] for c in CASES])
def test_einsum_compiles_and_matches_numpy(equation, shapes):
    rng = np.random.default_rng(len(equation))
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    model = einsum_model(equation, shapes)
    got = backend.prepare(model, target="c").run({f"x{k}": a for k, a in enumerate(arrays)})[0]
    want = np.einsum(equation.replace(" ", ""), *[a.astype(np.float64) for a in arrays])
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_diagonal_ignores_what_lies_off_it():
    x = np.array([[1, np.inf], [np.nan, 2]], np.float32)
    got = backend.prepare(einsum_model("ii->i", [(2, 2)]), target="c").run({"x0": x})[0]
    np.testing.assert_array_equal(got, [1, 2])


@pytest.mark.parametrize("equation, shapes, error, message", [
    ("ij,jk->ik", [(3, 4), (5, 2)], ShapeError, "label 'j' has sizes 4 and 5"),
    ("ij->ik", [(3, 4)], ModelError, "equation 'ij->ik': output labels must be distinct and appear in an input"),
    ("ij,jk", [(3, 4)], ModelError, "equation 'ij,jk' has 2 operands but the node has 1 inputs"),
    ("i2->i", [(3, 4)], ModelError, "equation 'i2->i': 'i2' is not a term (letters, at most one '...')"),
    ("ijk->i", [(3, 4)], ShapeError, "equation 'ijk->i': term 'ijk' does not fit an input of rank 2"),
    ("...ij->ij", [(2, 3, 4)], ModelError, "equation '...ij->ij': the output must keep the axes '...' stands for"),
])
def test_bad_equations_are_refused_with_one_line(equation, shapes, error, message, tmp_path, capsys):
    model = einsum_model(equation, shapes)
    full = f"node 'e' (Einsum): {message}"
    with pytest.raises(error, match="^" + re.escape(full) + "$"):
        from_onnx(model)
    path = tmp_path / "einsum.onnx"
    onnx.save(model, str(path))
    assert main(["fuse", str(path)]) == 2
    assert capsys.readouterr().err == f"fusionlang: error: {full}\n"


@st.composite
def equations(draw):
    """A random valid einsum: 1 to 3 operands over a few labels (repeats make diagonals),
    an ellipsis sometimes, an explicit or implicit output, and shapes to match."""
    sizes = dict(zip("abcde", draw(st.lists(st.integers(1, 3), min_size=5, max_size=5))))
    batch = draw(st.lists(st.integers(1, 3), max_size=2)) if draw(st.booleans()) else None
    terms, shapes = [], []
    for _ in range(draw(st.integers(1, 3))):
        labels = draw(st.lists(st.sampled_from("abcde"), max_size=3))
        shape = [sizes[label] for label in labels]
        term = "".join(labels)
        if batch is not None and draw(st.booleans()):
            kept = batch[len(batch) - draw(st.integers(0, len(batch))):]
            shape = [n if draw(st.booleans()) else 1 for n in kept] + shape  # size-1 axes broadcast
            term = "..." + term
        terms.append(term)
        shapes.append(tuple(shape))
    lhs = ",".join(terms)
    if draw(st.booleans()):
        return lhs, shapes
    used = sorted({label for term in terms for label in term if label.isalpha()})
    output = draw(st.lists(st.sampled_from(used), unique=True)) if used else []
    dots = "..." if any("..." in term for term in terms) else ""
    return f"{lhs}->{dots}{''.join(output)}", shapes


@settings(max_examples=40, deadline=None)
@given(case=equations(), seed=st.integers(0, 2**16))
def test_random_equations_lower_to_what_numpy_computes(case, seed):
    # through the reference interpreter: the lowering is what is checked (C: the cases above)
    equation, shapes = case
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    want = np.einsum(equation, *[a.astype(np.float64) for a in arrays])
    (got,) = run_fusionlang(einsum_model(equation, shapes), {f"x{k}": a for k, a in enumerate(arrays)})
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
