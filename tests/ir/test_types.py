"""Tensor types: dtype names."""

import numpy as np
import pytest

import fusionlang.ir.types as types
from fusionlang.errors import ShapeError
from fusionlang.ir.types import DTYPES, TensorType, canonical_dtype


@pytest.mark.parametrize("name", list(DTYPES))
def test_each_canonical_name_is_numpys_own(name):
    assert canonical_dtype(name) == np.dtype(name).name == name  # (canonical_dtype first: it registers ml_dtypes)


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


ML_PROBE = """\
import sys
import numpy as np
from fusionlang.ir.float8 import float8_max, is_float8
from fusionlang.ir.narrow_int import is_narrow_int
from fusionlang.ir.types import TensorType, canonical_dtype, is_float_dtype
before = "ml_dtypes" in sys.modules
print(before, is_float8("float8_e4m3fn"), is_narrow_int("int4"), is_float_dtype("bfloat16"),
      TensorType((2,), "bf16").dtype, np.dtype(canonical_dtype("f8e5m2")).name, float8_max("float8_e4m3fn"))
"""


def test_ml_dtypes_is_imported_when_one_of_its_dtypes_is_named():
    """Importing the IR does not import ml_dtypes (0.8 s, which lint should not pay), yet
    its dtypes are known by name wherever the IR names one."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", ML_PROBE], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "True", "True", "True", "bfloat16", "float8_e5m2", "448.0"], done.stderr
