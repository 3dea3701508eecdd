"""Concrete op cases shared by the op tests: inputs, attributes, and the equivalent ONNX node.

Each case names one of our ops with its attributes and input arrays; ``onnx_form`` says
which ONNX op (and attributes, and extra constant inputs) computes the same thing, so the
same table drives the onnxruntime comparison and the GraphBuilder/interpreter round trip.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from fusionlang.ops import REGISTRY

INT64_MAX = int(np.iinfo(np.int64).max)
INT64_MIN = int(np.iinfo(np.int64).min)


# ----- input makers: called with a seeded Generator -----------------------------------
def normal(*shape, dtype="float32"):
    return lambda rng: rng.standard_normal(shape).astype(dtype)


def positive(*shape, low=0.1, high=3.0):
    return lambda rng: rng.uniform(low, high, shape).astype(np.float32)


def ints(*shape, low=-9, high=10, dtype="int64"):
    return lambda rng: rng.integers(low, high, shape).astype(dtype)


def bools(*shape):
    return lambda rng: rng.random(shape) < 0.5


def const(array):
    array = np.asarray(array)
    return lambda rng: array.copy()


@dataclass
class Case:
    op: str
    inputs: list  # input makers; None for an omitted optional input
    attrs: dict = field(default_factory=dict)
    #: onnxruntime tolerance: (rtol, atol)
    tol: tuple[float, float] = (1e-5, 1e-5)
    note: str = ""
    #: "onnxruntime", or a name in the test's table of hand-written oracles where it lacks the case
    oracle: str = "onnxruntime"

    @property
    def id(self) -> str:
        shapes = "x".join(str(list(np.shape(m(np.random.default_rng(0))))) if m else "_" for m in self.inputs)
        attrs = ",".join(f"{k}={_short(v)}" for k, v in sorted(self.attrs.items()))
        return f"{self.op}[{shapes}]{{{attrs}}}"

    def arrays(self) -> list[np.ndarray | None]:
        rng = np.random.default_rng(zlib.crc32(self.id.encode()))
        return [m(rng) if m else None for m in self.inputs]


def _short(value) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype}{value.ravel().tolist()}"
    return str(value).replace(" ", "")


# ----- the equivalent ONNX node ---------------------------------------------------------
@dataclass
class OnnxForm:
    op_type: str
    attrs: dict = field(default_factory=dict)
    #: constant inputs appended after ours (None: an omitted optional input)
    extra: list = field(default_factory=list)
    outputs: int = 1
    #: ONNX ops applied in turn to the first output (a unary chain)
    then: tuple[str, ...] = ()
    #: build the whole node list instead: fn(input names, output name) -> nodes
    graph: Callable | None = None
    #: the opset of the model (None: the test's default), for ops newer than it
    opset: int | None = None


def _i64(values) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


_ONNX_NAMES = {
    "neg": "Neg", "abs": "Abs", "sign": "Sign", "relu": "Relu", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
    "reciprocal": "Reciprocal", "erf": "Erf", "tanh": "Tanh", "sigmoid": "Sigmoid", "softplus": "Softplus",
    "softsign": "Softsign", "floor": "Floor", "ceil": "Ceil", "sin": "Sin", "cos": "Cos", "identity": "Identity",
    "add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow", "prelu": "PRelu", "equal": "Equal",
    "less": "Less", "less_equal": "LessOrEqual", "greater": "Greater", "greater_equal": "GreaterOrEqual",
    "and": "And", "or": "Or", "xor": "Xor", "not": "Not", "where": "Where", "max": "Max", "min": "Min",
    "sum": "Sum", "mean": "Mean", "matmul": "MatMul", "concat": "Concat", "gather": "Gather",
    "global_average_pool": "GlobalAveragePool", "global_max_pool": "GlobalMaxPool", "transpose": "Transpose",
    "flatten": "Flatten", "shape": "Shape", "softmax": "Softmax",
    "log_softmax": "LogSoftmax",
    "tan": "Tan", "asin": "Asin", "acos": "Acos", "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh", "asinh": "Asinh",
    "acosh": "Acosh", "atanh": "Atanh", "round": "Round", "bitwise_and": "BitwiseAnd", "bitwise_or": "BitwiseOr",
    "bitwise_xor": "BitwiseXor", "bitwise_not": "BitwiseNot",
}
_RENAMED_ATTRS = {
    "gemm": {"trans_a": "transA", "trans_b": "transB"},
    "leaky_relu": {}, "elu": {}, "selu": {}, "hard_sigmoid": {}, "gelu": {}, "lrn": {},
}
_ONNX_OPS = {
    "leaky_relu": "LeakyRelu", "elu": "Elu", "selu": "Selu", "hard_sigmoid": "HardSigmoid", "gelu": "Gelu",
    "lrn": "LRN", "gemm": "Gemm", "conv": "Conv", "conv_transpose": "ConvTranspose", "max_pool": "MaxPool",
    "average_pool": "AveragePool", "batch_norm": "BatchNormalization", "instance_norm": "InstanceNormalization",
    "layer_norm": "LayerNormalization", "is_nan": "IsNaN", "is_inf": "IsInf", "gather_elements": "GatherElements",
    "gather_nd": "GatherND", "remainder": "Mod", "shrink": "Shrink", "mish": "Mish",
    "mean_variance_norm": "MeanVarianceNormalization", "lp_norm": "LpNormalization",
}
_WINDOW_KEYS = ("kernel_shape", "strides", "pads", "dilations", "group", "ceil_mode", "count_include_pad",
                "output_padding", "storage_order")
_ONNX_DTYPES = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16,
                "int64": TensorProto.INT64, "int32": TensorProto.INT32, "int8": TensorProto.INT8,
                "uint8": TensorProto.UINT8, "bool": TensorProto.BOOL}


def onnx_form(op: str, attrs: dict, arrays: list) -> OnnxForm:
    """The ONNX node computing what ``op`` with normalized ``attrs`` computes."""
    a = attrs
    x = arrays[0] if arrays else None
    if op in _ONNX_NAMES:
        kept = {k: v for k, v in a.items() if k in ("axis", "perm", "start", "end") and _set(v)}
        if op == "shape" and kept.get("end") == INT64_MAX:
            del kept["end"]
        if op == "transpose" and not a["perm"]:
            kept.pop("perm", None)
        return OnnxForm(_ONNX_NAMES[op], kept)
    if op in _ONNX_OPS:
        names = _RENAMED_ATTRS.get(op, {})
        kept = {names.get(k, k): v for k, v in a.items() if _set(v)}
        return OnnxForm(_ONNX_OPS[op], kept)
    if op.startswith("reduce_"):
        camel = "Reduce" + op.split("_")[1].capitalize()
        extra = [_i64(a["axes"])] if a["axes"] else []
        return OnnxForm(camel, {"keepdims": a["keepdims"], "noop_with_empty_axes": a["noop_with_empty_axes"]}, extra)
    return _SPECIAL[op](a, arrays, x)


def _set(value) -> bool:
    return not (isinstance(value, tuple) and not value)


def _clip(a, arrays, x):
    bound = lambda v: None if math.isinf(v) else np.asarray(v, dtype=x.dtype)  # noqa: E731
    return OnnxForm("Clip", extra=[bound(a["min"]), bound(a["max"])])


def _silu(a, arrays, x):
    def graph(ins, out):
        return [helper.make_node("Sigmoid", [ins[0]], ["silu_s"]), helper.make_node("Mul", [ins[0], "silu_s"], [out])]

    return OnnxForm("", graph=graph)


def _batch_norm_train(a, arrays, x):
    c = x.shape[1]
    stats = [np.zeros(c, x.dtype), np.ones(c, x.dtype)]
    return OnnxForm("BatchNormalization", {"epsilon": a["epsilon"], "training_mode": 1}, stats, outputs=3)


def _pad(a, arrays, x):
    extra = [_i64(a["pads"])]
    if a["mode"] == "constant":
        extra.append(np.asarray(a["value"], dtype=x.dtype))
    return OnnxForm("Pad", {"mode": a["mode"]}, extra)


def _slice(a, arrays, x):
    n = len(a["starts"])
    return OnnxForm("Slice", extra=[_i64(a["starts"]), _i64(a["ends"]), _i64(a["axes"] or range(n)),
                                    _i64(a["steps"] or [1] * n)])


def _constant_of_shape(a, arrays, x):
    extra = [] if x is not None else [_i64(a["shape"])]
    return OnnxForm("ConstantOfShape", {"value": a["value"]}, extra)


def _arg_extreme(a, arrays, x):
    """index_of(x, max or min of x) is ArgMax or ArgMin: which one, the target says."""
    axis = a["axis"] % x.ndim
    op_type = "ArgMax" if np.array_equal(arrays[1], np.max(x, axis=axis, keepdims=True)) else "ArgMin"

    def graph(ins, out):
        return [helper.make_node(op_type, [ins[0]], [out], axis=a["axis"], keepdims=a["keepdims"],
                                 select_last_index=a["last"])]

    return OnnxForm("", graph=graph)


def _scatter_position(a, arrays, x):
    """scatter_position is ONNX ScatterElements (reduction none: the last repeated index wins)
    of each index's own position along the axis into -1s."""
    indices = arrays[1]
    positions = np.indices(indices.shape)[a["axis"] % indices.ndim].astype(np.int64)

    def graph(ins, out):
        minus_one = helper.make_tensor("minus_one", TensorProto.INT64, [1], [-1])
        return [helper.make_node("Shape", [ins[0]], ["sp_shape"]),
                helper.make_node("ConstantOfShape", ["sp_shape"], ["sp_base"], value=minus_one),
                helper.make_node("ScatterElements", ["sp_base", ins[1], ins[2]], [out], axis=a["axis"])]

    return OnnxForm("", extra=[positions], graph=graph)


def _segment_sum(a, arrays, x):
    """segment_sum is ONNX ScatterND with reduction add of the rows into zeros (indices as
    [rows, 1] int64)."""
    zero = helper.make_tensor("zero", helper.np_dtype_to_tensor_dtype(arrays[0].dtype), [1], [0])

    def graph(ins, out):
        return [helper.make_node("ConstantOfShape", [ins[2]], ["ss_base"], value=zero),
                helper.make_node("Cast", [ins[1]], ["ss_i64"], to=TensorProto.INT64),
                helper.make_node("Unsqueeze", ["ss_i64", ins[3]], ["ss_at"]),
                helper.make_node("ScatterND", ["ss_base", "ss_at", ins[0]], [out], reduction="add")]

    return OnnxForm("", extra=[_i64([a["num_segments"], *arrays[0].shape[1:]]), _i64([1])], graph=graph, opset=18)


def _sort_position(a, arrays, x):
    """onnxruntime's TopK over the whole axis gives the order; scattering each place to the
    position it names inverts it."""
    axis = a["axis"] % x.ndim
    places = np.indices(x.shape)[axis].astype(np.int64)

    def graph(ins, out):
        return [helper.make_node("TopK", [ins[0], ins[1]], ["sp_v", "sp_i"], axis=a["axis"], largest=a["largest"]),
                helper.make_node("ScatterElements", [ins[2], "sp_i", ins[2]], [out], axis=a["axis"])]

    return OnnxForm("", extra=[_i64([x.shape[axis]]), places], graph=graph)


def _sorted_indices(a, arrays, x):
    """The first k positions of a permutation's inverse: the smallest k places' positions."""
    def graph(ins, out):
        return [helper.make_node("TopK", [ins[0], ins[1]], ["si_v", out], axis=a["axis"], largest=0)]

    return OnnxForm("", extra=[_i64([a["k"]])], graph=graph)


def _one_hot(a, arrays, x):
    def graph(ins, out):
        return [helper.make_node("OneHot", [ins[0], ins[2], ins[1]], [out], axis=a["axis"])]

    return OnnxForm("", extra=[_i64(a["depth"])], graph=graph)


def _group_norm(a, arrays, x):
    """GroupNormalization-18 (the opset the comparison runs) takes scale and bias per group:
    the cases repeat each group's value over its channels, so its first channel's is it."""
    groups, channels = a["num_groups"], x.shape[1]
    firsts = helper.make_tensor("v", TensorProto.INT64, [groups], list(range(0, channels, channels // groups)))

    def graph(ins, out):
        nodes = [helper.make_node("Constant", [], ["gn_firsts"], value=firsts)]
        for k in (1, 2):
            nodes.append(helper.make_node("Gather", [ins[k], "gn_firsts"], [f"gn_group{k}"], axis=0))
        nodes.append(helper.make_node("GroupNormalization", [ins[0], "gn_group1", "gn_group2"], [out],
                                      num_groups=groups, epsilon=a["epsilon"]))
        return nodes

    return OnnxForm("", graph=graph)


def _resize(a, arrays, x):
    """Resize given sizes where every scale is the sizes' own, else given scales (float32)."""
    attrs = {k: a[k] for k in ("mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
                               "exclude_outside", "extrapolation_value", "antialias")}
    roi = np.asarray(a["roi"], np.float32) if a["roi"] else None
    if all(s == n / m for s, n, m in zip(a["scales"], a["sizes"], x.shape)):
        return OnnxForm("Resize", attrs, [roi, None, _i64(a["sizes"])])
    return OnnxForm("Resize", attrs, [roi, np.asarray(a["scales"], np.float32)])


def _rms_norm(a, arrays, x):
    """RMSNormalization written with opset-20 ops: x / sqrt(mean(x * x) + epsilon) * scale."""
    axes = _i64(range(a["axis"] % x.ndim, x.ndim))

    def graph(ins, out):
        return [helper.make_node("Mul", [ins[0], ins[0]], ["rms_sq"]),
                helper.make_node("ReduceMean", ["rms_sq", "rms_axes"], ["rms_ms"], keepdims=1),
                helper.make_node("Add", ["rms_ms", "rms_eps"], ["rms_var"]),
                helper.make_node("Sqrt", ["rms_var"], ["rms_root"]),
                helper.make_node("Div", [ins[0], "rms_root"], ["rms_unit"]),
                helper.make_node("Mul", ["rms_unit", ins[1]], [out]),
                helper.make_node("Constant", [], ["rms_axes"], value=numpy_helper.from_array(axes)),
                helper.make_node("Constant", [], ["rms_eps"],
                                 value=numpy_helper.from_array(np.asarray(a["epsilon"], x.dtype)))]

    return OnnxForm("", graph=graph)


_SPECIAL: dict[str, Callable[[dict, list, Any], OnnxForm]] = {
    "constant_of_shape": _constant_of_shape,
    "clip": _clip,
    "silu": _silu,
    "rsqrt": lambda a, arrays, x: OnnxForm("Sqrt", then=("Reciprocal",)),
    "batch_norm_train": _batch_norm_train,
    "cast": lambda a, arrays, x: OnnxForm("Cast", {"to": _ONNX_DTYPES[a["to"]]}),
    "dropout": lambda a, arrays, x: OnnxForm("Dropout"),
    "bit_shift": lambda a, arrays, x: OnnxForm("BitShift", {"direction": a["direction"].upper()}),
    "rms_norm": _rms_norm,
    # onnxruntime 1.32 lacks these at the tests' opset: hand oracles (onnx's reference) check them
    "rotary_embedding": lambda a, arrays, x: OnnxForm("RotaryEmbedding", {"interleaved": a["interleaved"]}),
    "bitcast": lambda a, arrays, x: OnnxForm("BitCast", {"to": helper.np_dtype_to_tensor_dtype(np.dtype(a["to"]))}),
    "attention": lambda a, arrays, x: OnnxForm("Attention", {"scale": a["scale"], "softcap": a["softcap"]}, outputs=4),
    "nll_loss": lambda a, arrays, x: OnnxForm("NegativeLogLikelihoodLoss",
                                              {"reduction": "none", "ignore_index": a["ignore_index"]}),
    "reshape": lambda a, arrays, x: OnnxForm("Reshape", {"allowzero": a["allowzero"]}, [_i64(a["shape"])]),
    "squeeze": lambda a, arrays, x: OnnxForm("Squeeze", extra=[_i64(a["axes"])] if a["axes"] else []),
    "unsqueeze": lambda a, arrays, x: OnnxForm("Unsqueeze", extra=[_i64(a["axes"])]),
    "split": lambda a, arrays, x: OnnxForm("Split", {"axis": a["axis"]}, [_i64(a["split"])],
                                           outputs=len(a["split"])),
    "slice": _slice,
    "expand": lambda a, arrays, x: OnnxForm("Expand", extra=[_i64(a["shape"])]),
    "tile": lambda a, arrays, x: OnnxForm("Tile", extra=[_i64(a["repeats"])]),
    "pad": _pad,
    "cumsum": lambda a, arrays, x: OnnxForm("CumSum", {"exclusive": a["exclusive"], "reverse": a["reverse"]},
                                            [_i64(a["axis"])]),
    "cumprod": lambda a, arrays, x: OnnxForm("CumProd", {"exclusive": a["exclusive"], "reverse": a["reverse"]},
                                             [_i64(a["axis"])], opset=26),
    "scatter_elements": lambda a, arrays, x: OnnxForm("ScatterElements", a, opset=18),
    "scatter_position": _scatter_position,
    "segment_sum": _segment_sum,
    "sort_position": _sort_position,
    "sorted_indices": _sorted_indices,
    "one_hot": _one_hot,
    "col2im": lambda a, arrays, x: OnnxForm("Col2Im", {k: a[k] for k in ("dilations", "pads", "strides") if a[k]},
                                            [_i64(a["image_shape"]), _i64(a["block_shape"])], opset=18),
    "index_of": _arg_extreme,
    "resize": _resize,
    "group_norm": _group_norm,
    "trilu": lambda a, arrays, x: OnnxForm("Trilu", {"upper": a["upper"]},
                                           [] if len(arrays) > 1 else [_i64(a["k"])]),
    # (opset-19 forms: the cases give a zero point, which names the quantized type)
    "quantize_linear": lambda a, arrays, x: OnnxForm("QuantizeLinear", {"axis": a["axis"], "saturate": a["saturate"]}),
    "dequantize_linear": lambda a, arrays, x: OnnxForm("DequantizeLinear", {"axis": a["axis"]}),
}


# ----- the cases ------------------------------------------------------------------------
def _unary_cases() -> list[Case]:
    cases = []
    domain = {"log": positive, "sqrt": positive, "rsqrt": positive, "reciprocal": positive}
    for op in ("neg", "abs", "sign", "relu", "exp", "log", "sqrt", "rsqrt", "reciprocal", "erf", "tanh",
               "sigmoid", "softplus", "softsign", "floor", "ceil", "sin", "cos", "silu", "identity", "dropout"):
        cases.append(Case(op, [domain.get(op, normal)(3, 4, 5)]))
    wide = lambda rng: (rng.standard_normal((4, 50)) * 30).astype(np.float32)  # noqa: E731
    cases += [Case(op, [wide], note="large magnitudes: overflow-safe forms")
              for op in ("sigmoid", "softplus", "tanh", "erf", "silu", "exp")]
    cases += [Case(op, [ints(2, 7, dtype="int32")]) for op in ("neg", "abs", "sign", "relu")]
    cases += [
        Case("leaky_relu", [normal(2, 3, 4)], {"alpha": 0.2}),
        Case("elu", [normal(2, 3, 4)], {"alpha": 0.7}),
        Case("selu", [normal(2, 3, 4)]),
        Case("hard_sigmoid", [normal(2, 3, 4)], {"alpha": 0.3, "beta": 0.4}),
        Case("gelu", [normal(2, 3, 4)]),
        Case("gelu", [normal(2, 3, 4)], {"approximate": "tanh"}),
        Case("clip", [normal(3, 4)], {"min": -0.5, "max": 0.7}),
        Case("clip", [normal(3, 4)], {"max": 0.2}),
        Case("clip", [normal(3, 4)], {"min": 1.0, "max": -1.0}, note="min > max gives max"),
        Case("clip", [ints(3, 4, dtype="int32")], {"min": -3, "max": 4}),
        Case("bitcast", [normal(3, 4)], {"source": "float32", "to": "int32"}, oracle="onnx-bitcast"),
        Case("bitcast", [ints(3, 4)], {"source": "int64", "to": "float64"}, oracle="onnx-bitcast"),
        Case("bitcast", [normal(3, 4, dtype="float16")], {"source": "float16", "to": "uint16"},
             oracle="onnx-bitcast"),
        Case("cast", [normal(3, 4)], {"to": "int32"}),
        Case("cast", [normal(3, 4)], {"to": "bool"}),
        Case("cast", [ints(3, 4)], {"to": "float32"}),
        Case("cast", [normal(3, 4)], {"to": "float16"}),
        Case("cast", [bools(3, 4)], {"to": "float32"}),
    ]
    return cases


def _binary_cases() -> list[Case]:
    cases = []
    for op in ("add", "sub", "mul", "div"):
        cases.append(Case(op, [normal(3, 1, 5), normal(4, 1)]))
    cases += [
        Case("div", [ints(4, 6, dtype="int32"), ints(6, low=1, high=5, dtype="int32")]),
        Case("div", [ints(4, 6, dtype="int64"), const(np.array([-3, -2, 2, 3, 4, -5]))]),
        Case("add", [ints(2, 3), ints(3)]),
        Case("pow", [positive(3, 4), normal(4)]),
        Case("pow", [normal(3, 4), const(np.array([2, 3, 0, -1], np.int64))]),
        Case("pow", [ints(3, 4, low=-4, high=5, dtype="int32"), ints(4, low=0, high=4, dtype="int32")]),
        Case("prelu", [normal(2, 3, 4), normal(3, 1)]),
        Case("prelu", [normal(2, 3), normal(3)]),
        Case("where", [bools(3, 1), normal(1, 4), normal(3, 4)]),
        Case("where", [bools(2, 3), ints(3), ints(2, 1)]),
        Case("max", [normal(3, 4), normal(4), normal(1, 4)]),
        Case("min", [normal(3, 4), normal(3, 1)]),
        Case("max", [normal(5)]),
        Case("sum", [normal(2, 3), normal(3), normal(2, 1)]),
        Case("mean", [normal(2, 3), normal(3), normal(2, 1)]),
        Case("not", [bools(3, 4)]),
    ]
    tie = lambda rng: rng.integers(-2, 3, (4, 5)).astype(np.float32)  # noqa: E731
    cases += [Case(op, [tie, tie]) for op in ("equal", "less", "less_equal", "greater", "greater_equal")]
    cases += [Case(op, [bools(3, 4), bools(4)]) for op in ("and", "or", "xor")]
    return cases


def _reduce_cases() -> list[Case]:
    cases = []
    for kind in ("sum", "mean", "max", "min", "prod"):
        op = f"reduce_{kind}"
        cases += [
            Case(op, [normal(3, 4, 5)], {"axes": (1,)}),
            Case(op, [normal(3, 4, 5)], {"axes": (0, -1), "keepdims": 0}),
            Case(op, [normal(3, 4)], {}),
            Case(op, [normal(3, 4)], {"noop_with_empty_axes": 1}),
        ]
    return cases


def _nn_cases() -> list[Case]:
    conv_tol = (1e-4, 1e-4)  # sums of dozens of products, accumulated in a different order
    return [
        Case("conv", [normal(2, 4, 7, 6), normal(6, 4, 3, 3), normal(6)], {"pads": (1, 1, 1, 1)}, conv_tol),
        Case("conv", [normal(1, 4, 9, 8), normal(6, 2, 3, 2)], {"group": 2, "strides": (2, 1),
                                                               "dilations": (1, 2), "pads": (0, 1, 2, 0)}, conv_tol),
        Case("conv", [normal(1, 4, 6, 6), normal(4, 1, 3, 3)], {"group": 4, "pads": (1, 1, 1, 1)}, conv_tol),
        Case("conv", [normal(2, 3, 10), normal(5, 3, 4)], {"strides": (3,)}, conv_tol),
        Case("conv", [normal(1, 2, 4, 5, 4), normal(3, 2, 2, 3, 2), normal(3)], {"pads": (1, 0, 1, 0, 1, 1)}, conv_tol),
        Case("conv_transpose", [normal(2, 4, 3, 4), normal(4, 3, 3, 3), normal(3)], {}, conv_tol),
        Case("conv_transpose", [normal(1, 4, 3, 4), normal(4, 2, 3, 2)],
             {"group": 2, "strides": (2, 3), "pads": (1, 0, 0, 1), "output_padding": (1, 2)}, conv_tol),
        Case("conv_transpose", [normal(1, 2, 4, 3), normal(2, 3, 2, 2)],
             {"dilations": (2, 1), "strides": (1, 2), "pads": (2, 1, 0, 1)}, conv_tol),
        Case("conv_transpose", [normal(2, 3, 5), normal(3, 2, 4), normal(2)], {"strides": (2,), "pads": (1, 2)},
             conv_tol),
        Case("max_pool", [normal(2, 3, 7, 7)], {"kernel_shape": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1)}),
        Case("max_pool", [normal(1, 2, 6, 7)], {"kernel_shape": (2, 3), "strides": (2, 2), "ceil_mode": 1}),
        Case("max_pool", [normal(1, 2, 8, 8)], {"kernel_shape": (2, 2), "dilations": (2, 3), "pads": (1, 0, 1, 1)}),
        Case("max_pool", [normal(2, 3, 9)], {"kernel_shape": (4,), "strides": (2,)}),
        Case("max_pool", [ints(1, 2, 4, 5, dtype="int8")], {"kernel_shape": (2, 2), "pads": (1, 1, 0, 0)}),
        Case("average_pool", [normal(2, 3, 7, 7)], {"kernel_shape": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1)}),
        Case("average_pool", [normal(2, 3, 7, 7)], {"kernel_shape": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1),
                                                    "count_include_pad": 1}),
        Case("average_pool", [normal(1, 2, 6, 7)], {"kernel_shape": (3, 2), "strides": (2, 2), "pads": (1, 0, 1, 1),
                                                    "ceil_mode": 1}),
        Case("average_pool", [normal(1, 2, 6, 7)], {"kernel_shape": (3, 2), "strides": (2, 2), "pads": (1, 0, 1, 1),
                                                    "ceil_mode": 1, "count_include_pad": 1}),
        Case("average_pool", [normal(1, 2, 8, 7)], {"kernel_shape": (2, 2), "dilations": (2, 2), "pads": (1, 1, 0, 1)}),
        Case("average_pool", [normal(1, 2, 8, 7)], {"kernel_shape": (2, 2), "dilations": (2, 2), "pads": (1, 1, 0, 1),
                                                    "count_include_pad": 1}),
        Case("average_pool", [normal(1, 2, 4, 5, 4)], {"kernel_shape": (2, 3, 2), "pads": (0, 1, 1, 1, 1, 0)}),
        Case("global_average_pool", [normal(2, 3, 5, 4)]),
        Case("global_average_pool", [normal(2, 3, 7)]),
        Case("global_max_pool", [normal(2, 3, 5, 4)]),
        Case("global_max_pool", [normal(1, 2, 3, 2, 4)]),
        Case("lrn", [normal(2, 7, 3, 3)], {"size": 3}, note="onnxruntime implements 4-d LRN only"),
        Case("lrn", [normal(2, 6, 2, 3)], {"size": 4, "alpha": 0.01, "beta": 0.5, "bias": 2.0},
             oracle="lrn-loop", note="onnxruntime implements odd sizes only; onnx's evaluator sums the wrong axis"),
        Case("lrn", [normal(1, 5, 2, 2)], {"size": 1}),
        Case("batch_norm", [normal(2, 3, 4, 5), normal(3), normal(3), normal(3), positive(3)], {"epsilon": 1e-3}),
        Case("batch_norm", [normal(4, 3), normal(3), normal(3), normal(3), positive(3)]),
        Case("batch_norm_train", [normal(4, 3, 5, 2), normal(3), normal(3)], tol=(1e-4, 1e-4)),
        Case("instance_norm", [normal(2, 3, 4, 5), normal(3), normal(3)], tol=(1e-4, 1e-4)),
        Case("instance_norm", [normal(2, 3, 6), normal(3), normal(3)], {"epsilon": 0.1}, tol=(1e-4, 1e-4)),
        Case("group_norm", [normal(2, 4, 3, 5), const(np.array([0.5, 0.5, 2.0, 2.0], np.float32)),
                            const(np.array([0.1, 0.1, -1.0, -1.0], np.float32))], {"num_groups": 2}, tol=(1e-4, 1e-4)),
        Case("group_norm", [normal(2, 3, 4), normal(3), normal(3)], {"num_groups": 3, "epsilon": 0.1},
             tol=(1e-4, 1e-4)),
        Case("group_norm", [normal(3, 6), const(np.ones(6, np.float32)), const(np.zeros(6, np.float32))],
             {"num_groups": 1}, tol=(1e-4, 1e-4)),
        Case("mean_variance_norm", [normal(2, 3, 4, 5)], tol=(1e-4, 1e-4)),
        Case("mean_variance_norm", [normal(3, 4, 5)], {"axes": (1, -1)}, tol=(1e-4, 1e-4)),
        Case("lp_norm", [normal(3, 4, 5)], {"axis": 1, "p": 1}),
        Case("lp_norm", [normal(3, 4, 5)], {"axis": -1, "p": 2}),
        Case("lp_norm", [const(np.array([[0, 0, 0], [3, -4, 0]], np.float32))], {"axis": 1, "p": 2},
             note="a zero norm gives 0"),
        Case("layer_norm", [normal(3, 4, 8), normal(8), normal(8)], tol=(1e-4, 1e-4),
             note="onnxruntime uses E[x^2] - E[x]^2 for the variance"),
        Case("layer_norm", [normal(3, 4, 5), normal(4, 5)], {"axis": 1, "epsilon": 1e-3}, tol=(1e-4, 1e-4)),
        Case("layer_norm", [normal(2, 3, 4), normal(1, 4), normal(4)], {"axis": -2}, tol=(1e-4, 1e-4)),
        Case("softmax", [normal(3, 4, 5)]),
        Case("softmax", [normal(3, 4, 5)], {"axis": 1}),
        Case("log_softmax", [normal(3, 4, 5)]),
        Case("log_softmax", [normal(3, 4, 5)], {"axis": 0}),
        Case("softmax", [lambda rng: (rng.standard_normal((2, 6)) * 100).astype(np.float32)],
             note="large logits: the max is subtracted first"),
    ]


def _linalg_cases() -> list[Case]:
    return [
        Case("gemm", [normal(3, 4), normal(4, 5), normal(5)]),
        Case("gemm", [normal(4, 3), normal(5, 4), normal(3, 1)], {"trans_a": 1, "trans_b": 1, "alpha": 0.5,
                                                                  "beta": 2.0}),
        Case("gemm", [normal(3, 4), normal(5, 4)], {"trans_b": 1}),
        Case("gemm", [normal(3, 4), normal(4, 5), normal(3, 5)], {"beta": 0.0}),
        Case("gemm", [normal(3, 4), normal(4, 5), const(np.float32(1.5))]),
        Case("matmul", [normal(3, 4), normal(4, 5)]),
        Case("matmul", [normal(2, 1, 3, 4), normal(5, 4, 6)]),
        Case("matmul", [normal(4), normal(2, 4, 3)]),
        Case("matmul", [normal(2, 3, 4), normal(4)]),
        Case("matmul", [normal(4), normal(4)]),
        Case("matmul", [ints(2, 3, dtype="int32"), ints(3, 2, dtype="int32")]),
    ]


def _shape_cases() -> list[Case]:
    return [
        Case("reshape", [normal(2, 3, 4)], {"shape": (0, -1)}),
        Case("reshape", [normal(2, 3, 4)], {"shape": (4, 1, 6)}),
        Case("reshape", [normal(2, 0, 4)], {"shape": (0, 8), "allowzero": 1}),
        Case("transpose", [normal(2, 3, 4)], {"perm": (1, 2, 0)}),
        Case("transpose", [normal(2, 3, 4)]),
        Case("flatten", [normal(2, 3, 4)]),
        Case("flatten", [normal(2, 3, 4)], {"axis": 0}),
        Case("flatten", [normal(2, 3, 4)], {"axis": -1}),
        Case("flatten", [normal(2, 3, 4)], {"axis": 3}),
        Case("squeeze", [normal(1, 3, 1, 4)]),
        Case("squeeze", [normal(1, 3, 1, 4)], {"axes": (-2,)}),
        Case("unsqueeze", [normal(3, 4)], {"axes": (0, 3)}),
        Case("unsqueeze", [normal(3, 4)], {"axes": (-1,)}),
        Case("concat", [normal(2, 3), normal(2, 1), normal(2, 4)], {"axis": 1}),
        Case("concat", [normal(2, 3, 2), normal(1, 3, 2)], {"axis": -3}),
        Case("concat", [ints(3)], {"axis": 0}),
        Case("split", [normal(2, 6, 3)], {"axis": 1, "split": (2, 3, 1)}),
        Case("split", [ints(5, 2)], {"split": (5,)}),
        Case("split", [normal(4, 3)], {"axis": -1, "split": (1, 2)}),
        Case("slice", [normal(5, 6, 7)], {"starts": (1, -4), "ends": (4, 100), "axes": (0, 2)}),
        Case("slice", [normal(5, 6)], {"starts": (-1, 4), "ends": (INT64_MIN, 0), "steps": (-2, -1)}),
        Case("slice", [normal(5, 6)], {"starts": (0, 1), "ends": (INT64_MAX, 6), "steps": (3, 2), "axes": (-2, -1)}),
        Case("slice", [normal(5, 6)], {"starts": (10,), "ends": (20,), "axes": (1,)}),
        Case("slice", [normal(5, 6)], {"starts": (3,), "ends": (1,), "axes": (0,)}),
        Case("expand", [normal(3, 1)], {"shape": (2, 1, 6)}),
        Case("expand", [normal(2, 3, 4)], {"shape": (3, 1)}),
        Case("tile", [normal(2, 3)], {"repeats": (2, 3)}),
        Case("tile", [ints(1, 2, 3)], {"repeats": (3, 1, 2)}),
        Case("pad", [normal(2, 3)], {"pads": (1, 0, 2, 3), "value": 1.5}),
        Case("pad", [normal(3, 4)], {"pads": (2, 1, 1, 3), "mode": "reflect"}),
        Case("pad", [normal(3, 4)], {"pads": (2, 0, 1, 5), "mode": "edge"}),
        Case("pad", [normal(3, 4)], {"pads": (3, 1, 4, 6), "mode": "wrap"}),
        Case("pad", [normal(4, 5)], {"pads": (-1, 2, 1, -2)}),
        Case("pad", [normal(5, 4)], {"pads": (-1, 0, 3, 0), "mode": "reflect"}),
        Case("pad", [ints(3, 4)], {"pads": (1, 1, 1, 1), "value": 7.0}),
        Case("gather", [normal(5, 4), const(np.array([[0, 4], [-1, 2], [3, -5]]))]),
        Case("gather", [normal(3, 5, 2), const(np.array([4, -2, 0], np.int32))], {"axis": 1}),
        Case("gather", [normal(3, 5, 2), const(np.array(1))], {"axis": -1}),
        Case("constant_of_shape", [const(np.array([2, 3]))]),
        Case("constant_of_shape", [const(np.array([4]))], {"value": np.array([7], np.int64)}),
        Case("constant_of_shape", [const(np.array([2, 0, 1]))], {"value": np.array([1.5], np.float32)}),
        Case("constant_of_shape", [], {"shape": (3, 2), "value": np.array([True])}),
        Case("shape", [normal(2, 3, 4)]),
        Case("shape", [normal(2, 3, 4)], {"start": 1}),
        Case("shape", [normal(2, 3, 4, 5)], {"start": -3, "end": -1}),
        Case("shape", [normal(2, 3, 4)], {"start": 2, "end": 1}),
    ]


def _with_specials(*shape):
    """Normal values with NaN, +inf and -inf among them."""
    def make(rng):
        x = rng.standard_normal(shape).astype(np.float32)
        x.flat[::3], x.flat[1::5], x.flat[2::7] = np.nan, np.inf, -np.inf
        return x

    return make


def _ties(axis: int, reduce):
    """(x with repeated extremes, its max or min along axis kept as a dim)."""
    x = np.random.default_rng(7).integers(-2, 3, (3, 4, 5)).astype(np.float32)
    return [const(x), const(reduce(x, axis=axis, keepdims=True))]


def _index_cases() -> list[Case]:
    return [
        Case("is_nan", [_with_specials(4, 6)]),
        Case("is_inf", [_with_specials(4, 6)]),
        Case("is_inf", [_with_specials(4, 6)], {"detect_negative": 0}),
        Case("is_inf", [_with_specials(4, 6)], {"detect_positive": 0}),
        Case("gather_elements", [normal(3, 4), const(np.array([[0, -1, 3], [2, 2, 0], [-4, 1, 1]]))], {"axis": 1}),
        Case("gather_elements", [normal(3, 4), const(np.array([[2, 0, 1, -1]], np.int32))]),
        Case("gather_nd", [normal(4, 3, 2), const(np.array([[0, 1], [-1, 2], [3, -3]]))]),
        Case("gather_nd", [normal(2, 3, 4), const(np.array([[[2], [0]], [[1], [-1]]]))], {"batch_dims": 1}),
        Case("gather_nd", [normal(2, 3, 4), const(np.array([[1, 3], [0, -1]]))], {"batch_dims": 1}),
        Case("remainder", [ints(3, 4, low=-20, high=20), const(np.array([-7, -3, 3, 5]))]),
        Case("remainder", [ints(3, 4, low=-20, high=20, dtype="int32"), const(np.array([-7, -3, 3, 5], np.int32))],
             {"fmod": 1}),
        Case("remainder", [normal(3, 4), const(np.array([-0.7, -0.3, 0.3, 0.5], np.float32))], {"fmod": 1}),
        Case("bit_shift", [ints(3, 4, low=0, high=256, dtype="uint8"), const(np.array([0, 1, 3, 7], np.uint8))]),
        Case("bit_shift", [ints(3, 4, low=0, high=256, dtype="uint8"), const(np.array([0, 1, 3, 7], np.uint8))],
             {"direction": "right"}),
        # onnxruntime's output 0 (reduction none); the weights of output 1: tests/ops/test_ops_loss.py
        Case("nll_loss", [normal(3, 4, 2), const(np.array([[0, 3], [-100, 2], [1, 1]])), positive(4)],
             {"ignore_index": -100}),
        Case("nll_loss", [normal(3, 4), const(np.array([2, 0, 1]))]),
        Case("rms_norm", [normal(2, 3, 4), positive(3, 4)], {"axis": 1, "epsilon": 1e-3}),
        Case("rms_norm", [normal(3, 5), normal(5)]),
        Case("rotary_embedding", [normal(2, 3, 2, 8), normal(2, 3, 1, 4), normal(2, 3, 1, 4)], oracle="onnx-rotary"),
        Case("rotary_embedding", [normal(2, 3, 2, 8), normal(2, 3, 1, 4), normal(2, 3, 1, 4)], {"interleaved": 1},
             oracle="onnx-rotary"),
        Case("attention", [normal(2, 3, 4, 8), normal(2, 3, 5, 8), normal(2, 3, 5, 6)], {"scale": 0.3},
             oracle="onnx-attention"),
        # the second row of the mask masks every key: its probabilities are 0
        Case("attention", [normal(1, 2, 3, 4), normal(1, 2, 5, 4), normal(1, 2, 5, 4),
                           const(np.array([[0, -np.inf, 0.5, 0, -1], [-np.inf] * 5, [1, 2, 0, 0, -np.inf]], np.float32))],
             {"scale": 0.5, "softcap": 2.0}, oracle="onnx-attention"),
        Case("shrink", [normal(3, 5)]),
        Case("shrink", [normal(3, 5)], {"lambd": 0.3, "bias": 0.2}),
        Case("mish", [normal(3, 5)]),
        # the inverse functions' domain edges and beyond (NaN), and overflowing cosh/sinh
        *(Case(op, [const(np.array([-2, -1, -0.5, 0, 0.5, 1, 2, 1e-8, np.nan, np.inf, -np.inf], np.float32))])
          for op in ("asin", "acos", "atan", "asinh", "acosh", "atanh", "sinh", "cosh", "tan")),
        Case("acosh", [positive(3, 4, low=1.0, high=9.0)]),
        Case("round", [const(np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -0.7, 1e8 + 2, np.nan, -np.inf],
                                      np.float32))], note="ties to even"),
        Case("bitwise_and", [ints(3, 4, low=-128, high=128, dtype="int8"), ints(4, low=-128, high=128, dtype="int8")]),
        Case("bitwise_or", [ints(3, 4, low=0, high=256, dtype="uint8"), ints(3, 1, low=0, high=256, dtype="uint8")]),
        Case("bitwise_xor", [ints(3, 4, low=-2**31, high=2**31, dtype="int32"),
                             ints(3, 4, low=-2**31, high=2**31, dtype="int32")]),
        Case("bitwise_xor", [const(np.array([INT64_MIN, INT64_MAX, -1, 2**53 + 1], np.int64)),
                             const(np.array([1, INT64_MIN, 2**62, 1], np.int64))], note="every bit of int64"),
        Case("bitwise_not", [ints(3, 4, low=0, high=256, dtype="uint8")]),
        Case("bitwise_not", [const(np.array([INT64_MIN, INT64_MAX, -1, 0], np.int64))]),
        Case("trilu", [normal(2, 4, 5)]),
        Case("trilu", [normal(4, 5), const(np.array(-1))], {"upper": 0}),
        Case("trilu", [ints(5, 3)], {"k": 2}),
        Case("trilu", [normal(3, 4, 4)], {"k": -2, "upper": 0}),
        Case("cumsum", [normal(3, 4)], {"axis": 1}),
        Case("cumsum", [ints(3, 4)], {"axis": -2, "exclusive": 1}),
        Case("cumsum", [normal(3, 4)], {"axis": 0, "reverse": 1}),
        Case("cumsum", [normal(5)], {"exclusive": 1, "reverse": 1}),
        Case("cumprod", [normal(3, 4)], {"axis": 1}),
        Case("cumprod", [ints(3, 4, low=-3, high=4)], {"axis": -2, "exclusive": 1}),
        Case("cumprod", [normal(3, 4)], {"axis": 0, "reverse": 1}),
        Case("cumprod", [const(np.array([2.0, 0.0, 3.0, -1.5, 4.0], np.float32))], {"exclusive": 1, "reverse": 1}),
        *_scatter_cases(),
        *_sorting_cases(),
        *_grid_cases(),
        Case("col2im", [normal(1, 5, 5)], {"image_shape": (5, 5), "block_shape": (1, 5)}),
        Case("col2im", [normal(2, 8, 12)], {"image_shape": (4, 5), "block_shape": (2, 2), "strides": (2, 1),
                                           "pads": (1, 0, 1, 1), "dilations": (1, 2)}),
        # (1-d Col2Im: onnxruntime 1.32 disagrees with onnx's evaluator; tests/frontend/test_onnx_col2im.py)
        Case("index_of", _ties(1, np.max), {"axis": 1}),
        Case("index_of", _ties(2, np.max), {"axis": 2, "keepdims": 0, "last": 1}),
        Case("index_of", _ties(0, np.min), {"axis": 0, "last": 1}),
        Case("index_of", _ties(-1, np.min), {"axis": -1, "keepdims": 0}),
    ] + _resize_cases()


def _scatter_cases() -> list[Case]:
    """Repeated and negative indices, indices shorter than data off the axis, each reduction."""
    repeated = const(np.array([[1, -1, 1], [0, 4, -5]]))
    cases = [Case("scatter_elements", [normal(3, 5), repeated, normal(2, 3)], {"axis": 1, "reduction": r})
             for r in ("add", "mul", "max", "min")]
    return cases + [
        Case("scatter_elements", [ints(4, 2), const(np.array([[3, 0], [-4, 3]], np.int32)), ints(2, 2)],
             {"reduction": "add"}),
        Case("scatter_position", [normal(3, 5), const(np.array([[2, -1, 0], [0, 1, -3]]))]),
        Case("scatter_position", [normal(3, 5), repeated], {"axis": 1}),
        Case("scatter_pick", [normal(3, 5), normal(2, 3), const(np.array([[-1, 2, -1, -1, 1], [2, -1, 0, -1, 1],
                                                                          [-1, -1, -1, -1, -1]]))], {"axis": 1},
             oracle="scatter-pick-loop"),
        Case("segment_sum", [normal(5, 2, 3), const(np.array([2, -1, 0, 2, 2]))], {"num_segments": 4}),
        Case("segment_sum", [ints(3, 2), const(np.array([0, -2, 0], np.int32))], {"num_segments": 2}),
    ]


def _sorting_cases() -> list[Case]:
    """Ties (kept in index order), NaN (larger than any number), integers, one-hot wrapping."""
    ties = const(np.array([[3.0, 1.0, 3.0, np.nan, -2.0, 1.0], [0.0, 0.0, 5.0, -1.0, 5.0, np.nan]], np.float32))
    return [
        Case("sort_position", [ties]),
        Case("sort_position", [ties], {"largest": 0}),
        Case("sort_position", [ints(3, 4, 2, low=-2, high=3)], {"axis": 1}),
        Case("sort_position", [ints(5, 3, low=-2, high=3, dtype="int32")], {"axis": -2, "largest": 0}),
        Case("sorted_indices", [const(np.array([[2, 0, 3, 1], [0, 1, 2, 3]]))], {"k": 3}),
        Case("sorted_indices", [const(np.array([[1, 0], [0, 2], [2, 1]]))], {"axis": 0, "k": 3}),
        Case("one_hot", [const(np.array([[0, -1, 3], [5, -5, 2]])), const(np.array([-1.0, 2.0], np.float32))],
             {"depth": 5}),
        Case("one_hot", [const(np.array([1, -2, 4])), const(np.array([0, 7]))], {"depth": 3, "axis": 0}),
    ]


def _grid_cases() -> list[Case]:
    """Every mode and padding mode, both corner conventions, coordinates past the borders
    (several spans for reflection); oracles built from onnx's reference GridSample steps."""
    grid = const(np.random.default_rng(3).uniform(-3.2, 3.2, (1, 3, 2, 2)).astype(np.float32))
    cases = []
    for mode in ("nearest", "linear", "cubic"):
        for padding in ("zeros", "border", "reflection"):
            attrs = {"sizes": (4, 5), "mode": mode, "padding_mode": padding, "align_corners": int(mode == "linear")}
            coordinates = np.stack([np.random.default_rng(4).uniform(-2, n + 1, (1, 3, 2)) for n in (4, 5)], axis=-1)
            if mode == "nearest":
                coordinates = np.round(coordinates)
            cases += [Case("grid_coordinates", [grid], attrs, oracle="grid-coordinates-loop"),
                      Case("grid_taps", [const(coordinates.astype(np.float32))], attrs, oracle="grid-taps-loop")]
    cells = np.stack([np.random.default_rng(5).integers(-1, n + 1, (2, 3, 2, 2)) for n in (4, 5)], axis=-2)
    return cases + [Case("gather_taps", [normal(2, 3, 4, 5), const(cells), normal(2, 3, 2, 2, 2)],
                         oracle="gather-taps-loop")]


def _resize_cases() -> list[Case]:
    """One case per mode and coordinate mode, upsampling one axis and downsampling another."""
    x = normal(1, 2, 4, 6)
    by_scales = {"sizes": (1, 2, 7, 3), "scales": (1.0, 1.0, float(np.float32(1.8)), 0.5)}
    by_sizes = {"sizes": (1, 2, 7, 3), "scales": (1.0, 1.0, 7 / 4, 3 / 6)}
    cases = [Case("resize", [x], {**by_scales, "mode": "nearest", "nearest_mode": rule,
                                  "coordinate_transformation_mode": "asymmetric"})
             for rule in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")]
    for mode in ("linear", "cubic"):
        cases += [Case("resize", [x], {**by_sizes, "mode": mode, "coordinate_transformation_mode": coordinates})
                  for coordinates in ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")]
    cases += [Case("resize", [x], {**by_scales, "mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}),
              Case("resize", [x], {**by_sizes, "mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize",
                                   "roi": (0, 0, 0.2, -0.1, 1, 1, 0.9, 1.3), "extrapolation_value": 3.0}),
              Case("resize", [normal(1, 2, 9, 8)], {"sizes": (1, 2, 4, 3), "scales": (1.0, 1.0, 4 / 9, 3 / 8),
                                                    "mode": "linear", "antialias": 1}),
              Case("resize", [normal(1, 2, 9, 8)], {"sizes": (1, 2, 4, 3), "scales": (1.0, 1.0, 4 / 9, 3 / 8),
                                                    "mode": "cubic", "antialias": 1}),
              Case("resize", [ints(1, 1, 3, 3, dtype="int32")],
                   {"sizes": (1, 1, 5, 2), "scales": (1.0, 1.0, 5 / 3, 2 / 3)})]
    return cases


def _quantization_cases() -> list[Case]:
    # (onnxruntime takes no float8 arrays: float8 is checked against ONNX's reference in
    # tests/frontend/test_onnx_quantize.py)
    scale, per_channel = const(np.float32(0.07)), const(np.float32([0.02, 0.5, 0.11]))
    wide = lambda rng: (rng.standard_normal((2, 3, 4)) * 20).astype(np.float32)  # noqa: E731
    return [
        Case("quantize_linear", [wide, scale, const(np.uint8(128))], {"to": "uint8"}),
        Case("quantize_linear", [wide, per_channel, const(np.int8([-3, 0, 9]))], {"axis": 1, "to": "int8"}),
        Case("dequantize_linear", [ints(2, 3, 4, low=0, high=256, dtype="uint8"), scale, const(np.uint8(120))]),
        Case("dequantize_linear", [ints(2, 3, 4, low=-128, high=128, dtype="int8"), per_channel,
                                   const(np.int8([-3, 0, 9]))], {"axis": -2}),
    ]


CASES: list[Case] = (_unary_cases() + _binary_cases() + _reduce_cases() + _nn_cases() + _linalg_cases()
                     + _shape_cases() + _index_cases() + _quantization_cases())


def normalized(case: Case) -> dict:
    return REGISTRY.get(case.op).normalize_attrs(case.attrs, f"case {case.id}")
