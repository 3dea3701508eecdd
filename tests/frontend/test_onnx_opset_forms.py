"""Each legacy or alternative ONNX form, imported and run by the interpreter.

Compared with onnxruntime where it runs that opset, and with a NumPy expectation where
one is given (always for the opset-6 forms onnxruntime no longer implements: legacy
``broadcast``/``axis`` arithmetic and Gemm, BatchNormalization-6, per-channel PRelu-6).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from fusionlang.frontend import from_onnx
from onnx_cases import F32, I64, make_model, random_array, run_fusionlang, run_onnxruntime

#: forms onnxruntime cannot run: it has no kernels for Add/Sub/Mul/Div/Gemm/PRelu/
#: BatchNormalization-6 or Pow/And/Or/Xor-1 (the opset-6 broadcast forms), and refuses
#: training-mode BatchNormalization with a single output. Every other case is compared
#: with onnxruntime, and with its NumPy expectation too when it has one.
ORT_LACKS = {
    "Add6-broadcast-axis1", "Sub6-broadcast-axis1", "Mul6-broadcast-axis1", "Div6-broadcast-axis1",
    "Add6-broadcast-suffix", "Mul6-broadcast-scalar", "Add6-broadcast-size1-dims", "Add6-same-shape",
    "Pow6-broadcast-axis0", "And6-broadcast-suffix", "Or6-broadcast-suffix", "Xor6-broadcast-suffix",
    "Gemm6-broadcast-C-transA-transB", "Gemm6-full-C", "BatchNormalization6-is_test",
    "BatchNormalization6-one-output-is_test-0", "BatchNormalization15-training_mode-1", "PRelu6-per-channel-slope",
}


@dataclass
class Case:
    id: str
    model: object
    feeds: dict
    #: a function of the feeds giving the expected outputs, checked when given
    numpy: Callable | None = None
    #: ops (fusionlang names) the imported graph must consist of, in order, when given
    ops: list | None = None
    #: a known defect outside the frontend that makes this case fail (strict xfail)
    defect: str | None = None


#: fusionlang.ir.Graph.add_constant stores 0-d arrays as shape [1] (np.ascontiguousarray
#: returns ndim >= 1), so scalar constants change shape; owned by fusionlang/ir


def x(shape, seed=0):
    return random_array(shape, seed)


def node(op_type, inputs, outputs, **attrs):
    return helper.make_node(op_type, inputs, outputs, **attrs)


def softmax_2d(v, axis, log=False):
    rows = v.reshape(int(np.prod(v.shape[:axis])), -1)
    e = np.exp(rows - rows.max(axis=1, keepdims=True))
    out = e / e.sum(axis=1, keepdims=True)
    return (np.log(out) if log else out).reshape(v.shape)


CASES: list[Case] = []


def case(*args, **kw):
    CASES.append(Case(*args, **kw))


# ----- opset-6 broadcast/axis arithmetic ----------------------------------------------
A, B3, B34, B1 = x([2, 3, 4]), x([3], 1), x([3, 4], 2), x([1], 3)
for op_type, fn in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Div", np.divide)):
    case(f"{op_type}6-broadcast-axis1",
         make_model([node(op_type, ["a", "b"], ["y"], broadcast=1, axis=1)], {"a": [2, 3, 4], "b": [3]}, {"y": None}, 6),
         {"a": A, "b": B3}, lambda f, fn=fn: [fn(f["a"], f["b"][None, :, None])])
case("Add6-broadcast-suffix",
     make_model([node("Add", ["a", "b"], ["y"], broadcast=1)], {"a": [2, 3, 4], "b": [3, 4]}, {"y": None}, 6),
     {"a": A, "b": B34}, lambda f: [f["a"] + f["b"]], ops=["add"])
case("Mul6-broadcast-scalar",
     make_model([node("Mul", ["a", "b"], ["y"], broadcast=1, axis=0)], {"a": [2, 3, 4], "b": [1]}, {"y": None}, 6),
     {"a": A, "b": B1}, lambda f: [f["a"] * f["b"]])
case("Add6-broadcast-size1-dims",
     make_model([node("Add", ["a", "b"], ["y"], broadcast=1, axis=0)], {"a": [2, 3, 4], "b": [2, 1]}, {"y": None}, 6),
     {"a": A, "b": x([2, 1], 4)}, lambda f: [f["a"] + f["b"][:, :, None]])
case("Add6-same-shape",
     make_model([node("Add", ["a", "b"], ["y"])], {"a": [2, 3, 4], "b": [2, 3, 4]}, {"y": None}, 6),
     {"a": A, "b": x([2, 3, 4], 5)}, lambda f: [f["a"] + f["b"]])
case("Pow6-broadcast-axis0",
     make_model([node("Pow", ["a", "b"], ["y"], broadcast=1, axis=0)], {"a": [2, 3, 4], "b": [2]}, {"y": None}, 6),
     {"a": np.abs(A) + 0.5, "b": np.array([2.0, 0.5], np.float32)},
     lambda f: [np.power(f["a"], f["b"][:, None, None])])
case("Add7-numpy-broadcast",
     make_model([node("Add", ["a", "b"], ["y"])], {"a": [2, 3, 4], "b": [3, 1]}, {"y": None}, 7),
     {"a": A, "b": x([3, 1], 6)})

BOOL = TensorProto.BOOL
P, Q = random_array([2, 3]) > 0, random_array([3], 1) > 0
for op_type, fn in (("And", np.logical_and), ("Or", np.logical_or), ("Xor", np.logical_xor)):
    case(f"{op_type}6-broadcast-suffix",
         make_model([node(op_type, ["a", "b"], ["y"], broadcast=1)], {"a": ([2, 3], BOOL), "b": ([3], BOOL)},
                    {"y": ([2, 3], BOOL)}, 6), {"a": P, "b": Q}, lambda f, fn=fn: [fn(f["a"], f["b"])])
    case(f"{op_type}7-numpy-broadcast",
         make_model([node(op_type, ["a", "b"], ["y"])], {"a": ([2, 3], BOOL), "b": ([3], BOOL)},
                    {"y": ([2, 3], BOOL)}, 7), {"a": P, "b": Q})
case("Not", make_model([node("Not", ["a"], ["y"])], {"a": ([2, 3], BOOL)}, {"y": ([2, 3], BOOL)}, 9), {"a": P})

# ----- Gemm ---------------------------------------------------------------------------
GA, GB, GC = x([4, 3]), x([5, 4], 1), x([5], 2)
case("Gemm6-broadcast-C-transA-transB",
     make_model([node("Gemm", ["a", "b", "c"], ["y"], broadcast=1, transA=1, transB=1, alpha=0.5, beta=2.0)],
                {"a": [4, 3], "b": [5, 4], "c": [5]}, {"y": None}, 6),
     {"a": GA, "b": GB, "c": GC}, lambda f: [0.5 * f["a"].T @ f["b"].T + 2.0 * f["c"]], ops=["gemm"])
case("Gemm6-full-C",
     make_model([node("Gemm", ["a", "b", "c"], ["y"])], {"a": [3, 4], "b": [4, 5], "c": [3, 5]}, {"y": None}, 6),
     {"a": x([3, 4]), "b": x([4, 5], 1), "c": x([3, 5], 2)}, lambda f: [f["a"] @ f["b"] + f["c"]])
for opset in (7, 9, 11, 13):
    case(f"Gemm{opset}-transB-alpha",
         make_model([node("Gemm", ["a", "b", "c"], ["y"], transB=1, alpha=1.5, beta=0.25)],
                    {"a": [4, 3], "b": [5, 3], "c": [1, 5]}, {"y": None}, opset),
         {"a": x([4, 3]), "b": x([5, 3], 1), "c": x([1, 5], 2)})
case("Gemm11-no-C-transA",
     make_model([node("Gemm", ["a", "b"], ["y"], transA=1)], {"a": [3, 4], "b": [3, 5]}, {"y": None}, 11),
     {"a": x([3, 4]), "b": x([3, 5], 1)})

# ----- Softmax / LogSoftmax -----------------------------------------------------------
SX = x([2, 3, 4])
for op_type, log in (("Softmax", False), ("LogSoftmax", True)):
    for opset in (6, 11):
        case(f"{op_type}{opset}-axis1-coerced-2d",
             make_model([node(op_type, ["x"], ["y"], axis=1)], {"x": [2, 3, 4]}, {"y": None}, opset),
             {"x": SX}, lambda f, log=log: [softmax_2d(f["x"], 1, log)])
    case(f"{op_type}11-default-axis",
         make_model([node(op_type, ["x"], ["y"])], {"x": [2, 3, 4]}, {"y": None}, 11), {"x": SX})
    case(f"{op_type}11-axis0",
         make_model([node(op_type, ["x"], ["y"], axis=0)], {"x": [2, 3, 4]}, {"y": None}, 11), {"x": SX})
    case(f"{op_type}13-axis1-per-axis",
         make_model([node(op_type, ["x"], ["y"], axis=1)], {"x": [2, 3, 4]}, {"y": None}, 13), {"x": SX})
    case(f"{op_type}13-default-axis",
         make_model([node(op_type, ["x"], ["y"])], {"x": [2, 3, 4]}, {"y": None}, 13), {"x": SX})
case("Softmax11-last-axis-single-node",
     make_model([node("Softmax", ["x"], ["y"], axis=2)], {"x": [2, 3, 4]}, {"y": None}, 11), {"x": SX},
     ops=["softmax"])
case("Softmax9-trailing-ones-single-node",
     make_model([node("Softmax", ["x"], ["y"], axis=1)], {"x": [2, 5, 1, 1]}, {"y": None}, 9), {"x": x([2, 5, 1, 1])},
     ops=["softmax"])
case("Softmax11-coerced-is-reshape-softmax-reshape",
     make_model([node("Softmax", ["x"], ["y"], axis=1)], {"x": [2, 3, 4]}, {"y": None}, 11), {"x": SX},
     ops=["reshape", "softmax", "reshape"])

# ----- reductions ---------------------------------------------------------------------
RX = x([2, 3, 4])
for op_type in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"):
    case(f"{op_type}11-axes-attr",
         make_model([node(op_type, ["x"], ["y"], axes=[0, 2], keepdims=0)], {"x": [2, 3, 4]}, {"y": None}, 11),
         {"x": RX})
    case(f"{op_type}11-all-axes-keepdims",
         make_model([node(op_type, ["x"], ["y"])], {"x": [2, 3, 4]}, {"y": None}, 11), {"x": RX})
    case(f"{op_type}18-axes-input",
         make_model([node(op_type, ["x", "axes"], ["y"], keepdims=1)], {"x": [2, 3, 4]}, {"y": None}, 18,
                    {"axes": np.array([-1], np.int64)}), {"x": RX})
case("ReduceSum13-axes-input",
     make_model([node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)], {"x": [2, 3, 4]}, {"y": None}, 13,
                {"axes": np.array([1], np.int64)}), {"x": RX})
case("ReduceSum13-no-axes-noop",
     make_model([node("ReduceSum", ["x"], ["y"], noop_with_empty_axes=1)], {"x": [2, 3, 4]}, {"y": None}, 13),
     {"x": RX})
case("ReduceMean13-axes-attr",
     make_model([node("ReduceMean", ["x"], ["y"], axes=[1])], {"x": [2, 3, 4]}, {"y": None}, 13), {"x": RX})
for op_type in ("ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"):
    case(f"{op_type}11-axes-attr",
         make_model([node(op_type, ["x"], ["y"], axes=[1], keepdims=0)], {"x": [2, 3, 4]}, {"y": None}, 11),
         {"x": np.abs(RX) + 0.1})
    case(f"{op_type}18-axes-input",
         make_model([node(op_type, ["x", "axes"], ["y"])], {"x": [2, 3, 4]}, {"y": None}, 18,
                    {"axes": np.array([0, 2], np.int64)}), {"x": np.abs(RX) + 0.1})

# ----- squeeze / unsqueeze ------------------------------------------------------------
QX = x([3, 1, 4, 1])
case("Squeeze11-axes-attr",
     make_model([node("Squeeze", ["x"], ["y"], axes=[1])], {"x": [3, 1, 4, 1]}, {"y": None}, 11), {"x": QX})
case("Squeeze11-all", make_model([node("Squeeze", ["x"], ["y"])], {"x": [3, 1, 4, 1]}, {"y": None}, 11), {"x": QX})
case("Squeeze13-axes-input",
     make_model([node("Squeeze", ["x", "axes"], ["y"])], {"x": [3, 1, 4, 1]}, {"y": None}, 13,
                {"axes": np.array([-1], np.int64)}), {"x": QX})
case("Squeeze13-no-axes", make_model([node("Squeeze", ["x"], ["y"])], {"x": [3, 1, 4, 1]}, {"y": None}, 13),
     {"x": QX})
case("Unsqueeze11-axes-attr",
     make_model([node("Unsqueeze", ["x"], ["y"], axes=[0, 3])], {"x": [3, 4]}, {"y": None}, 11), {"x": x([3, 4])})
case("Unsqueeze13-axes-input",
     make_model([node("Unsqueeze", ["x", "axes"], ["y"])], {"x": [3, 4]}, {"y": None}, 13,
                {"axes": np.array([1, -1], np.int64)}), {"x": x([3, 4])})

# ----- split --------------------------------------------------------------------------
PX = x([2, 7])
case("Split11-split-attr",
     make_model([node("Split", ["x"], ["a", "b"], axis=1, split=[3, 4])], {"x": [2, 7]}, {"a": None, "b": None}, 11),
     {"x": PX})
case("Split11-equal",
     make_model([node("Split", ["x"], ["a", "b"], axis=0)], {"x": [2, 7]}, {"a": None, "b": None}, 11), {"x": PX})
case("Split13-split-input",
     make_model([node("Split", ["x", "s"], ["a", "b", "c"], axis=-1)], {"x": [2, 7]},
                {"a": None, "b": None, "c": None}, 13, {"s": np.array([1, 2, 4], np.int64)}), {"x": PX})
case("Split18-num-outputs-uneven",
     make_model([node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3)], {"x": [2, 7]},
                {"a": None, "b": None, "c": None}, 18), {"x": PX})
case("Split6-split-attr",
     make_model([node("Split", ["x"], ["a", "b"], axis=1, split=[5, 2])], {"x": [2, 7]}, {"a": None, "b": None}, 6),
     {"x": PX}, lambda f: [f["x"][:, :5], f["x"][:, 5:]])

# ----- slice --------------------------------------------------------------------------
LX = x([5, 6, 4])
case("Slice9-attrs",
     make_model([node("Slice", ["x"], ["y"], starts=[1, -3], ends=[4, 1000], axes=[0, 1])], {"x": [5, 6, 4]},
                {"y": None}, 9), {"x": LX})
case("Slice9-attrs-no-axes",
     make_model([node("Slice", ["x"], ["y"], starts=[0, 1], ends=[2, -1])], {"x": [5, 6, 4]}, {"y": None}, 9),
     {"x": LX})
case("Slice10-inputs-steps",
     make_model([node("Slice", ["x", "s", "e", "a", "t"], ["y"])], {"x": [5, 6, 4]}, {"y": None}, 10,
                {"s": np.array([4, 0], np.int64), "e": np.array([-6, 6], np.int64),
                 "a": np.array([0, 2], np.int64), "t": np.array([-2, 3], np.int64)}), {"x": LX})
case("Slice13-starts-ends-only",
     make_model([node("Slice", ["x", "s", "e"], ["y"])], {"x": [5, 6, 4]}, {"y": None}, 13,
                {"s": np.array([1, 2], np.int64), "e": np.array([3, np.iinfo(np.int64).max], np.int64)}), {"x": LX})

# ----- clip ---------------------------------------------------------------------------
CX = x([3, 4])
case("Clip6-attrs",
     make_model([node("Clip", ["x"], ["y"], min=-0.5, max=0.25)], {"x": [3, 4]}, {"y": None}, 6), {"x": CX})
case("Clip6-max-only",
     make_model([node("Clip", ["x"], ["y"], max=0.1)], {"x": [3, 4]}, {"y": None}, 6), {"x": CX})
case("Clip11-inputs",
     make_model([node("Clip", ["x", "lo", "hi"], ["y"])], {"x": [3, 4]}, {"y": None}, 11,
                {"lo": np.array(-0.3, np.float32), "hi": np.array(0.6, np.float32)}), {"x": CX})
case("Clip11-min-only",
     make_model([node("Clip", ["x", "lo"], ["y"])], {"x": [3, 4]}, {"y": None}, 11,
                {"lo": np.array(0.0, np.float32)}), {"x": CX})
case("Clip12-int64-max-only",
     make_model([node("Clip", ["x", "", "hi"], ["y"])], {"x": ([3, 4], I64)}, {"y": ([3, 4], I64)}, 12,
                {"hi": np.array(3, np.int64)}), {"x": np.arange(-6, 6, dtype=np.int64).reshape(3, 4)})

# ----- pad ----------------------------------------------------------------------------
DX = x([1, 2, 3, 4])
for mode in ("constant", "reflect", "edge"):
    case(f"Pad6-attrs-{mode}",
         make_model([node("Pad", ["x"], ["y"], mode=mode, pads=[0, 0, 1, 2, 0, 0, 2, 1],
                          **({"value": 1.5} if mode == "constant" else {}))], {"x": [1, 2, 3, 4]}, {"y": None}, 6),
         {"x": DX})
    case(f"Pad11-inputs-{mode}",
         make_model([node("Pad", ["x", "p", "v"] if mode == "constant" else ["x", "p"], ["y"], mode=mode)],
                    {"x": [1, 2, 3, 4]}, {"y": None}, 11,
                    {"p": np.array([0, 0, 2, 1, 0, 0, 1, 2], np.int64), "v": np.array(-2.0, np.float32)}),
         {"x": DX})
case("Pad18-axes",
     make_model([node("Pad", ["x", "p", "", "a"], ["y"])], {"x": [1, 2, 3, 4]}, {"y": None}, 18,
                {"p": np.array([1, 0, 2, 3], np.int64), "a": np.array([-1, 2], np.int64)}), {"x": DX})

# ----- tensor-valued shapes (Reshape/Expand/Tile), computed by constant subgraphs -----
HX = x([2, 3, 4])
case("Reshape-shape-from-Shape-Gather-Concat",
     make_model([node("Shape", ["x"], ["s"]),
                 node("Gather", ["s", "i0"], ["d0"], axis=0),
                 node("Concat", ["d0", "m1"], ["target"], axis=0),
                 node("Reshape", ["x", "target"], ["y"])],
                {"x": [2, 3, 4]}, {"y": None}, 11,
                {"i0": np.array([0], np.int64), "m1": np.array([-1], np.int64)}), {"x": HX}, ops=["reshape"])
case("Reshape14-allowzero-0",
     make_model([node("Reshape", ["x", "s"], ["y"])], {"x": [2, 3, 4]}, {"y": None}, 14,
                {"s": np.array([0, 12], np.int64)}), {"x": HX})
case("Expand-shape-input",
     make_model([node("Expand", ["x", "s"], ["y"])], {"x": [3, 1]}, {"y": None}, 9,
                {"s": np.array([2, 3, 4], np.int64)}), {"x": x([3, 1])})
case("Tile-repeats-input",
     make_model([node("Tile", ["x", "r"], ["y"])], {"x": [2, 3]}, {"y": None}, 6,
                {"r": np.array([2, 3], np.int64)}), {"x": x([2, 3])})
case("Tile-repeats-from-Constant",
     make_model([node("Constant", [], ["r"], value=numpy_helper.from_array(np.array([1, 2], np.int64))),
                 node("Tile", ["x", "r"], ["y"])], {"x": [2, 3]}, {"y": None}, 9), {"x": x([2, 3])})

# ----- auto_pad on windows ------------------------------------------------------------
WX, WW = x([1, 2, 7, 6]), x([3, 2, 3, 2], 1)
for auto_pad in ("SAME_UPPER", "SAME_LOWER", "VALID"):
    case(f"Conv11-{auto_pad}",
         make_model([node("Conv", ["x", "w"], ["y"], auto_pad=auto_pad, strides=[2, 2])], {"x": [1, 2, 7, 6]},
                    {"y": None}, 11, {"w": WW}), {"x": WX})
    case(f"MaxPool11-{auto_pad}",
         make_model([node("MaxPool", ["x"], ["y"], auto_pad=auto_pad, kernel_shape=[3, 2], strides=[2, 1])],
                    {"x": [1, 2, 7, 6]}, {"y": None}, 11), {"x": WX})
    case(f"AveragePool11-{auto_pad}",
         make_model([node("AveragePool", ["x"], ["y"], auto_pad=auto_pad, kernel_shape=[2, 3], strides=[2, 2])],
                    {"x": [1, 2, 7, 6]}, {"y": None}, 11), {"x": WX})
case("Conv6-pads-dilations-group",
     make_model([node("Conv", ["x", "w", "b"], ["y"], pads=[1, 0, 2, 1], dilations=[2, 1], group=2)],
                {"x": [1, 4, 7, 6]}, {"y": None}, 7, {"w": x([4, 2, 3, 2], 1), "b": x([4], 2)}), {"x": x([1, 4, 7, 6])})
case("AveragePool10-ceil-count-include-pad",
     make_model([node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                      ceil_mode=1, count_include_pad=1)], {"x": [1, 2, 7, 6]}, {"y": None}, 10), {"x": WX})
case("MaxPool10-ceil-mode",
     make_model([node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)],
                {"x": [1, 2, 7, 6]}, {"y": None}, 10), {"x": WX})

# ----- ConvTranspose ------------------------------------------------------------------
TX, TW = x([1, 2, 3, 4]), x([2, 3, 3, 3], 1)
case("ConvTranspose11-explicit-pads-output-padding",
     make_model([node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 3], pads=[1, 0, 1, 1], output_padding=[1, 2])],
                {"x": [1, 2, 3, 4]}, {"y": None}, 11, {"w": TW}), {"x": TX})
case("ConvTranspose11-output-shape",
     make_model([node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], output_shape=[6, 8])],
                {"x": [1, 2, 3, 4]}, {"y": None}, 11, {"w": TW}), {"x": TX})
case("ConvTranspose11-output-shape-larger",
     make_model([node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[3, 2], output_shape=[10, 8])],
                {"x": [1, 2, 3, 3]}, {"y": None}, 11, {"w": TW, "b": x([3], 2)}), {"x": x([1, 2, 3, 3])})
case("ConvTranspose11-SAME_UPPER",
     make_model([node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], auto_pad="SAME_UPPER")],
                {"x": [1, 2, 3, 4]}, {"y": None}, 11, {"w": TW}), {"x": TX})
case("ConvTranspose11-group-dilation-bias",
     make_model([node("ConvTranspose", ["x", "w", "b"], ["y"], group=2, dilations=[2, 1], strides=[1, 2])],
                {"x": [1, 4, 3, 4]}, {"y": None}, 11, {"w": x([4, 1, 2, 3], 1), "b": x([2], 2)}),
     {"x": x([1, 4, 3, 4])})

# ----- BatchNormalization forms -------------------------------------------------------
NX = x([2, 3, 4, 5])
BN = {"s": x([3], 1), "b": x([3], 2), "m": x([3], 3), "v": np.abs(x([3], 4)) + 0.5}


def bn_expect(f, stats=BN, eps=1e-5):
    shape = (1, -1) + (1,) * (f["x"].ndim - 2)
    s, b, m, v = (stats[k].reshape(shape) for k in "sbmv")
    return [(f["x"] - m) / np.sqrt(v + eps) * s + b]


case("BatchNormalization6-is_test",
     make_model([node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], is_test=1, epsilon=1e-5)],
                {"x": [2, 3, 4, 5]}, {"y": None}, 6, BN), {"x": NX}, bn_expect, ops=["batch_norm"])
case("BatchNormalization6-one-output-is_test-0",
     make_model([node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])], {"x": [2, 3, 4, 5]}, {"y": None}, 6,
                BN), {"x": NX}, bn_expect)
PER_ACT = {"s": x([3, 4, 5], 1), "b": x([3, 4, 5], 2), "m": x([3, 4, 5], 3), "v": np.abs(x([3, 4, 5], 4)) + 0.5}
case("BatchNormalization7-spatial0-per-activation",
     make_model([node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], spatial=0, epsilon=1e-3)],
                {"x": [2, 3, 4, 5]}, {"y": None}, 7, PER_ACT), {"x": NX},
     lambda f: [(f["x"] - PER_ACT["m"]) / np.sqrt(PER_ACT["v"] + 1e-3) * PER_ACT["s"] + PER_ACT["b"]])
case("BatchNormalization7-spatial1",
     make_model([node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], spatial=1)], {"x": [2, 3, 4, 5]},
                {"y": None}, 7, BN), {"x": NX})
case("BatchNormalization9-inference",
     make_model([node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-2)], {"x": [2, 3, 4, 5]},
                {"y": None}, 9, BN), {"x": NX})
case("BatchNormalization15-training_mode-0",
     make_model([node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], training_mode=0)],
                {"x": [2, 3, 4, 5]}, {"y": None}, 15, BN), {"x": NX})


def bn_train_expect(f, eps=1e-5):
    mean = f["x"].mean(axis=(0, 2, 3), keepdims=True)
    var = f["x"].var(axis=(0, 2, 3), keepdims=True)
    return [(f["x"] - mean) / np.sqrt(var + eps) * BN["s"].reshape(1, -1, 1, 1) + BN["b"].reshape(1, -1, 1, 1)]


case("BatchNormalization15-training_mode-1",
     make_model([node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], training_mode=1)],
                {"x": [2, 3, 4, 5]}, {"y": None}, 15, BN), {"x": NX}, bn_train_expect, ops=["batch_norm_train"])

def bn_running_expect(f, momentum=0.8):
    axes = (0, 2, 3)
    return bn_train_expect(f) + [BN["m"] * momentum + f["x"].mean(axis=axes) * (1 - momentum),
                                 BN["v"] * momentum + f["x"].var(axis=axes) * (1 - momentum)]


case("BatchNormalization15-training_mode-running-statistics",
     make_model([node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], training_mode=1,
                      momentum=0.8)], {"x": [2, 3, 4, 5]}, {"y": None, "rm": None, "rv": None}, 15, BN),
     {"x": NX}, bn_running_expect)

# ----- other normalizations and nn ops ------------------------------------------------
case("InstanceNormalization6",
     make_model([node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-3)], {"x": [2, 3, 4, 5]},
                {"y": None}, 6, {"s": BN["s"], "b": BN["b"]}),
     {"x": NX}, lambda f: [(f["x"] - f["x"].mean(axis=(2, 3), keepdims=True))
                           / np.sqrt(f["x"].var(axis=(2, 3), keepdims=True) + 1e-3)
                           * BN["s"].reshape(1, -1, 1, 1) + BN["b"].reshape(1, -1, 1, 1)])
case("LayerNormalization17-axis",
     make_model([node("LayerNormalization", ["x", "s", "b"], ["y"], axis=2, epsilon=1e-4)], {"x": [2, 3, 4, 5]},
                {"y": None}, 17, {"s": x([4, 5], 1), "b": x([4, 5], 2)}), {"x": NX})
case("LayerNormalization17-mean-and-inv-std-dev-outputs",
     make_model([node("LayerNormalization", ["x", "s", "b"], ["y", "mean", "inv_std"], axis=1, epsilon=1e-3)],
                {"x": [2, 3, 4, 5]}, {"y": None, "mean": None, "inv_std": None}, 17,
                {"s": x([3, 4, 5], 1), "b": x([3, 4, 5], 2)}), {"x": NX})
case("LayerNormalization17-no-bias",
     make_model([node("LayerNormalization", ["x", "s"], ["y"])], {"x": [2, 3, 4, 5]}, {"y": None}, 17,
                {"s": x([5], 1)}), {"x": NX})
case("GlobalAveragePool",
     make_model([node("GlobalAveragePool", ["x"], ["y"])], {"x": [2, 3, 4, 5]}, {"y": None}, 9), {"x": NX})
case("GlobalMaxPool",
     make_model([node("GlobalMaxPool", ["x"], ["y"])], {"x": [2, 3, 4, 5]}, {"y": None}, 9), {"x": NX})
case("LRN",
     make_model([node("LRN", ["x"], ["y"], size=3, alpha=1e-3, beta=0.6, bias=2.0)], {"x": [2, 3, 4, 5]},
                {"y": None}, 9), {"x": NX})
case("LRN-defaults",
     make_model([node("LRN", ["x"], ["y"], size=5)], {"x": [2, 6, 4, 5]}, {"y": None}, 13), {"x": x([2, 6, 4, 5])})
case("Flatten11-negative-axis",
     make_model([node("Flatten", ["x"], ["y"], axis=-2)], {"x": [2, 3, 4, 5]}, {"y": None}, 11), {"x": NX})
case("Concat-Gather-Where",
     make_model([node("Concat", ["a", "b"], ["c"], axis=1), node("Gather", ["c", "i"], ["g"], axis=1),
                 node("Greater", ["g", "z"], ["mask"]), node("Where", ["mask", "g", "z"], ["y"])],
                {"a": [2, 3], "b": [2, 2]}, {"y": None}, 11,
                {"i": np.array([[4, -1], [0, 2]], np.int64), "z": np.zeros((), np.float32)}),
     {"a": x([2, 3]), "b": x([2, 2], 1)})
case("MatMul-batched",
     make_model([node("MatMul", ["a", "b"], ["y"])], {"a": [2, 3, 4], "b": [4, 5]}, {"y": None}, 9),
     {"a": x([2, 3, 4]), "b": x([4, 5], 1)})
case("HardSwish14",
     make_model([node("HardSwish", ["x"], ["y"])], {"x": [3, 4]}, {"y": None}, 14), {"x": 4 * x([3, 4])})

# ----- constants, shapes, casts -------------------------------------------------------
for attr, value in (("value_float", 2.5), ("value_floats", [1.0, -2.0, 3.0]), ("value_int", 7),
                    ("value_ints", [1, 2, 3])):
    dtype = np.float32 if "float" in attr else np.int64
    case(f"Constant13-{attr}",
         make_model([node("Constant", [], ["c"], **{attr: value}), node("Identity", ["c"], ["y"])], {},
                    {"y": ([3] if attr.endswith("s") else [], TensorProto.FLOAT if dtype == np.float32 else I64)}, 13),
         {}, lambda f, value=value, dtype=dtype: [np.array(value, dtype)])
case("Constant9-value-tensor",
     make_model([node("Constant", [], ["c"], value=numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3))),
                 node("Add", ["x", "c"], ["y"])], {"x": [2, 3]}, {"y": None}, 9), {"x": x([2, 3])})
SPARSE = helper.make_sparse_tensor(numpy_helper.from_array(np.array([1.5, -2.0], np.float32), "v"),
                                   numpy_helper.from_array(np.array([1, 4], np.int64), "i"), [2, 3])
case("Constant11-sparse_value",
     make_model([node("Constant", [], ["c"], sparse_value=SPARSE), node("Add", ["x", "c"], ["y"])],
                {"x": [2, 3]}, {"y": None}, 11), {"x": x([2, 3])},
     lambda f: [f["x"] + np.array([[0, 1.5, 0], [0, -2.0, 0]], np.float32)])
case("ConstantOfShape-value-int",
     make_model([node("ConstantOfShape", ["s"], ["c"], value=numpy_helper.from_array(np.array([3], np.int64))),
                 node("Cast", ["c"], ["cf"], to=F32), node("Mul", ["x", "cf"], ["y"])],
                {"x": [2, 3]}, {"y": None}, 9, {"s": np.array([2, 3], np.int64)}), {"x": x([2, 3])})
case("ConstantOfShape-default-zero",
     make_model([node("ConstantOfShape", ["s"], ["c"]), node("Add", ["x", "c"], ["y"])],
                {"x": [2, 3]}, {"y": None}, 9, {"s": np.array([2, 3], np.int64)}), {"x": x([2, 3])})
case("Shape15-start-end",
     make_model([node("Shape", ["x"], ["y"], start=1, end=-1)], {"x": [2, 3, 4, 5]}, {"y": ([2], I64)}, 15),
     {"x": NX})
case("Shape9-folded", make_model([node("Shape", ["x"], ["y"])], {"x": [2, 3, 4, 5]}, {"y": ([4], I64)}, 9),
     {"x": NX}, ops=[])
case("Size", make_model([node("Size", ["x"], ["y"])], {"x": [2, 3, 4, 5]}, {"y": ([], I64)}, 13), {"x": NX})
case("Cast6-to-int64-and-back",
     make_model([node("Cast", ["x"], ["i"], to=I64), node("Cast", ["i"], ["y"], to=F32)], {"x": [3, 4]}, {"y": None}, 6),
     {"x": 5 * x([3, 4])}, lambda f: [f["x"].astype(np.int64).astype(np.float32)])
case("Cast13-bool",
     make_model([node("Cast", ["x"], ["y"], to=TensorProto.BOOL)], {"x": [3, 4]}, {"y": ([3, 4], TensorProto.BOOL)},
                13), {"x": np.round(x([3, 4]))})

case("CastLike15",
     make_model([node("CastLike", ["x", "like"], ["y"])], {"x": [3, 4], "like": ([1], I64)}, {"y": ([3, 4], I64)}, 15),
     {"x": 5 * x([3, 4]), "like": np.zeros(1, np.int64)})

# ----- Identity / Dropout removal -----------------------------------------------------
case("Identity-removed",
     make_model([node("Identity", ["x"], ["i"]), node("Relu", ["i"], ["y"])], {"x": [3, 4]}, {"y": None}, 13),
     {"x": x([3, 4])}, ops=["relu"])
case("Identity-graph-output-kept-by-name",
     make_model([node("Relu", ["x"], ["r"]), node("Identity", ["r"], ["y"])], {"x": [3, 4]}, {"y": None}, 13),
     {"x": x([3, 4])}, ops=["relu", "identity"])
case("Dropout6-is_test",
     make_model([node("Dropout", ["x"], ["d"], is_test=1, ratio=0.3), node("Relu", ["d"], ["y"])], {"x": [3, 4]},
                {"y": None}, 6), {"x": x([3, 4])}, lambda f: [np.maximum(f["x"], 0)], ops=["relu"])
case("Dropout10-unused-mask",
     make_model([node("Dropout", ["x"], ["d", "mask"]), node("Relu", ["d"], ["y"])], {"x": [3, 4]}, {"y": None}, 10),
     {"x": x([3, 4])}, ops=["relu"])
case("Dropout13-ratio-input",
     make_model([node("Dropout", ["x", "r"], ["d"]), node("Relu", ["d"], ["y"])], {"x": [3, 4]}, {"y": None}, 13,
                {"r": np.array(0.2, np.float32)}), {"x": x([3, 4])}, ops=["relu"])

# ----- variadic -----------------------------------------------------------------------
V = {"a": x([2, 3]), "b": x([2, 3], 1), "c": x([2, 3], 2)}
for op_type, fn in (("Sum", lambda a, b, c: a + b + c), ("Max", lambda *v: np.maximum.reduce(v)),
                    ("Min", lambda *v: np.minimum.reduce(v)), ("Mean", lambda a, b, c: (a + b + c) / 3)):
    case(f"{op_type}6-same-shapes",
         make_model([node(op_type, ["a", "b", "c"], ["y"])], {k: [2, 3] for k in V}, {"y": None}, 6), V,
         lambda f, fn=fn: [fn(f["a"], f["b"], f["c"])])
    case(f"{op_type}8-broadcast",
         make_model([node(op_type, ["a", "b", "c"], ["y"])], {"a": [2, 3], "b": [3], "c": [2, 1]}, {"y": None}, 8),
         {"a": V["a"], "b": x([3], 1), "c": x([2, 1], 2)})
    case(f"{op_type}13-single-input",
         make_model([node(op_type, ["a"], ["y"])], {"a": [2, 3]}, {"y": None}, 13), {"a": V["a"]})

# ----- PRelu --------------------------------------------------------------------------
case("PRelu6-per-channel-slope",
     make_model([node("PRelu", ["x", "s"], ["y"])], {"x": [2, 3, 4]}, {"y": None}, 6, {"s": np.array([0.1, 0.2, 0.3],
                                                                                                  np.float32)}),
     {"x": x([2, 3, 4])}, lambda f: [np.where(f["x"] >= 0, f["x"], f["x"] * np.array([0.1, 0.2, 0.3],
                                                                                     np.float32)[:, None])])
case("PRelu9-broadcast-slope",
     make_model([node("PRelu", ["x", "s"], ["y"])], {"x": [2, 3, 4]}, {"y": None}, 9,
                {"s": np.array([[0.1], [0.2], [0.3]], np.float32)}), {"x": x([2, 3, 4])})


@pytest.mark.parametrize("c", [pytest.param(c, id=c.id, marks=[pytest.mark.xfail(strict=True, reason=c.defect)]
                                            if c.defect else []) for c in CASES])
def test_opset_form_matches_expectation(c: Case):
    got = run_fusionlang(c.model, c.feeds)
    references = [] if c.id in ORT_LACKS else [run_onnxruntime(c.model, c.feeds)]
    if c.numpy is not None:
        references.append(c.numpy(c.feeds))
    assert references, "a case needs onnxruntime or a NumPy expectation"
    for want in references:
        assert len(got) == len(want)
        for g, w in zip(got, want):
            w = np.asarray(w)
            assert g.shape == w.shape
            assert g.dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    if c.ops is not None:
        assert [n.op for n in from_onnx(c.model).nodes] == c.ops



@pytest.mark.parametrize("opset, accepted", [(28, True), (29, False), (40, False)])
def test_an_opset_newer_than_the_known_forms_is_refused(opset, accepted):
    """An opset from the future was read with today's forms, which it may have changed."""
    from fusionlang.errors import ModelError
    from fusionlang.frontend.onnx_import import NEWEST_KNOWN_OPSET

    model = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": [4]}, {"y": None}, opset)
    model.ir_version = 11
    if accepted:
        assert from_onnx(model).outputs == ["y"]
        return
    with pytest.raises(ModelError, match=f"opset {opset}; fusionlang knows the ops' forms up to opset "
                                         f"{NEWEST_KNOWN_OPSET}"):
        from_onnx(model)
