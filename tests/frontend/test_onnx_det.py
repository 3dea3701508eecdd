"""Det by cofactor expansion, compiled to C, against numpy.linalg.det."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import helper

import fusionlang.onnx_backend as backend
from fusionlang.cli import main
from fusionlang.errors import ShapeError, UnsupportedOpError
from fusionlang.frontend import from_onnx
from onnx_cases import make_model

pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")


def det_model(shape) -> onnx.ModelProto:
    node = helper.make_node("Det", ["x"], ["y"], name="det")
    return make_model([node], {"x": list(shape)}, {"y": None}, 11)


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (3, 3, 3), (2, 4, 4), (2, 1, 5, 5)])
def test_det_matches_numpy(shape):
    x = np.random.default_rng(shape[-1]).standard_normal(shape).astype(np.float32)
    got = backend.prepare(det_model(shape), target="c").run({"x": x})[0]
    want = np.linalg.det(x.astype(np.float64))
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_singular_matrix_has_determinant_0():
    x = np.array([[1, 2, 3], [4, 5, 6], [5, 7, 9]], np.float32)
    assert backend.prepare(det_model(x.shape), target="c").run({"x": x})[0] == 0


def test_non_square_matrices_are_a_shape_error():
    with pytest.raises(ShapeError, match="^" + re.escape("node 'det' (Det): input f32[2,3] must be square matrices "
                                                         "[..., M, M]") + "$"):
        from_onnx(det_model((2, 3)))


def test_large_matrices_are_refused_with_one_line(tmp_path, capsys):
    with pytest.raises(UnsupportedOpError, match=re.escape("Det of 6x6 matrices (cofactor expansion up to 5x5)")):
        from_onnx(det_model((6, 6)))
    path = tmp_path / "det.onnx"
    onnx.save(det_model((6, 6)), str(path))
    assert main(["fuse", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Det of 6x6 matrices (cofactor expansion up to 5x5)" in err
