"""Tensor types: dtype names."""

import numpy as np
import pytest

import fusionlang.ir.types as types
from fusionlang.errors import ShapeError
from fusionlang.ir.types import DTYPES, TensorType, canonical_dtype


@pytest.mark.parametrize("name", list(DTYPES))
def test_each_canonical_name_is_numpys_own(name):
    assert np.dtype(name).name == name == canonical_dtype(name)


def test_a_canonical_name_is_taken_without_asking_numpy(monkeypatch):
    """Every value's type is built from a canonical name; numpy's lookup of it was 4% of
    fusing an unrolled Loop of 20,000 iterations."""
    monkeypatch.setattr(types, "np", None)
    assert TensorType((2, 3), "float32").dtype == "float32"
    assert canonical_dtype("f16") == "float16"


def test_other_spellings_are_still_read_and_unknown_ones_refused():
    assert canonical_dtype(np.float32) == canonical_dtype("f4") == "float32"
    with pytest.raises(ShapeError, match="unknown dtype"):
        canonical_dtype("no_such_type")
