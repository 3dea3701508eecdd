"""One ONNX model per dtype holding every elementwise unary and binary op and every
reduction ONNX defines for it (and onnxruntime's CPU provider runs), for the extreme-value
tests: the node of each (op, dtype) pair, and the pairs left out with the reason."""

from __future__ import annotations

import functools

import ml_dtypes  # noqa: F401 - registers np.dtype('bfloat16')
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from fusionlang.testing.extremes import HALF_FLOATS, INTEGERS

OPSET = 21
ELEM = {"float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16, "float32": TensorProto.FLOAT,
        "int8": TensorProto.INT8, "uint8": TensorProto.UINT8, "int16": TensorProto.INT16,
        "uint16": TensorProto.UINT16, "int32": TensorProto.INT32, "uint32": TensorProto.UINT32,
        "int64": TensorProto.INT64, "uint64": TensorProto.UINT64, "bool": TensorProto.BOOL}
DTYPES = HALF_FLOATS + INTEGERS

UNARY_FLOAT = ("Abs", "Neg", "Reciprocal", "Sqrt", "Exp", "Log", "Ceil", "Floor", "Round", "Sign", "Relu",
               "Sigmoid", "Tanh", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh",
               "Atanh", "Erf", "Softplus", "Softsign", "Elu", "Selu", "LeakyRelu", "HardSigmoid", "HardSwish",
               "Mish", "ThresholdedRelu", "Celu", "Shrink", "Gelu", "IsNaN", "IsInf", "Identity")
UNARY_INTEGER = ("Abs", "Neg", "Sign", "Relu", "Identity", "BitwiseNot")
#: (op, attributes); the second input is b, but d (no 0 or -1) for an integer division, e
#: (0..3) for an integer power and s (within the width) for a shift
BINARY = (("Add", {}), ("Sub", {}), ("Mul", {}), ("Div", {}), ("Pow", {}), ("Min", {}), ("Max", {}),
          ("Mean", {}), ("Sum", {}), ("Mod", {"fmod": 1}), ("Mod", {"fmod": 0}), ("Equal", {}), ("Less", {}),
          ("Greater", {}), ("LessOrEqual", {}), ("GreaterOrEqual", {}), ("BitwiseAnd", {}), ("BitwiseOr", {}),
          ("BitwiseXor", {}), ("BitShift", {"direction": "LEFT"}), ("BitShift", {"direction": "RIGHT"}),
          ("PRelu", {}))
REDUCTIONS = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin", "CumSum")
CAST_TARGETS = ("float16", "bfloat16", "float32") + INTEGERS + ("bool",)
BOOL_RESULTS = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "IsNaN", "IsInf"}


#: (dtype, unit) -> why: pairs fusionlang does not yet compute as onnxruntime does (left
#: out of the models; test_onnx_extreme_values checks that each still differs)
KNOWN_GAPS = {
    (dtype, f"{op}({x})"): "integer composite reductions: onnxruntime computes them in double and saturates"
    for dtype in ("int32", "int64") for op in ("ReduceL2", "ReduceLogSum", "ReduceLogSumExp") for x in "ab"
}
KNOWN_GAPS.update({(dtype, f"ReduceMean({x})"): "decompose.fuse scales an integer mean by a float: refused"
                   for dtype in ("int32", "int64") for x in "ab"})


@functools.cache
def units(dtype: str) -> tuple[list[tuple], list[tuple[str, str]]]:
    """(units, skipped) for ``dtype``: each unit (name, nodes, outputs {name: dtype},
    initializers) one op on the shared inputs; skipped (name, why) where onnxruntime's
    CPU provider has no kernel, ONNX does not define the op for the type, or the pair is
    a known gap."""
    kept, skipped = [], []
    for unit in candidates(dtype):
        why = KNOWN_GAPS.get((dtype, unit[0])) or _refused(dtype, unit)
        if why is None:
            kept.append(unit)
        else:
            skipped.append((unit[0], why))
    return kept, skipped


def candidates(dtype: str):
    integer = dtype in INTEGERS
    for op in UNARY_INTEGER if integer else UNARY_FLOAT:
        yield _unary(op, dtype)
    yield _clip(dtype)
    for op, attrs in BINARY:
        yield _binary(op, attrs, dtype)
    for op in REDUCTIONS:
        for x in "ab":
            yield _reduction(op, x, dtype)
    for target in CAST_TARGETS:
        if target != dtype:
            yield _unit(f"Cast_to_{target}", [helper.make_node("Cast", ["a"], ["Cast_to_" + target],
                                                               to=ELEM[target])], {"Cast_to_" + target: target})


def _unit(name: str, nodes, outputs: dict[str, str], inits: dict | None = None) -> tuple:
    return name, nodes, outputs, inits or {}


def _unary(op: str, dtype: str) -> tuple:
    attrs = {"Gelu": {"approximate": "tanh"}}.get(op, {})
    out = f"{op}_y"
    return _unit(op, [helper.make_node(op, ["a"], [out], **attrs)], {out: "bool" if op in BOOL_RESULTS else dtype})


def _clip(dtype: str) -> tuple:
    if dtype in INTEGERS:
        info = np.iinfo(dtype)
        low, high = (np.array(-2 if info.min < 0 else 1, dtype), np.array(int(info.max) >> 1, dtype))
    else:  # -0.0: a bound's sign is kept where it is picked
        low, high = (np.array(-0.0, _numpy_dtype(dtype)), np.array(2.5, _numpy_dtype(dtype)))
    inits = {"clip_lo": low, "clip_hi": high}
    return _unit("Clip", [helper.make_node("Clip", ["a", "clip_lo", "clip_hi"], ["Clip_y"])], {"Clip_y": dtype},
                 inits)


def _binary(op: str, attrs: dict, dtype: str) -> tuple:
    name = op + "".join(f"_{k}{v}" for k, v in attrs.items())
    second = "b"
    if dtype in INTEGERS:
        second = {"Div": "d", "Mod": "d", "Pow": "e", "BitShift": "s"}.get(op, "b")
    out = f"{name}_y"
    return _unit(name, [helper.make_node(op, ["a", second], [out], **attrs)],
                 {out: "bool" if op in BOOL_RESULTS else dtype})


def _reduction(op: str, x: str, dtype: str) -> tuple:
    name, out = f"{op}({x})", f"{op}_{x}_y"
    if op == "CumSum":
        return _unit(name, [helper.make_node(op, [x, "axis1"], [out])], {out: dtype})
    if op.startswith("Arg"):
        return _unit(name, [helper.make_node(op, [x], [out], axis=1, keepdims=1)], {out: "int64"})
    return _unit(name, [helper.make_node(op, [x, "axes1"], [out], keepdims=1)], {out: dtype})


SHARED = {"axes1": np.array([1], np.int64), "axis1": np.array(1, np.int64)}


def inputs_of(dtype: str) -> tuple[str, ...]:
    return ("a", "b", "d", "e", "s") if dtype in INTEGERS else ("a", "b")


def build(dtype: str, unit_list, width: int, *, float_outputs: bool = False) -> onnx.ModelProto:
    """The model computing ``unit_list`` on [width, width] inputs of ``dtype``; with
    ``float_outputs`` bfloat16 results are cast to float32 (exact), as onnxruntime hands
    no bfloat16 arrays back to NumPy."""
    nodes, outputs, inits = [], [], dict(SHARED)
    for _, unit_nodes, unit_outputs, unit_inits in unit_list:
        nodes += unit_nodes
        inits.update(unit_inits)
        for name, out_dtype in unit_outputs.items():
            if float_outputs and out_dtype == "bfloat16":
                nodes.append(helper.make_node("Cast", [name], [name + "_f32"], to=TensorProto.FLOAT))
                name, out_dtype = name + "_f32", "float32"
            outputs.append(helper.make_tensor_value_info(name, ELEM[out_dtype], None))
    used = {i for n in nodes for i in n.input}
    graph = helper.make_graph(
        nodes, f"extremes_{dtype}",
        [helper.make_tensor_value_info(x, ELEM[dtype], [width, width]) for x in inputs_of(dtype)],
        outputs, [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items() if k in used])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 10
    return model


def _refused(dtype: str, unit) -> str | None:
    model = build(dtype, [unit], 2, float_outputs=True)
    try:
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        return "not defined by ONNX: " + _first_line(e)
    ones = np.ones((2, 2), _numpy_dtype(dtype))
    try:  # (a kernel may refuse its attributes only when it runs: float Mod with fmod=0)
        run_onnxruntime(session_of(model), dtype, feeds_of(dtype, ones, ones))
    except Exception as e:  # noqa: BLE001 - onnxruntime raises its own classes per status
        return "onnxruntime: " + _first_line(e)
    return None


def _numpy_dtype(dtype: str) -> np.dtype:
    return np.dtype("bfloat16") if dtype == "bfloat16" else np.dtype(dtype)


def session_of(model: onnx.ModelProto):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def run_onnxruntime(session, dtype: str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime

    if dtype != "bfloat16":
        return session.run(None, feeds)
    # (onnxruntime takes bfloat16 only as an OrtValue of the raw bit patterns)
    values = {k: onnxruntime.OrtValue.ortvalue_from_numpy_with_onnx_type(v.view(np.uint16), TensorProto.BFLOAT16)
              for k, v in feeds.items()}
    return [v.numpy() for v in session.run_with_ort_values(None, values)]


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text[:160]


def feeds_of(dtype: str, a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    """The model's inputs from a and b: for integers the divisor d (b without 0 and -1,
    which trap in onnxruntime's C++ and which it leaves undefined), the exponent e (b mod 4)
    and the shift s (b mod the width: onnxruntime shifts by the width or more are C++'s
    undefined behaviour)."""
    feeds = {"a": a, "b": b}
    if dtype in INTEGERS:
        trap = b == 0
        if np.iinfo(dtype).min < 0:
            trap |= b == b.dtype.type(-1)
        feeds["d"] = np.where(trap, b.dtype.type(1), b)
        feeds["e"] = (b % b.dtype.type(4)).astype(dtype)
        feeds["s"] = (b % b.dtype.type(8 * b.dtype.itemsize)).astype(dtype)
    return feeds


# ----- where onnxruntime is arguably wrong: what we compute instead --------------------


def _nan_rows(x: np.ndarray) -> np.ndarray:
    return np.isnan(x.astype(np.float32)).any(axis=1, keepdims=True)


def _nan_propagates(feeds, want, x):
    """onnxruntime's float16 and float32 ReduceMax and ReduceMin keep a NaN only where it
    comes first in its row (its float64 ones, NumPy and IEEE's maximum wherever): NaN."""
    return np.where(_nan_rows(feeds[x]), np.float32(np.nan).astype(want.dtype), want)


def _first_nan_index(feeds, want, x):
    """onnxruntime's float16 ArgMax and ArgMin pass over a NaN (std::max_element): the
    first NaN's index, as NumPy and our ReduceMax (NaN wins) agree."""
    first = np.argmax(np.isnan(feeds[x].astype(np.float32)), axis=1)[:, None]
    return np.where(_nan_rows(feeds[x]), first, want)


def _sign_of_nan(feeds, want, x):
    """onnxruntime's float16 and bfloat16 Sign give 0 for NaN, its float32 and float64 ones NaN."""
    return np.where(np.isnan(feeds[x].astype(np.float32)), np.float32(np.nan).astype(want.dtype), want)


def _zero_ties_take_b(feeds, want, x):
    """onnxruntime's float16 Min and Max of +0 and -0 give a, its float32 and float64 ones
    b (either is a right answer to IEEE's minimum): b, as for float32."""
    zeros = (feeds["a"] == 0) & (feeds["b"] == 0)
    return np.where(zeros, feeds["b"].astype(want.dtype), want)


def _exact_product(feeds, want, x):
    """onnxruntime's float16 ReduceProd runs in float32 in its own order: [6e-8] * 10 then
    -inf underflows to 0 and gives NaN, another order -inf. Ours is the product without
    an intermediate over- or underflow (in double), rounded once."""
    with np.errstate(all="ignore"):
        exact = np.prod(feeds[x].astype(np.float64), axis=1, keepdims=True)
        return exact.astype(feeds[x].dtype).astype(want.dtype)


def _half_to_uint32(feeds, want, x):
    """onnxruntime converts a float16 or bfloat16 to uint32 through int64 (NaN, -inf and
    -2**32 give 0), a float32 or float64 as x86's vector code does (through int32: 2**31):
    one rule for every float type, the float32 one (docs/ops.md, cast)."""
    v = feeds[x].astype(np.float32)
    return np.where(np.isnan(v) | (v < -2.0**31), np.uint32(1 << 31), want)


def _wrapped(op: str):
    def wrapped(feeds, want, x):
        """onnxruntime sums (and multiplies) integers in double and saturates (an int64 sum
        past 2**53 is inexact): the exact result, wrapped as Add wraps (NumPy's)."""
        rows = feeds[x].astype(object)
        terms = {"ReduceL1": np.abs(rows), "ReduceSumSquare": rows * rows}.get(op, rows)
        exact = [int(np.prod(r)) if op == "ReduceProd" else int(sum(r)) for r in terms.tolist()]
        bits = 8 * want.dtype.itemsize
        return np.array([[(v + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))] for v in exact], want.dtype)

    return wrapped


#: (dtypes, op) -> what we compute where onnxruntime's value is arguably wrong (from the
#: feeds and onnxruntime's value)
DECIDED = {
    (HALF_FLOATS, "ReduceMax"): _nan_propagates,
    (HALF_FLOATS, "ReduceMin"): _nan_propagates,
    (HALF_FLOATS, "ArgMax"): _first_nan_index,
    (HALF_FLOATS, "ArgMin"): _first_nan_index,
    (HALF_FLOATS, "Sign"): _sign_of_nan,
    (HALF_FLOATS, "ReduceProd"): _exact_product,
    (HALF_FLOATS, "Min"): _zero_ties_take_b,
    (HALF_FLOATS, "Max"): _zero_ties_take_b,
    (HALF_FLOATS, "Cast_to_uint32"): _half_to_uint32,
    **{(("int32", "int64"), op): _wrapped(op) for op in ("ReduceSum", "ReduceProd", "ReduceL1", "ReduceSumSquare")},
}


def expected(dtype: str, output: str, feeds: dict[str, np.ndarray], want: np.ndarray) -> np.ndarray:
    """onnxruntime's value ``want`` of ``output``, or ours where DECIDED says it is wrong."""
    for (dtypes, op), decide in DECIDED.items():
        if dtype in dtypes and (output.startswith(op + "_") or output == op):
            x = "b" if "_b_" in output else "a"
            return decide(feeds, want, x)
    return want
