"""The indexing ops (scatters, top-k, one-hot...) reject bad shapes, dtypes and attributes
with a located, pinned message, and their references refuse indices out of range."""

from __future__ import annotations

import re

import numpy as np
import pytest

from fusionlang.errors import ShapeError
from fusionlang.ir.types import TensorType
from fusionlang.ops import REGISTRY


def T(shape, dtype="float32") -> TensorType:  # noqa: N802  (reads like a type in the table)
    return TensorType(shape, dtype)


I = T((2, 3), "int64")  # noqa: E741
# (op, input types, attrs, message after "node 'n1' (op)")
REJECTED = [
    ("scatter_elements", [T((4, 3)), T((2, 3)), T((2, 3))], {}, ": indices must be int64 or int32, got float32"),
    ("scatter_elements", [T((4, 3)), T((2,), "int64"), T((2,))], {},
     ": data and indices must have the same rank >= 1, got 2 and 1"),
    ("scatter_elements", [T((4, 3)), T((2, 4), "int64"), T((2, 4))], {}, ": indices dim 1 is 4, larger than data's 3"),
    ("scatter_elements", [T((4, 3)), I, T((2, 2))], {}, ": updates must be float32 shaped like indices [2, 3], got "
                                                       "f32[2,2]"),
    ("scatter_elements", [T((4, 3)), I, T((2, 3))], {"reduction": "none"},
     ": reduction='none' should be one of add, mul, max, min (plain assignment is scatter_pick of scatter_position)"),
    ("scatter_elements", [T((4, 3), "bool"), I, T((2, 3), "bool")], {"reduction": "mul"},
     ": reduction mul needs numeric data, got bool"),
    ("scatter_elements", [T((4, 3)), I, T((2, 3))], {"axis": 2}, ": axis=2 is out of range for rank 2"),
    ("scatter_position", [T((0, 3)), I], {}, ": axis 0 of data is empty: no index into it is legal"),
    ("scatter_pick", [T((4, 3)), T((2, 3)), T((4, 3), "int32")], {},
     ": position must be int64 shaped like data [4, 3], got i32[4,3]"),
    ("scatter_pick", [T((4, 3)), T((2, 4)), T((4, 3), "int64")], {}, ": updates dim 1 is 4, larger than data's 3"),
    ("sort_position", [T((4,), "bool")], {}, ": sorting needs a numeric input, got bool"),
    ("sort_position", [T(())], {}, ": input must have rank >= 1"),
    ("sorted_indices", [T((4, 3), "int32")], {"k": 1}, ": places must be int64 of rank >= 1, got i32[4,3]"),
    ("sorted_indices", [I], {"k": -1}, ": k=-1 must be in [0, 3] (the length of axis 1)"),
    ("one_hot", [T((3,)), T((2,))], {"depth": 4}, ": indices must be integers, got float32"),
    ("one_hot", [T((3,), "int64"), T((3,))], {"depth": 4}, ": values must hold two elements (off, on), got f32[3]"),
    ("one_hot", [T((3,), "int64"), T((2,))], {"depth": 4, "axis": 2}, ": axis=2 is out of range for rank 1"),
    ("col2im", [T((1, 4, 9))], {"image_shape": (4, 4), "block_shape": (2,)},
     ": image_shape [4, 4], block_shape [2], dilations, strides (one per axis) and pads (two per axis) disagree"),
    ("col2im", [T((1, 4, 9))], {"image_shape": (4, 4), "block_shape": (2, 0)},
     ": image and block sizes, dilations and strides must be >= 1, pads >= 0"),
    ("col2im", [T((1, 4, 9))], {"image_shape": (2, 2), "block_shape": (3, 2)},
     ": a block of [3, 2] (dilated) does not fit the padded image [2, 2]"),
    ("col2im", [T((1, 4, 8))], {"image_shape": (4, 4), "block_shape": (2, 2)},
     ": input must be [N, C * 4, 9] (a column per block placement), got f32[1,4,8]"),
    ("grid_coordinates", [T((1, 2, 2, 2))], {"sizes": (3, 0)}, ": sizes [3, 0] must be >= 1: there is nothing to "
                                                                "sample"),
    ("gather_taps", [T((1, 2, 3, 3)), T((1, 2, 2, 2, 2)), T((1, 2, 2, 2, 2))], {},
     ": cells must be int64 [1, spatial..., 2, taps] for f32[1,2,3,3], got f32[1,2,2,2,2]"),
]


@pytest.mark.parametrize("op, types, attrs, message", REJECTED, ids=[f"{r[0]}:{r[3][2:40]}" for r in REJECTED])
def test_inference_rejects_with_a_pinned_message(op, types, attrs, message):
    with pytest.raises(ShapeError, match="^" + re.escape(f"node 'n1' ({op})" + message) + "$"):
        REGISTRY.infer(op, "n1", attrs, types)


@pytest.mark.parametrize("op, inputs, message", [
    ("scatter_elements", [np.zeros((2, 5)), np.array([[1, 5]]), np.ones((1, 2))],
     "index 5 is out of range for axis 1 of size 5"),
    ("scatter_position", [np.zeros((2, 5)), np.array([[-6, 0]])], "index -6 is out of range for axis 1 of size 5"),
    ("scatter_pick", [np.zeros((2, 5)), np.ones((2, 2)), np.array([[0, 1, -1, -2, 2], [0] * 5])],
     "position 2 is out of range for axis 1 of updates of size 2 (a negative one keeps the data)"),
    ("sorted_indices", [np.array([[0, 0, 1]])], "places along axis 1 must be a permutation of 0..2"),
])
def test_references_refuse_indices_out_of_range(op, inputs, message):
    attrs = REGISTRY.get(op).normalize_attrs({"axis": 1, **({"k": 1} if op == "sorted_indices" else {})}, "n1")
    with pytest.raises((IndexError, ValueError), match="^" + re.escape(message) + "$"):
        REGISTRY.get(op).reference(inputs, attrs)
