"""Bad shapes, dtypes and attributes are rejected by inference with a located, pinned message."""

from __future__ import annotations

import re

import numpy as np
import pytest

from fusionlang.errors import ShapeError, UnsupportedOpError
from fusionlang.ir.types import TensorType
from fusionlang.ops import REGISTRY


def T(shape, dtype="float32") -> TensorType:  # noqa: N802  (reads like a type in the table)
    return TensorType(shape, dtype)


F = T((3,))
# (op, input types, attrs, message after "node 'n1' (op)")
REJECTED = [
    # arity and attributes, checked by the registry for every op
    ("add", [T((2, 3))], {}, ": expects 2 inputs, got 1"),
    ("conv", [T((1, 3, 8, 8))], {}, ": expects 2 to 3 inputs, got 1"),
    ("concat", [], {"axis": 0}, ": expects at least 1 inputs, got 0"),
    ("reshape", [T((2, 3))], {}, ": missing required attribute 'shape'"),
    ("reshape", [T((2, 3))], {"shape": (6,), "bogus": 1}, ": unknown attribute 'bogus' (known: allowzero, shape)"),
    ("reduce_sum", [T((2, 3))], {"keepdims": 1.5}, " attribute 'keepdims': expected int, got 1.5"),
    ("leaky_relu", [T((2, 3))], {"alpha": "x"}, " attribute 'alpha': expected float, got 'x'"),
    ("cast", [F], {"to": "string"}, " attribute 'to': unknown dtype 'string'"),
    ("cast", [F], {"to": "complex64"}, " attribute 'to': unsupported dtype 'complex64' (supported: float32, "
                                       "float64, float16, bfloat16, int64, int32, int8, uint8, int16, uint16, uint32, "
                                       "uint64, bool, float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, "
                                       "int4, uint4, float4_e2m1fn, int2, uint2)"),
    # elementwise
    ("add", [T((2, 3)), T((4,))], {}, ": shapes [2, 3], [4] do not broadcast"),
    ("add", [T((2, 3)), T((3,), "int64")], {}, ": inputs have different dtypes: float32, int64"),
    ("add", [T((3,), "bool"), T((3,), "bool")], {}, ": arithmetic on bool tensors is not defined; cast first"),
    ("exp", [T((3,), "int64")], {}, ": input must be a floating-point tensor, got int64"),
    ("mean", [T((3,), "int64")], {}, ": input must be a floating-point tensor, got int64"),
    ("where", [F, F, F], {}, ": condition must be bool, got float32"),
    ("where", [T((3,), "bool"), F, T((3,), "int64")], {}, ": inputs have different dtypes: float32, int64"),
    ("prelu", [F, T((2, 3))], {}, ": slope f32[2,3] must broadcast to x f32[3] without growing it"),
    ("clip", [T((3,), "int32")], {"min": 0.5}, ": min=0.5 is not an integer, but the input is int32"),
    ("clip", [T((3,), "bool")], {}, ": clip needs a numeric input, got bool"),
    ("gelu", [F], {"approximate": "fast"}, ": approximate='fast' should be 'none' or 'tanh'"),
    ("and", [F, F], {}, ": logical ops need bool inputs, got float32"),
    ("pow", [T((3,), "bool"), F], {}, ": pow needs numeric inputs, got bool"),
    # reductions
    ("reduce_sum", [T((2, 3))], {"axes": (0, -2)}, ": axes [0, -2] repeat an axis"),
    ("reduce_max", [T((2, 3))], {"axes": (2,)}, ": axes=2 is out of range for rank 2"),
    # conv family
    ("conv", [T((1, 3, 8, 8)), T((4, 2, 3, 3))], {}, ": weight f32[4,2,3,3] expects 2 input channels, input has 3"),
    ("conv", [T((1, 4, 8, 8)), T((4, 2, 3, 3))], {"group": 3},
     ": group=3 does not divide input channels 4 and output channels 4"),
    ("conv", [T((1, 3, 8, 8)), T((4, 3, 3, 3)), T((5,))], {}, ": bias f32[5] should have shape [4]"),
    ("conv", [T((1, 3, 2, 2)), T((4, 3, 3, 3))], {}, ": window does not fit: output spatial shape [0, 0]"),
    ("conv", [T((1, 3, 8, 8)), T((4, 3, 3, 3))], {"strides": (1,)}, ": strides [1] should have 2 entries"),
    ("conv", [T((1, 3, 8, 8)), T((4, 3, 3, 3))], {"dilations": (1, 0)}, ": dilations [1, 0] must be positive"),
    ("conv", [T((1, 3, 8, 8)), T((4, 3, 3, 3))], {"pads": (1, 1, -1, 0)}, ": pads [1, 1, -1, 0] must be non-negative"),
    ("conv", [T((1, 3, 8, 8)), T((4, 3, 3, 3))], {"kernel_shape": (2, 2)},
     ": kernel_shape [2, 2] does not match weight f32[4,3,3,3]"),
    ("conv", [T((1, 3, 8, 8), "int64"), T((4, 3, 3, 3), "int64")], {},
     ": input must be a floating-point tensor, got int64"),
    ("conv", [T((3, 8)), T((4, 3))], {}, ": input f32[3,8] and weight f32[4,3] must have the same rank >= 3"),
    ("conv_transpose", [T((1, 3, 8, 8)), T((4, 2, 3, 3))], {},
     ": weight f32[4,2,3,3] expects 4 input channels, input has 3"),
    ("conv_transpose", [T((1, 4, 2, 2)), T((4, 2, 3, 3))], {"pads": (3, 3, 3, 3)},
     ": pads are larger than the output: output spatial shape [-2, -2]"),
    ("conv_transpose", [T((1, 4, 2, 2)), T((4, 2, 3, 3))], {"output_padding": (1,)},
     ": output_padding [1] should have 2 non-negative entries"),
    # pooling
    ("max_pool", [T((1, 3, 8, 8))], {}, ": kernel_shape is required"),
    ("max_pool", [T((1, 3, 8, 8))], {"kernel_shape": (2, 2), "pads": (2, 0, 0, 0)},
     ": pads [2, 0, 0, 0] must be smaller than kernel_shape [2, 2]"),
    ("max_pool", [T((3, 8))], {"kernel_shape": (2,)}, ": input f32[3,8] must have rank >= 3 (N, C, spatial...)"),
    ("average_pool", [T((1, 3, 2, 2))], {"kernel_shape": (3, 3)}, ": window does not fit: output spatial shape [0, 0]"),
    ("global_average_pool", [T((3, 8))], {}, ": input f32[3,8] must have rank >= 3 (N, C, spatial...)"),
    # normalization
    ("lrn", [T((1, 3, 4, 4))], {"size": 0}, ": size=0 must be positive"),
    ("lrn", [T((1, 3, 4, 4))], {}, ": missing required attribute 'size'"),
    ("batch_norm", [T((2, 3, 4)), F, F, T((4,)), F], {}, ": mean f32[4] should have shape [3] (one per channel)"),
    ("batch_norm", [T((2, 3, 4)), F, F, F, T((3,), "float64")], {}, ": inputs have different dtypes: float32, float64"),
    ("batch_norm_train", [T((2, 3, 4)), F, T((2,))], {}, ": bias f32[2] should have shape [3] (one per channel)"),
    ("instance_norm", [T((2, 3)), F, F], {}, ": input f32[2,3] must have rank >= 3 (N, C, spatial...)"),
    ("layer_norm", [T((2, 3, 4)), F], {}, ": scale f32[3] does not broadcast to the normalized shape [4]"),
    ("layer_norm", [T((2, 3, 4)), T((4,))], {"axis": 3}, ": axis=3 is out of range for rank 3"),
    ("softmax", [T((2, 3))], {"axis": 2}, ": axis=2 is out of range for rank 2"),
    ("log_softmax", [T((2, 3), "int32")], {}, ": input must be a floating-point tensor, got int32"),
    # matrix products
    ("gemm", [T((2, 3)), T((4, 5))], {}, ": inner dimensions differ: op(a) is [2, 3], op(b) is [4, 5]"),
    ("gemm", [T((2, 3)), T((3, 5)), T((3, 5))], {}, ": c f32[3,5] does not broadcast to [2, 5]"),
    ("gemm", [T((2, 3, 1)), T((3, 5))], {}, ": a f32[2,3,1] and b f32[3,5] must be matrices"),
    ("gemm", [T((3, 2)), T((3, 5))], {"trans_a": 2}, ": trans_a=2 should be 0 or 1"),
    ("matmul", [T((2, 3)), T((4, 5))], {},
     ": inner dimensions differ: a f32[2,3] has 3 columns, b f32[4,5] has 4 rows"),
    ("matmul", [T((2, 2, 3)), T((3, 3, 5))], {}, ": batch dimensions [2] and [3] do not broadcast"),
    ("matmul", [T(()), F], {}, ": operands must have rank >= 1, got f32[] and f32[3]"),
    ("matmul", [T((2, 3)), T((3, 5), "float64")], {}, ": inputs have different dtypes: float32, float64"),
    # relabeling
    ("reshape", [T((2, 3))], {"shape": (4, 2)}, ": cannot reshape [2, 3] (6 elements) to [4, 2] (8 elements)"),
    ("reshape", [T((2, 3))], {"shape": (-1, -1)}, ": shape [-1, -1] has more than one -1"),
    ("reshape", [T((2, 3))], {"shape": (4, -1)}, ": cannot reshape [2, 3] to [4, -1]"),
    ("transpose", [T((2, 3))], {"perm": (0, 0)}, ": perm [0, 0] is not a permutation of 2 axes"),
    ("flatten", [T((2, 3))], {"axis": 3}, ": axis=3 is out of range for rank 2"),
    ("squeeze", [T((2, 1))], {"axes": (0,)}, ": cannot squeeze axis 0 of f32[2,1]: its size is not 1"),
    ("squeeze", [T((2, 1))], {"axes": (2,)}, ": axes=2 is out of range for rank 2"),
    ("unsqueeze", [T((2, 3))], {"axes": (0, 0)}, ": axes [0, 0] repeat an axis"),
    ("unsqueeze", [T((2, 3))], {"axes": (3,)}, ": axes=3 is out of range for rank 3"),
    # slabs, boxes, copies
    ("concat", [T((2, 3)), T((2, 3, 1))], {"axis": 0}, ": input 1 f32[2,3,1] has rank 3, input 0 f32[2,3] has rank 2"),
    ("concat", [T((2, 3)), T((3, 3))], {"axis": 1},
     ": input 1 f32[3,3] differs from input 0 f32[2,3] off the concat axis 1"),
    ("concat", [T((2, 3)), T((2, 3), "int64")], {"axis": 0}, ": inputs have different dtypes: float32, int64"),
    ("concat", [T(())], {"axis": 0}, ": inputs must have rank >= 1"),
    ("split", [T((6,))], {"split": (2, 3)}, ": split [2, 3] sums to 5, but axis 0 of f32[6] has 6"),
    ("split", [T((6,))], {"split": (7, -1)}, ": split [7, -1] has a negative size"),
    ("split", [T((6,))], {"split": ()}, ": split must list at least one size"),
    ("slice", [T((6,))], {"starts": (0,), "ends": (2, 3)},
     ": starts, ends, axes and steps have different lengths (1, 2, 1, 1)"),
    ("slice", [T((6,))], {"starts": (0,), "ends": (2,), "steps": (0,)}, ": steps [0] contain 0"),
    ("slice", [T((6, 4))], {"starts": (0, 0), "ends": (2, 2), "axes": (1, -1)}, ": axes [1, -1] repeat axis 1"),
    ("slice", [T((6, 4))], {"starts": (0,), "ends": (2,), "axes": (2,)}, ": axes=2 is out of range for rank 2"),
    ("expand", [T((2, 3))], {"shape": (4,)}, ": shapes [2, 3], [4] do not broadcast"),
    ("expand", [T((2, 3))], {"shape": (-1, 3)}, ": shape [-1, 3] has a negative dimension"),
    ("tile", [T((2, 3))], {"repeats": (2,)}, ": repeats [2] should have one entry per axis of f32[2,3]"),
    ("tile", [T((2, 3))], {"repeats": (2, -1)}, ": repeats [2, -1] has a negative entry"),
    ("pad", [T((2, 3))], {"pads": (1, 1)}, ": pads [1, 1] should have 4 entries (begins, then ends) for f32[2,3]"),
    ("pad", [T((2, 3))], {"pads": (0, 3, 0, 0), "mode": "reflect"},
     ": reflect pads [0, 3, 0, 0] must be smaller than axis 1 (3 cells)"),
    ("pad", [T((2, 3))], {"pads": (0, 0, 0, 0), "mode": "mirror"},
     ": mode='mirror' should be one of constant, reflect, edge, wrap"),
    ("pad", [T((2, 3))], {"pads": (-2, 0, -1, 0)}, ": pads [-2, 0, -1, 0] crop more than axis 0 of f32[2,3] holds"),
    ("pad", [T((2, 0))], {"pads": (0, 1, 0, 0), "mode": "edge"},
     ": mode 'edge' cannot pad axis 1 of f32[2,0]: no cells are left to copy"),
    ("gather", [T((5, 3)), T((2,))], {}, ": indices must be int64 or int32, got float32"),
    ("gather", [T((5, 3)), T((2,), "int64")], {"axis": 2}, ": axis=2 is out of range for rank 2"),
    ("gather", [T(()), T((2,), "int64")], {}, ": data must have rank >= 1"),
    ("gather_elements", [T((5, 3)), T((2, 3), "int32")], {"axis": 2}, ": axis=2 is out of range for rank 2"),
    ("gather_elements", [T((5, 3)), T((2,), "int64")], {},
     ": data and indices must have the same rank >= 1, got 2 and 1"),
    ("gather_elements", [T((5, 3)), T((2, 4), "int64")], {}, ": indices dim 1 is 4, larger than data's 3"),
    ("gather_elements", [T((5, 3)), T((2, 3))], {}, ": indices must be int64 or int32, got float32"),
    ("gather_nd", [T((5, 3)), T((2, 1), "int32")], {}, ": indices must be int64, got int32"),
    ("gather_nd", [T((5, 3)), T((2, 3), "int64")], {}, ": index tuples have 3 entries; data has 2 axes past the "
                                                       "batch dims"),
    ("gather_nd", [T((5, 3)), T((5, 1), "int64")], {"batch_dims": 2},
     ": batch_dims=2 must be below both ranks (2 and 2)"),
    ("gather_nd", [T((5, 3)), T((4, 1), "int64")], {"batch_dims": 1},
     ": the batch dims of data [5] and indices [4] differ"),
    # position-dependent ops and reductions to a place
    ("trilu", [T((5,))], {}, ": input must have rank >= 2, got 1"),
    ("trilu", [T((5, 3)), T((2,), "int64")], {}, ": k must be one int64, got i64[2]"),
    ("cumsum", [T((5, 3))], {"axis": 2}, ": axis=2 is out of range for rank 2"),
    ("cumsum", [T((5,), "bool")], {}, ": cumsum needs a numeric input, got bool"),
    ("index_of", [T((5, 3)), T((5, 3))], {"axis": 1}, ": target must be f32[5,1] (x with axis 1 reduced), got "
                                                      "f32[5,3]"),
    ("index_of", [T((5, 0)), T((5, 1))], {"axis": 1}, ": axis 1 is empty: no element to find"),
    # elementwise ops with rules of their own
    ("is_nan", [T((2,), "int64")], {}, ": input must be a floating-point tensor, got int64"),
    ("is_inf", [T((2,), "int32")], {}, ": input must be a floating-point tensor, got int32"),
    ("remainder", [T((2,), "bool"), T((2,), "bool")], {}, ": remainder needs numeric inputs, got bool"),
    ("remainder", [T((2,)), T((2,))], {"fmod": 2}, ": fmod=2 should be 0 or 1"),
    ("remainder", [T((2,)), T((2,), "int64")], {}, ": inputs have different dtypes: float32, int64"),
    ("shrink", [T((2,), "bool")], {}, ": shrink needs a numeric input, got bool"),
    ("mish", [T((2,), "int64")], {}, ": input must be a floating-point tensor, got int64"),
    ("bitwise_and", [T((2,)), T((2,))], {}, ": bitwise ops need integer inputs, got float32"),
    ("bitwise_or", [T((2,), "int8"), T((2,), "uint8")], {}, ": inputs have different dtypes: int8, uint8"),
    ("bitwise_not", [T((2,), "bool")], {}, ": bitwise ops need integer inputs, got bool"),
    ("acos", [T((2,), "int32")], {}, ": input must be a floating-point tensor, got int32"),
    ("round", [T((2,), "int64")], {}, ": input must be a floating-point tensor, got int64"),
    # normalizations opened by std/normalize.fuse
    ("group_norm", [T((2, 6, 3)), T((6,)), T((6,))], {"num_groups": 4},
     ": num_groups=4 must be positive and divide the 6 channels"),
    ("group_norm", [T((2, 6, 3)), T((3,)), T((6,))], {"num_groups": 3},
     ": scale f32[3] should have shape [6] (one per channel)"),
    ("group_norm", [T((6,)), T((6,)), T((6,))], {"num_groups": 3}, ": input f32[6] must have rank >= 2 (N, C, ...)"),
    ("mean_variance_norm", [T((2, 3))], {"axes": (1, -1)}, ": axes [1, -1] repeat an axis"),
    ("mean_variance_norm", [T((2, 3))], {"axes": (2,)}, ": axes=2 is out of range for rank 2"),
    ("lp_norm", [T((2, 3))], {"p": 3}, ": p=3 should be 1 or 2"),
    ("lp_norm", [T((2, 3), "int32")], {}, ": input must be a floating-point tensor, got int32"),
    # resize: the tables need one size and scale per axis, a known mode, cells to read
    ("resize", [T((2, 3))], {"sizes": (4,), "scales": (2.0,)}, ": sizes [4] and scales [2.0] should have one entry "
                                                                "per axis of f32[2,3]"),
    ("resize", [T((2, 3))], {"sizes": (2, 6), "scales": (1.0, 0.0)}, ": sizes [2, 6] must be >= 0 and scales "
                                                                     "[1.0, 0.0] > 0"),
    ("resize", [T((2, 3))], {"sizes": (2, 6), "scales": (1.0, 2.0), "nearest_mode": "round"},
     ": nearest_mode='round' should be one of round_prefer_floor, round_prefer_ceil, floor, ceil"),
    ("resize", [T((2, 0))], {"sizes": (2, 3), "scales": (1.0, 2.0)}, ": cannot resize the empty f32[2,0] to [2, 3]: "
                                                                     "there is nothing to interpolate"),
    ("resize", [T((2, 3))], {"sizes": (2, 6), "scales": (1.0, 2.0), "coordinate_transformation_mode":
                             "tf_crop_and_resize"},
     ": tf_crop_and_resize needs roi with 4 entries (starts, then ends), got []"),
    ("resize", [T((2, 3), "int64")], {"sizes": (2, 6), "scales": (1.0, 2.0), "mode": "linear"},
     ": input must be a floating-point tensor, got int64"),
    # shape-valued ops
    ("constant_of_shape", [T((2,), "int64")], {}, ": input 0 must be a constant (its value decides the output shape)"),
    ("constant_of_shape", [], {}, ": the shape is missing: give a shape input or a `shape` attribute"),
    ("constant_of_shape", [], {"shape": (2,), "value": np.zeros(2)}, ": value must hold one element, got shape [2]"),
    ("constant_of_shape", [], {"shape": (2, -1)}, ": shape [2, -1] has a negative dimension"),
]


@pytest.mark.parametrize("op, types, attrs, message", REJECTED,
                         ids=[f"{r[0]}:{r[3][2:40]}" for r in REJECTED])
def test_inference_rejects_with_a_pinned_message(op, types, attrs, message):
    with pytest.raises(ShapeError, match="^" + re.escape(f"node 'n1' ({op})" + message) + "$"):
        REGISTRY.infer(op, "n1", attrs, types)


def test_constant_shape_input_needs_one_source():
    shape = np.array([2, 3])
    with pytest.raises(ShapeError, match=re.escape("give the shape as an input or as an attribute, not both")):
        REGISTRY.infer("constant_of_shape", "n1", {"shape": (2, 3)}, [TensorType.of(shape)], [shape])


def test_unknown_op_is_named():
    with pytest.raises(UnsupportedOpError, match="^" + re.escape("node 'n1': unknown op 'bogus_op'") + "$"):
        REGISTRY.infer("bogus_op", "n1", {}, [F])


def test_every_op_family_has_a_rejection():
    families = {op for op, *_ in REJECTED}
    for required in ("conv", "conv_transpose", "max_pool", "average_pool", "batch_norm", "layer_norm", "softmax",
                     "gemm", "matmul", "reshape", "concat", "split", "slice", "pad", "gather", "expand", "tile",
                     "gather_elements", "gather_nd", "trilu", "cumsum", "index_of", "is_nan", "is_inf", "remainder",
                     "shrink", "mish", "resize", "bitwise_and", "bitwise_not", "round",
                     "group_norm", "mean_variance_norm", "lp_norm"):
        assert required in families


def test_gather_reference_reports_an_out_of_range_index():
    with pytest.raises(IndexError, match=re.escape("index 7 is out of range for axis 0 of size 5")):
        REGISTRY.get("gather").reference([np.zeros(5, np.float32), np.array([1, 7])], {"axis": 0})


def test_indexed_reads_report_an_out_of_range_index():
    data = np.zeros((2, 5), np.float32)
    with pytest.raises(IndexError, match=re.escape("index -6 is out of range for axis 1 of size 5")):
        REGISTRY.get("gather_elements").reference([data, np.array([[1, -6]])], {"axis": 1})
    with pytest.raises(IndexError, match=re.escape("index 2 is out of range for axis 0 of size 2")):
        REGISTRY.get("gather_nd").reference([data, np.array([[1, 4], [2, 0]])], {"batch_dims": 0})
    with pytest.raises(IndexError, match=re.escape("index 5 is out of range for axis 1 of size 5")):
        REGISTRY.get("gather_nd").reference([data, np.array([[5], [0]])], {"batch_dims": 1})
