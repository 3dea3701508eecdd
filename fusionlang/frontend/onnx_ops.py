"""One converter per ONNX op: an ONNX node (opset 6 on) -> fusionlang nodes.

Ops that map 1:1 onto a registry op are table rows; the others are functions. A
converter reads attributes and constant inputs through its NodeContext, and whatever an
opset passes as a tensor input but fusionlang keeps as an attribute (shapes, axes, pads,
clip bounds) must be constant by then: ``ctx.const`` raises ModelError otherwise.

Legacy forms are rewritten into today's semantics here, so nothing after import knows
about opsets: opset-6 ``broadcast``/``axis`` arithmetic becomes a reshape plus numpy
broadcasting, pre-13 Softmax becomes reshape/softmax/reshape, ``auto_pad`` becomes
explicit pads.
"""

from __future__ import annotations

import itertools
import math
from typing import Callable

import numpy as np
from onnx import numpy_helper

from fusionlang.errors import ShapeError
from fusionlang.frontend.onnx_attention import CONVERTERS as TRANSFORMER_CONVERTERS
from fusionlang.frontend.onnx_context import NodeContext, onnx_dtype
from fusionlang.frontend.onnx_control import CONTROL_CONVERTERS
from fusionlang.frontend.onnx_dft import convert_dft, convert_stft
from fusionlang.frontend.onnx_einsum import convert_einsum
from fusionlang.frontend.onnx_index_ops import INDEX_CONVERTERS
from fusionlang.frontend.onnx_rnn import RNN_CONVERTERS
from fusionlang.frontend.onnx_newops import CONVERTERS as NEWEST_CONVERTERS
from fusionlang.frontend.onnx_sequences import SEQUENCE_CONVERTERS
from fusionlang.ir.types import HALF_FLOATS

Converter = Callable[[NodeContext], None]
CONVERTERS: dict[str, Converter] = {}


def converts(*op_types: str):
    def register(fn: Converter) -> Converter:
        for op_type in op_types:
            CONVERTERS[op_type] = fn
        return fn

    return register


# ----- 1:1 ops ------------------------------------------------------------------------
#: ONNX op -> (fusionlang op, {ONNX attribute: fusionlang attribute})
SIMPLE: dict[str, tuple[str, dict[str, str]]] = {
    "Neg": ("neg", {}),
    "Abs": ("abs", {}),
    "Exp": ("exp", {}),
    "Log": ("log", {}),
    "Sqrt": ("sqrt", {}),
    "Reciprocal": ("reciprocal", {}),
    "Erf": ("erf", {}),
    "Tanh": ("tanh", {}),
    "Sigmoid": ("sigmoid", {}),
    "Relu": ("relu", {}),
    "Softplus": ("softplus", {}),
    "Softsign": ("softsign", {}),
    "Floor": ("floor", {}),
    "Ceil": ("ceil", {}),
    "Sin": ("sin", {}),
    "Cos": ("cos", {}),
    "Sign": ("sign", {}),
    "Not": ("not", {}),
    "LeakyRelu": ("leaky_relu", {"alpha": "alpha"}),
    "Elu": ("elu", {"alpha": "alpha"}),
    "Selu": ("selu", {"alpha": "alpha", "gamma": "gamma"}),
    "HardSigmoid": ("hard_sigmoid", {"alpha": "alpha", "beta": "beta"}),
    "Gelu": ("gelu", {"approximate": "approximate"}),
    "Where": ("where", {}),
    "Max": ("max", {}),
    "Min": ("min", {}),
    "Sum": ("sum", {}),
    "Mean": ("mean", {}),
    "MatMul": ("matmul", {}),
    "Transpose": ("transpose", {"perm": "perm"}),
    "Concat": ("concat", {"axis": "axis"}),
    "Gather": ("gather", {"axis": "axis"}),
    "Flatten": ("flatten", {"axis": "axis"}),
    "GlobalAveragePool": ("global_average_pool", {}),
    "GlobalMaxPool": ("global_max_pool", {}),
    "LRN": ("lrn", {"size": "size", "alpha": "alpha", "beta": "beta", "bias": "bias"}),
    "InstanceNormalization": ("instance_norm", {"epsilon": "epsilon"}),
    "IsNaN": ("is_nan", {}),
    "IsInf": ("is_inf", {"detect_positive": "detect_positive", "detect_negative": "detect_negative"}),
    "GatherElements": ("gather_elements", {"axis": "axis"}),
    "GatherND": ("gather_nd", {"batch_dims": "batch_dims"}),
    "Mod": ("remainder", {"fmod": "fmod"}),
    "Shrink": ("shrink", {"lambd": "lambd", "bias": "bias"}),
    "Mish": ("mish", {}),
    "Tan": ("tan", {}),
    "Asin": ("asin", {}),
    "Acos": ("acos", {}),
    "Atan": ("atan", {}),
    "Sinh": ("sinh", {}),
    "Cosh": ("cosh", {}),
    "Asinh": ("asinh", {}),
    "Acosh": ("acosh", {}),
    "Atanh": ("atanh", {}),
    "Round": ("round", {}),
    "BitwiseAnd": ("bitwise_and", {}),
    "BitwiseOr": ("bitwise_or", {}),
    "BitwiseXor": ("bitwise_xor", {}),
    "BitwiseNot": ("bitwise_not", {}),
}


def _simple(ctx: NodeContext) -> None:
    op, renames = SIMPLE[ctx.op_type]
    attrs = {ours: ctx.attrs[theirs] for theirs, ours in renames.items() if theirs in ctx.attrs}
    ctx.emit_output(op, ctx.inputs(), attrs)


converts(*SIMPLE)(_simple)


# ----- broadcasting arithmetic --------------------------------------------------------
#: ops whose opset < 7 forms broadcast only when asked (``broadcast=1``), aligning B at ``axis``
BINARY = {
    "Add": "add",
    "Sub": "sub",
    "Mul": "mul",
    "Div": "div",
    "Pow": "pow",
    "Equal": "equal",
    "Less": "less",
    "Greater": "greater",
    "LessOrEqual": "less_equal",
    "GreaterOrEqual": "greater_equal",
    "And": "and",
    "Or": "or",
    "Xor": "xor",
}


@converts(*BINARY)
def _binary(ctx: NodeContext) -> None:
    a, b = ctx.input(0), ctx.input(1)
    if ctx.opset < 7:
        b = legacy_broadcast(ctx, a, b)
    ctx.emit_output(BINARY[ctx.op_type], [a, b])


def legacy_broadcast(ctx: NodeContext, a: str, b: str) -> str:
    """B reshaped so numpy broadcasting reproduces the opset-1..6 rule.

    The legacy rule matches B's dims (each equal, or 1) against A's dims starting at
    ``axis`` (default: the suffix); numpy aligns trailing dims, so B gets trailing
    size-1 axes.
    """
    a_shape, b_shape = ctx.graph.types[a].shape, ctx.graph.types[b].shape
    if not ctx.attr("broadcast", 0):
        if a_shape != b_shape:
            raise ctx.fail(f"shapes {list(a_shape)} and {list(b_shape)} differ but broadcast=0", ShapeError)
        return b
    if math.prod(b_shape) == 1 or "axis" not in ctx.attrs:
        return b
    axis = ctx.attrs["axis"]
    axis = axis + len(a_shape) if axis < 0 else axis
    trailing = len(a_shape) - axis - len(b_shape)
    fits = all(n == m or m == 1 for n, m in zip(a_shape[axis:], b_shape))
    if axis < 0 or trailing < 0 or not fits:
        raise ctx.fail(f"B of shape {list(b_shape)} does not match A {list(a_shape)} at axis {ctx.attrs['axis']}",
                       ShapeError)
    if trailing == 0:
        return b
    return ctx.emit1("reshape", [b], {"shape": b_shape + (1,) * trailing})


@converts("PRelu")
def _prelu(ctx: NodeContext) -> None:
    x, slope = ctx.input(0), ctx.input(1)
    x_shape, slope_shape = ctx.type(0).shape, ctx.type(1).shape
    if ctx.opset < 7 and len(slope_shape) == 1 and len(x_shape) > 2 and slope_shape[0] == x_shape[1] > 1:
        # PRelu-6 applies a 1-D slope per channel (axis 1), not along the last axis
        slope = ctx.emit1("reshape", [slope], {"shape": slope_shape + (1,) * (len(x_shape) - 2)})
    ctx.emit_output("prelu", [x, slope])


# ----- constants and shapes -----------------------------------------------------------
@converts("Constant")
def _constant(ctx: NodeContext) -> None:
    attrs = ctx.attrs
    if "value" in attrs:
        array = numpy_helper.to_array(attrs["value"])
    elif "value_float" in attrs:
        array = np.array(attrs["value_float"], np.float32)
    elif "value_floats" in attrs:
        array = np.array(attrs["value_floats"], np.float32)
    elif "value_int" in attrs:
        array = np.array(attrs["value_int"], np.int64)
    elif "value_ints" in attrs:
        array = np.array(attrs["value_ints"], np.int64)
    elif "sparse_value" in attrs:
        array = _dense(attrs["sparse_value"])
    else:
        raise ctx.unsupported(f"a Constant with attributes {sorted(attrs) or 'none'} (string tensors are not "
                              "supported)")
    ctx.set_constant(0, array)


def _dense(sparse) -> np.ndarray:
    values = numpy_helper.to_array(sparse.values)
    indices = numpy_helper.to_array(sparse.indices).astype(np.int64)
    dense = np.zeros(tuple(sparse.dims), values.dtype)
    if indices.ndim == 1:  # linear indices into the flattened tensor
        dense.reshape(-1)[indices] = values
    else:  # one row of coordinates per value
        dense[tuple(indices.T)] = values
    return dense


@converts("ConstantOfShape")
def _constant_of_shape(ctx: NodeContext) -> None:
    value = ctx.attr("value")
    value = numpy_helper.to_array(value).reshape(-1) if value is not None else np.zeros(1, np.float32)
    ctx.ints(0, "shape")  # a shape known only at run time is refused here, naming the node
    ctx.emit_output("constant_of_shape", [ctx.input(0)], {"value": value})


@converts("Shape")
def _shape(ctx: NodeContext) -> None:
    shape = ctx.type(0).shape
    rank = len(shape)
    start, end = ctx.attr("start", 0), ctx.attr("end", rank)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    ctx.set_constant(0, np.array(shape[start:end], np.int64))


@converts("Size")
def _size(ctx: NodeContext) -> None:
    ctx.set_constant(0, np.array(math.prod(ctx.type(0).shape), np.int64))


@converts("Identity")
def _identity(ctx: NodeContext) -> None:
    if ctx.is_sequence(0):  # Identity passes sequences through too (opset 14 on)
        ctx.set_sequence(0, ctx.sequence(0, "input"))
        return
    ctx.alias(0, ctx.input(0))


@converts("Dropout")
def _dropout(ctx: NodeContext) -> None:
    # an importer for inference: dropout is the identity unless the model insists on
    # training (opset >= 12 training_mode input); the legacy is_test flag is ignored
    if ctx.has_input(2) and bool(ctx.scalar(2, "training_mode")):
        raise ctx.unsupported("training_mode=true (random dropout)")
    ctx.reject_used_outputs(1, "the dropout mask")
    ctx.alias(0, ctx.input(0))


@converts("Cast")
def _cast(ctx: NodeContext) -> None:
    to = onnx_dtype(ctx.attr("to"), f"node {ctx.label!r} (Cast) target")
    ctx.emit_output("cast", [ctx.input(0)], {"to": to, "saturate": ctx.attr("saturate", 1)})


@converts("CastLike")
def _cast_like(ctx: NodeContext) -> None:
    ctx.emit_output("cast", [ctx.input(0)], {"to": ctx.type(1).dtype, "saturate": ctx.attr("saturate", 1)})


# ----- data movement with tensor-valued parameters -------------------------------------
@converts("Reshape")
def _reshape(ctx: NodeContext) -> None:
    attrs = {"shape": ctx.ints(1, "shape")}
    if ctx.opset >= 14:
        attrs["allowzero"] = ctx.attr("allowzero", 0)
    ctx.emit_output("reshape", [ctx.input(0)], attrs)


@converts("Expand")
def _expand(ctx: NodeContext) -> None:
    ctx.emit_output("expand", [ctx.input(0)], {"shape": ctx.ints(1, "shape")})


@converts("Tile")
def _tile(ctx: NodeContext) -> None:
    ctx.emit_output("tile", [ctx.input(0)], {"repeats": ctx.ints(1, "repeats")})


def _axes(ctx: NodeContext, input_since: int, required: bool) -> tuple[int, ...]:
    """Axes from the attribute (opset < input_since) or from input 1."""
    if ctx.opset < input_since:
        axes = ctx.attr("axes")
    else:
        axes = ctx.ints(1, "axes") if ctx.has_input(1) else None
    if axes is None and required:
        raise ctx.fail("axes are required")
    return tuple(axes or ())


@converts("Squeeze")
def _squeeze(ctx: NodeContext) -> None:
    ctx.emit_output("squeeze", [ctx.input(0)], {"axes": _axes(ctx, 13, required=False)})


@converts("Unsqueeze")
def _unsqueeze(ctx: NodeContext) -> None:
    ctx.emit_output("unsqueeze", [ctx.input(0)], {"axes": _axes(ctx, 13, required=True)})


@converts("Split")
def _split(ctx: NodeContext) -> None:
    shape = ctx.type(0).shape
    axis = ctx.attr("axis", 0)
    if not -len(shape) <= axis < len(shape):
        raise ctx.fail(f"axis={axis} is out of range for rank {len(shape)}", ShapeError)
    dim = shape[axis]
    if ctx.opset >= 13:
        sizes = ctx.ints(1, "split") if ctx.has_input(1) else None
    else:
        sizes = ctx.attr("split")
    n = ctx.num_outputs
    if not sizes:
        if ctx.opset >= 18 and "num_outputs" in ctx.attrs:
            n = ctx.attrs["num_outputs"]
            if n != ctx.num_outputs:
                raise ctx.fail(f"num_outputs={n} but the node has {ctx.num_outputs} outputs")
            chunk = -(-dim // n)  # the last chunk takes what is left
            sizes = [chunk] * (n - 1) + [dim - chunk * (n - 1)]
        elif dim % n:
            raise ctx.fail(f"cannot split dim {dim} of axis {axis} into {n} equal parts", ShapeError)
        else:
            sizes = [dim // n] * n
    ctx.emit("split", [ctx.input(0)], {"axis": axis, "split": tuple(sizes)}, list(ctx.proto.output))


@converts("Slice")
def _slice(ctx: NodeContext) -> None:
    if ctx.opset < 10:
        starts, ends = tuple(ctx.attr("starts", ())), tuple(ctx.attr("ends", ()))
        axes = ctx.attr("axes")
        steps = None
    else:
        starts, ends = ctx.ints(1, "starts"), ctx.ints(2, "ends")
        axes = ctx.ints(3, "axes") if ctx.has_input(3) else None
        steps = ctx.ints(4, "steps") if ctx.has_input(4) else None
    if len(starts) != len(ends):
        raise ctx.fail(f"starts {list(starts)} and ends {list(ends)} differ in length", ShapeError)
    axes = tuple(axes) if axes is not None else tuple(range(len(starts)))
    steps = tuple(steps) if steps is not None else (1,) * len(starts)
    ctx.emit_output("slice", [ctx.input(0)], {"starts": starts, "ends": ends, "axes": axes, "steps": steps})


@converts("Pad")
def _pad(ctx: NodeContext) -> None:
    x = ctx.type(0)
    mode = ctx.attr("mode", "constant")
    if ctx.opset < 11:
        pads = tuple(ctx.attr("pads", ctx.attr("paddings", ())))
        value = ctx.attr("value", 0.0)
    else:
        pads = ctx.ints(1, "pads")
        value = ctx.scalar(2, "constant_value") if ctx.has_input(2) else 0.0
        if ctx.has_input(3):
            pads = _pads_for_axes(ctx, pads, ctx.ints(3, "axes"), x.rank)
    ctx.emit_output("pad", [ctx.input(0)], {"pads": pads, "mode": mode, "value": float(value)})


def _pads_for_axes(ctx: NodeContext, pads: tuple[int, ...], axes: tuple[int, ...], rank: int) -> tuple[int, ...]:
    if len(pads) != 2 * len(axes):
        raise ctx.fail(f"pads {list(pads)} should have 2 entries per axis of {list(axes)}", ShapeError)
    full = [0] * (2 * rank)
    for k, axis in enumerate(axes):
        if not -rank <= axis < rank:
            raise ctx.fail(f"pad axis {axis} is out of range for rank {rank}", ShapeError)
        axis %= rank
        full[axis], full[rank + axis] = pads[k], pads[len(axes) + k]
    return tuple(full)


@converts("Clip")
def _clip(ctx: NodeContext) -> None:
    x = ctx.type(0)
    if x.is_float:
        low, high = float("-inf"), float("inf")
    else:  # integer clip: infinite bounds have no integer value
        info = np.iinfo(x.dtype)
        low, high = info.min, info.max
    if ctx.opset < 11:
        low, high = ctx.attr("min", low), ctx.attr("max", high)
    else:
        low = ctx.scalar(1, "min") if ctx.has_input(1) else low
        high = ctx.scalar(2, "max") if ctx.has_input(2) else high
    ctx.emit_output("clip", [ctx.input(0)], {"min": low, "max": high})


# ----- reductions ---------------------------------------------------------------------
#: ONNX reduction -> (fusionlang reduce op, opset where axes became an input)
REDUCE = {
    "ReduceSum": ("reduce_sum", 13),
    "ReduceMean": ("reduce_mean", 18),
    "ReduceMax": ("reduce_max", 18),
    "ReduceMin": ("reduce_min", 18),
    "ReduceProd": ("reduce_prod", 18),
}
#: reductions written with the ones above: (elementwise op before, reduction, op after)
COMPOSITE_REDUCE = {
    "ReduceSumSquare": ("square", "reduce_sum", None),
    "ReduceL1": ("abs", "reduce_sum", None),
    "ReduceL2": ("square", "reduce_sum", "sqrt"),
    "ReduceLogSum": (None, "reduce_sum", "log"),
}


def _reduce_attrs(ctx: NodeContext, input_since: int) -> dict:
    attrs = {"axes": _axes(ctx, input_since, required=False), "keepdims": ctx.attr("keepdims", 1)}
    if ctx.opset >= input_since:
        attrs["noop_with_empty_axes"] = ctx.attr("noop_with_empty_axes", 0)
    return attrs


@converts(*REDUCE)
def _reduce(ctx: NodeContext) -> None:
    op, input_since = REDUCE[ctx.op_type]
    ctx.emit_output(op, [ctx.input(0)], _reduce_attrs(ctx, input_since))


def _computed_in(ctx: NodeContext) -> str:
    """The dtype a reduction written with several ops computes in: float32 for 16-bit
    floats (a float16 ReduceL2 of a row holding 300 squared it past 65504 to inf where
    onnxruntime gives 300), else the input's own."""
    dtype = ctx.type(0).dtype
    return "float32" if dtype in HALF_FLOATS else dtype


def _as(ctx: NodeContext, value: str, dtype: str) -> str:
    return value if ctx.graph.types[value].dtype == dtype else ctx.emit1("cast", [value], {"to": dtype})


def _emit_last(ctx: NodeContext, op: str, inputs: list[str], attrs: dict | None = None) -> None:
    """The reduction's last op as ONNX output 0, rounded once to the node's dtype where
    the steps computed in a wider one."""
    if _computed_in(ctx) == ctx.type(0).dtype:
        ctx.emit_output(op, inputs, attrs)
    else:
        ctx.emit_output("cast", [ctx.emit1(op, inputs, attrs)], {"to": ctx.type(0).dtype})


@converts(*COMPOSITE_REDUCE)
def _composite_reduce(ctx: NodeContext) -> None:
    before, op, after = COMPOSITE_REDUCE[ctx.op_type]
    x = _as(ctx, ctx.input(0), _computed_in(ctx))
    if before == "square":
        x = ctx.emit1("mul", [x, x])
    elif before:
        x = ctx.emit1(before, [x])
    attrs = _reduce_attrs(ctx, 18)
    if after is None:
        _emit_last(ctx, op, [x], attrs)
    else:
        _emit_last(ctx, after, [ctx.emit1(op, [x], attrs)])


@converts("ReduceLogSumExp")
def _reduce_log_sum_exp(ctx: NodeContext) -> None:
    # log(sum(exp(x - m))) + m with m the max where it is finite, else 0: exp never
    # overflows, and a row holding +inf (m = inf) gives inf and one of only -inf gives -inf,
    # as onnxruntime does, where x - m would be inf - inf = NaN
    x = _as(ctx, ctx.input(0), _computed_in(ctx))
    attrs = _reduce_attrs(ctx, 18)
    shift = _finite_or_zero(ctx, ctx.emit1("reduce_max", [x], {**attrs, "keepdims": 1}))
    total = ctx.emit1("reduce_sum", [ctx.emit1("exp", [ctx.emit1("sub", [x, shift])])], attrs)
    if not attrs["keepdims"]:
        shift = _finite_or_zero(ctx, ctx.emit1("reduce_max", [x], attrs))
    _emit_last(ctx, "add", [ctx.emit1("log", [total]), shift])


def _finite_or_zero(ctx: NodeContext, value: str) -> str:
    """``value`` where it is finite, 0 where it is +-inf or NaN (v - v is 0 just where v is
    finite)."""
    zero = ctx.constant(0, ctx.graph.types[value].dtype)
    finite = ctx.emit1("equal", [ctx.emit1("sub", [value, value]), zero])
    return ctx.emit1("where", [finite, value, zero])


# ----- softmax ------------------------------------------------------------------------
@converts("Softmax", "LogSoftmax")
def _softmax(ctx: NodeContext) -> None:
    op = "softmax" if ctx.op_type == "Softmax" else "log_softmax"
    _along_axis(ctx, lambda x, axis, output: ctx.emit1(op, [x], {"axis": axis}, output))


@converts("Hardmax")
def _hardmax(ctx: NodeContext) -> None:
    # 1 at the first maximum along the axis, 0 elsewhere: the place of the maximum
    # (ArgMax's index_of) compared with the positions along the axis
    dtype = ctx.type(0).dtype

    def one_hot_of_max(x: str, axis: int, output: str) -> str:
        shape = ctx.graph.types[x].shape
        if not -len(shape) <= axis < len(shape):
            raise ctx.fail(f"axis={axis} is out of range for rank {len(shape)}", ShapeError)
        axis %= len(shape)
        extreme = ctx.emit1("reduce_max", [x], {"axes": (axis,), "keepdims": 1})
        place = ctx.emit1("index_of", [x, extreme], {"axis": axis, "keepdims": 1, "last": 0})
        positions = np.arange(shape[axis], dtype=np.int64).reshape((-1,) + (1,) * (len(shape) - axis - 1))
        hit = ctx.emit1("equal", [ctx.constant(positions), place])
        return ctx.emit1("cast", [hit], {"to": dtype}, output)

    _along_axis(ctx, one_hot_of_max)


def _along_axis(ctx: NodeContext, apply: Callable[[str, int, str], str]) -> None:
    """Output 0 is ``apply(x, axis, output)`` along ONNX's axis attribute; before opset 13
    (Softmax, LogSoftmax, Hardmax) the input is flattened to 2-D at ``axis`` and each row
    is one such axis."""
    x = ctx.input(0)
    if ctx.opset >= 13:
        apply(x, ctx.attr("axis", -1), ctx.output(0))
        return
    shape = ctx.type(0).shape
    rank = len(shape)
    axis = ctx.attr("axis", 1)
    if not -rank <= axis < max(rank, 1):
        raise ctx.fail(f"axis={axis} is out of range for rank {rank}", ShapeError)
    axis = axis % rank if rank else 0
    if math.prod(shape[axis + 1:]) == 1:
        # the rows are exactly the `axis` fibres: no reshaping needed
        apply(x, axis, ctx.output(0))
        return
    rows = ctx.emit1("reshape", [x], {"shape": (math.prod(shape[:axis]), math.prod(shape[axis:]))})
    ctx.emit_output("reshape", [apply(rows, 1, "")], {"shape": shape})


# ----- matrix products ----------------------------------------------------------------
@converts("Gemm")
def _gemm(ctx: NodeContext) -> None:
    inputs = [ctx.input(0), ctx.input(1)]
    if ctx.has_input(2):
        c = ctx.input(2)
        if ctx.opset < 7 and not ctx.attr("broadcast", 0):
            a, b = ctx.type(0).shape, ctx.type(1).shape
            m = a[1] if ctx.attr("transA", 0) else a[0]
            n = b[0] if ctx.attr("transB", 0) else b[1]
            if ctx.graph.types[c].shape != (m, n):
                raise ctx.fail(f"C of shape {list(ctx.graph.types[c].shape)} must be [{m}, {n}] when broadcast=0",
                               ShapeError)
        inputs.append(c)
    attrs = {"alpha": ctx.attr("alpha", 1.0), "beta": ctx.attr("beta", 1.0),
             "trans_a": ctx.attr("transA", 0), "trans_b": ctx.attr("transB", 0)}
    ctx.emit_output("gemm", inputs, attrs)


converts("Einsum")(convert_einsum)
converts("DFT")(convert_dft)
converts("STFT")(convert_stft)

#: the largest matrices Det expands by cofactors (the expansion has 2**n * n products)
MAX_DET_SIZE = 5


@converts("Det")
def _det(ctx: NodeContext) -> None:
    # Laplace expansion along the rows: det(rows k.., columns cols) sums, over each column
    # c of cols with alternating signs, x[k, c] * det(rows k+1.., cols without c); the
    # minors are shared across the terms (one per subset of columns), all elementwise over
    # the batch axes, so the whole expansion fuses into one loop over the batch
    x = ctx.type(0)
    if x.rank < 2 or x.shape[-1] != x.shape[-2]:
        raise ctx.fail(f"input {x} must be square matrices [..., M, M]", ShapeError)
    n = x.shape[-1]
    if not 1 <= n <= MAX_DET_SIZE:
        raise ctx.unsupported(f"Det of {n}x{n} matrices (cofactor expansion up to {MAX_DET_SIZE}x{MAX_DET_SIZE})")
    batch = x.shape[:-2]

    def element(i: int, j: int) -> str:
        cell = ctx.emit1("slice", [ctx.input(0)], {"starts": (i, j), "ends": (i + 1, j + 1), "axes": (-2, -1),
                                                   "steps": (1, 1)})
        return ctx.emit1("reshape", [cell], {"shape": batch})

    elements = {(i, j): element(i, j) for i in range(n) for j in range(n)}
    minors: dict[tuple[int, ...], str] = {(c,): elements[n - 1, c] for c in range(n)}
    for row in range(n - 2, -1, -1):
        for cols in itertools.combinations(range(n), n - row):
            total = ""
            for t, c in enumerate(cols):
                term = ctx.emit1("mul", [elements[row, c], minors[cols[:t] + cols[t + 1:]]])
                total = term if not total else ctx.emit1("sub" if t % 2 else "add", [total, term])
            minors[cols] = total
    ctx.alias(0, minors[tuple(range(n))])


# ----- windows: conv and pooling ------------------------------------------------------
def explicit_pads(ctx: NodeContext, spatial: tuple[int, ...], kernel: tuple[int, ...],
                  strides: tuple[int, ...], dilations: tuple[int, ...]) -> tuple[int, ...]:
    """The begin-then-end pads ``auto_pad`` (or the ``pads`` attribute) stands for."""
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    rank = len(spatial)
    if auto_pad == "NOTSET":
        return tuple(ctx.attr("pads", (0,) * (2 * rank)))
    if auto_pad == "VALID":
        return (0,) * (2 * rank)
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.unsupported(f"auto_pad={auto_pad!r}")
    begin, end = [], []
    for n, k, s, d in zip(spatial, kernel, strides, dilations):
        out = -(-n // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - n)
        small, large = total // 2, total - total // 2
        # SAME_UPPER puts the odd pad at the end, SAME_LOWER at the beginning
        begin.append(small if auto_pad == "SAME_UPPER" else large)
        end.append(large if auto_pad == "SAME_UPPER" else small)
    return tuple(begin + end)


def _window(ctx: NodeContext, kernel: tuple[int, ...]) -> dict:
    spatial = ctx.type(0).shape[2:]
    rank = len(spatial)
    if len(kernel) != rank:
        raise ctx.fail(f"kernel_shape {list(kernel)} does not match {rank} spatial axes", ShapeError)
    strides = tuple(ctx.attr("strides", (1,) * rank))
    dilations = tuple(ctx.attr("dilations", (1,) * rank))
    return {"kernel_shape": tuple(kernel), "strides": strides, "dilations": dilations,
            "pads": explicit_pads(ctx, spatial, kernel, strides, dilations)}


@converts("Conv")
def _conv(ctx: NodeContext) -> None:
    kernel = tuple(ctx.attr("kernel_shape", ctx.type(1).shape[2:]))
    attrs = {**_window(ctx, kernel), "group": ctx.attr("group", 1)}
    ctx.emit_output("conv", ctx.inputs(), attrs)


@converts("MaxPool")
def _max_pool(ctx: NodeContext) -> None:
    ctx.reject_used_outputs(1, "MaxPool indices")
    attrs = {**_window(ctx, tuple(ctx.attr("kernel_shape", ()))), "ceil_mode": ctx.attr("ceil_mode", 0),
             "storage_order": ctx.attr("storage_order", 0)}
    ctx.emit_output("max_pool", [ctx.input(0)], attrs)


@converts("AveragePool")
def _average_pool(ctx: NodeContext) -> None:
    attrs = {**_window(ctx, tuple(ctx.attr("kernel_shape", ()))), "ceil_mode": ctx.attr("ceil_mode", 0),
             "count_include_pad": ctx.attr("count_include_pad", 0)}
    ctx.emit_output("average_pool", [ctx.input(0)], attrs)


@converts("LpPool")
def _lp_pool(ctx: NodeContext) -> None:
    # (sum of |x|**p over the window, zero padding included)**(1/p): the window's sum is
    # an average pool counting the pads, times the window's size
    x, dtype = ctx.input(0), ctx.type(0).dtype
    p = float(ctx.attr("p", 2))
    if not p > 0:
        raise ctx.fail(f"p={p} must be positive")
    kernel = tuple(ctx.attr("kernel_shape", ()))
    powered = {1.0: lambda: ctx.emit1("abs", [x]), 2.0: lambda: ctx.emit1("mul", [x, x])}.get(
        p, lambda: ctx.emit1("pow", [ctx.emit1("abs", [x]), ctx.constant(p, dtype)]))()
    attrs = {**_window(ctx, kernel), "ceil_mode": ctx.attr("ceil_mode", 0), "count_include_pad": 1}
    mean = ctx.emit1("average_pool", [powered], attrs)
    size = ctx.constant(math.prod(kernel), dtype)
    if p == 1.0:
        ctx.emit_output("mul", [mean, size])
        return
    total = ctx.emit1("mul", [mean, size])
    if p == 2.0:
        ctx.emit_output("sqrt", [total])
    else:
        ctx.emit_output("pow", [total, ctx.constant(1 / p, dtype)])


@converts("ConvTranspose")
def _conv_transpose(ctx: NodeContext) -> None:
    x, w = ctx.type(0), ctx.type(1)
    spatial = x.shape[2:]
    rank = len(spatial)
    kernel = tuple(ctx.attr("kernel_shape", w.shape[2:]))
    strides = tuple(ctx.attr("strides", (1,) * rank))
    dilations = tuple(ctx.attr("dilations", (1,) * rank))
    output_padding = list(ctx.attr("output_padding", (0,) * rank))
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    output_shape = ctx.attr("output_shape")
    if output_shape is not None and len(output_shape) == rank + 2:
        output_shape = output_shape[2:]  # some exporters give N and C too
    if output_shape is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        output_shape = [n * s for n, s in zip(spatial, strides)]
    if output_shape is None:
        pads = (0,) * (2 * rank) if auto_pad == "VALID" else tuple(ctx.attr("pads", (0,) * (2 * rank)))
    else:
        if len(output_shape) != rank or len(output_padding) != rank:
            raise ctx.fail(f"output_shape {list(output_shape)} and output_padding {output_padding} need "
                           f"{rank} entries", ShapeError)
        begin, end = [], []
        for k in range(rank):
            full = strides[k] * (spatial[k] - 1) + output_padding[k] + (kernel[k] - 1) * dilations[k] + 1
            total = full - output_shape[k]
            if total < 0:
                # a larger output than the input covers: the extra positions get only the bias
                output_padding[k] -= total
                total = 0
            small, large = total // 2, total - total // 2
            begin.append(small if auto_pad == "SAME_UPPER" else large)
            end.append(large if auto_pad == "SAME_UPPER" else small)
        pads = tuple(begin + end)
    attrs = {"kernel_shape": kernel, "strides": strides, "dilations": dilations, "pads": pads,
             "group": ctx.attr("group", 1), "output_padding": tuple(output_padding)}
    ctx.emit_output("conv_transpose", ctx.inputs(), attrs)


# ----- normalization ------------------------------------------------------------------
@converts("BatchNormalization")
def _batch_norm(ctx: NodeContext) -> None:
    epsilon = ctx.attr("epsilon", 1e-5)
    x, scale, bias, mean, var = (ctx.input(k) for k in range(5))
    training = ctx.opset >= 14 and bool(ctx.attr("training_mode", 0))
    if training:
        ctx.emit_output("batch_norm_train", [x, scale, bias], {"epsilon": epsilon})
        if ctx.output_used(1) or ctx.output_used(2):
            _running_statistics(ctx, x, mean, var)
        return
    # before opset 14 extra outputs (running and saved statistics) mean training
    ctx.reject_used_outputs(1, "BatchNormalization statistics outputs (training mode)")
    if ctx.opset < 9 and not ctx.attr("spatial", 1):
        # per-activation statistics of shape [C, D1, ...]: plain broadcasting arithmetic
        dtype = ctx.graph.types[x].dtype
        std = ctx.emit1("sqrt", [ctx.emit1("add", [var, ctx.constant(epsilon, dtype)])])
        normalized = ctx.emit1("div", [ctx.emit1("sub", [x, mean]), std])
        ctx.emit_output("add", [ctx.emit1("mul", [normalized, scale]), bias])
        return
    ctx.emit_output("batch_norm", [x, scale, bias, mean, var], {"epsilon": epsilon})


def _moments(ctx: NodeContext, x: str, axes: tuple[int, ...], keepdims: int,
             mean_output: str = "") -> tuple[str, str]:
    """Mean (named ``mean_output`` when given) and biased variance of x over ``axes``."""
    mean = ctx.emit1("reduce_mean", [x], {"axes": axes, "keepdims": 1}, output=mean_output if keepdims else "")
    centered = ctx.emit1("sub", [x, mean])
    var = ctx.emit1("reduce_mean", [ctx.emit1("mul", [centered, centered])], {"axes": axes, "keepdims": keepdims})
    if not keepdims:
        mean = ctx.emit1("reduce_mean", [x], {"axes": axes, "keepdims": 0}, output=mean_output)
    return mean, var


def _running_statistics(ctx: NodeContext, x: str, mean: str, var: str) -> None:
    """BatchNormalization-14+ training outputs: running = input * momentum + batch * (1 - momentum)."""
    x_type = ctx.graph.types[x]
    momentum = ctx.attr("momentum", 0.9)
    batch_mean, batch_var = _moments(ctx, x, (0,) + tuple(range(2, x_type.rank)), keepdims=0)
    keep, take = ctx.constant(momentum, x_type.dtype), ctx.constant(1 - momentum, x_type.dtype)
    for k, running, batch in ((1, mean, batch_mean), (2, var, batch_var)):
        if ctx.output_used(k):
            blended = [ctx.emit1("mul", [running, keep]), ctx.emit1("mul", [batch, take])]
            ctx.emit1("add", blended, output=ctx.output(k))


@converts("LayerNormalization")
def _layer_norm(ctx: NodeContext) -> None:
    axis, epsilon = ctx.attr("axis", -1), ctx.attr("epsilon", 1e-5)
    x = ctx.input(0)
    ctx.emit_output("layer_norm", ctx.inputs(), {"axis": axis, "epsilon": epsilon})
    if not (ctx.output_used(1) or ctx.output_used(2)):
        return
    # the optional Mean and InvStdDev outputs, in the stash type (float32 by default)
    x_type = ctx.graph.types[x]
    if not -x_type.rank <= axis < x_type.rank:
        raise ctx.fail(f"axis={axis} is out of range for rank {x_type.rank}", ShapeError)
    stash = onnx_dtype(ctx.attr("stash_type", 1), f"node {ctx.label!r} stash_type")
    if stash != x_type.dtype:
        x = ctx.emit1("cast", [x], {"to": stash})
    _, var = _moments(ctx, x, tuple(range(axis % x_type.rank, x_type.rank)), keepdims=1,
                      mean_output=ctx.output(1) if ctx.output_used(1) else "")
    if ctx.output_used(2):
        ctx.emit1("rsqrt", [ctx.emit1("add", [var, ctx.constant(epsilon, stash)])], output=ctx.output(2))


@converts("GroupNormalization")
def _group_norm(ctx: NodeContext) -> None:
    x = ctx.type(0)
    groups = ctx.attr("num_groups")
    if groups is None or x.rank < 2 or groups < 1 or x.shape[1] % groups:
        raise ctx.fail(f"num_groups={groups} must be positive and divide the channels of {x}", ShapeError)
    scale, bias = ctx.input(1), ctx.input(2)
    if ctx.opset < 21:  # scale and bias per group: each repeated over its channels
        scale, bias = (_per_channel_of_group(ctx, v, groups, x.shape[1]) for v in (scale, bias))
    ctx.emit_output("group_norm", [ctx.input(0), scale, bias],
                    {"num_groups": groups, "epsilon": ctx.attr("epsilon", 1e-5)})


def _per_channel_of_group(ctx: NodeContext, value: str, groups: int, channels: int) -> str:
    if ctx.graph.types[value].shape != (groups,):
        raise ctx.fail(f"scale and bias should have shape [{groups}] (one per group), got "
                       f"{ctx.graph.types[value]}", ShapeError)
    column = ctx.emit1("reshape", [value], {"shape": (groups, 1)})
    spread = ctx.emit1("expand", [column], {"shape": (groups, channels // groups)})
    return ctx.emit1("reshape", [spread], {"shape": (channels,)})


@converts("MeanVarianceNormalization")
def _mean_variance_norm(ctx: NodeContext) -> None:
    ctx.emit_output("mean_variance_norm", [ctx.input(0)], {"axes": tuple(ctx.attr("axes", (0, 2, 3)))})


@converts("LpNormalization")
def _lp_norm(ctx: NodeContext) -> None:
    ctx.emit_output("lp_norm", [ctx.input(0)], {"axis": ctx.attr("axis", -1), "p": ctx.attr("p", 2)})


# ----- activations written with other ops ---------------------------------------------
@converts("HardSwish")
def _hard_swish(ctx: NodeContext) -> None:
    x = ctx.input(0)
    gate = ctx.emit1("hard_sigmoid", [x], {"alpha": 1 / 6, "beta": 0.5})
    ctx.emit_output("mul", [x, gate])


# ONNX's own function bodies: Celu is alpha * Elu(x / alpha), ThresholdedRelu keeps x above
# alpha, Swish is x * Sigmoid(alpha * x)
@converts("Celu")
def _celu(ctx: NodeContext) -> None:
    alpha = ctx.constant(ctx.attr("alpha", 1.0), ctx.type(0).dtype)
    elu = ctx.emit1("elu", [ctx.emit1("div", [ctx.input(0), alpha])], {"alpha": 1.0})
    ctx.emit_output("mul", [alpha, elu])


@converts("ThresholdedRelu")
def _thresholded_relu(ctx: NodeContext) -> None:
    x, dtype = ctx.input(0), ctx.type(0).dtype
    above = ctx.emit1("greater", [x, ctx.constant(ctx.attr("alpha", 1.0), dtype)])
    ctx.emit_output("where", [above, x, ctx.constant(0, dtype)])


@converts("Swish")
def _swish(ctx: NodeContext) -> None:
    _swish_of(ctx, ctx.input(0), ctx.output(0))


@converts("SwiGLU")
def _swiglu(ctx: NodeContext) -> None:
    # Swish(a) * b, ONNX's function body
    ctx.emit_output("mul", [_swish_of(ctx, ctx.input(0), ""), ctx.input(1)])


def _swish_of(ctx: NodeContext, x: str, output: str) -> str:
    """x * sigmoid(alpha * x), named ``output`` ('' for a fresh name)."""
    alpha = ctx.attr("alpha", 1.0)
    if alpha == 1.0:
        return ctx.emit1("silu", [x], output=output)
    scaled = ctx.emit1("mul", [x, ctx.constant(alpha, ctx.type(0).dtype)])
    return ctx.emit1("mul", [x, ctx.emit1("sigmoid", [scaled])], output=output)


# ----- data movement between channels and space -----------------------------------------
@converts("DepthToSpace", "SpaceToDepth")
def _depth_space(ctx: NodeContext) -> None:
    # ONNX's definitions: a reshape into blocks, a transpose, a reshape back
    x = ctx.type(0)
    block = ctx.attr("blocksize")
    if x.rank != 4:
        raise ctx.fail(f"input {x} must have rank 4 (N, C, H, W)", ShapeError)
    if block is None or block < 1:
        raise ctx.fail(f"blocksize={block} must be a positive integer")
    mode = ctx.attr("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise ctx.fail(f"mode={mode!r} should be 'DCR' or 'CRD'")
    n, c, h, w = x.shape
    if ctx.op_type == "DepthToSpace":
        if c % (block * block):
            raise ctx.fail(f"channels {c} are not a multiple of blocksize**2 = {block * block}", ShapeError)
        depth = c // (block * block)
        blocks, perm = ((n, block, block, depth, h, w), (0, 3, 4, 1, 5, 2)) if mode == "DCR" else \
            ((n, depth, block, block, h, w), (0, 1, 4, 2, 5, 3))
        final = (n, depth, h * block, w * block)
    else:
        if h % block or w % block:
            raise ctx.fail(f"spatial dims {[h, w]} are not multiples of blocksize={block}", ShapeError)
        blocks = (n, c, h // block, block, w // block, block)
        perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
        final = (n, c * block * block, h // block, w // block)
    moved = ctx.emit1("transpose", [ctx.emit1("reshape", [ctx.input(0)], {"shape": blocks})], {"perm": perm})
    ctx.emit_output("reshape", [moved], {"shape": final})


# ----- constants whose shape is known at import -----------------------------------------
@converts("EyeLike")
def _eye_like(ctx: NodeContext) -> None:
    x = ctx.type(0)
    if x.rank != 2:
        raise ctx.fail(f"input {x} must have rank 2", ShapeError)
    dtype = onnx_dtype(ctx.attrs["dtype"], f"node {ctx.label!r} dtype") if "dtype" in ctx.attrs else x.dtype
    ctx.set_constant(0, np.eye(x.shape[0], x.shape[1], k=ctx.attr("k", 0), dtype=dtype))


#: the longest window folded at import (1 GiB of float64), as for Range
MAX_FOLDED_WINDOW = 2**27
#: cosine-sum windows: the coefficients a_k of sum_k (-1)**k a_k cos(2 pi k n / N)
WINDOWS = {"HannWindow": (0.5, 0.5), "HammingWindow": (25 / 46, 21 / 46), "BlackmanWindow": (0.42, 0.5, 0.08)}


@converts(*WINDOWS)
def _window_function(ctx: NodeContext) -> None:
    # the size is a value: a graph input is bound per run (the Specializer), then folded here
    size = ctx.const(0, "size")
    if size.size != 1 or size.dtype.kind not in "iu":
        raise ctx.fail(f"size must be one integer, got {size.dtype} of shape {list(size.shape)}")
    size = int(size.reshape(()))
    if not 0 <= size <= MAX_FOLDED_WINDOW:
        raise ctx.fail(f"size={size} should be in [0, {MAX_FOLDED_WINDOW}]")
    dtype = onnx_dtype(ctx.attr("output_datatype", 1), f"node {ctx.label!r} output_datatype")
    # periodic: the period is size; symmetric: size - 1 (ONNX's reference, as PyTorch)
    period = size if ctx.attr("periodic", 1) else size - 1
    phase = 2 * np.pi * np.arange(size, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = [(-1) ** k * a * np.cos(k * phase / period) for k, a in enumerate(WINDOWS[ctx.op_type])]
    ctx.set_constant(0, np.sum(terms, axis=0).astype(dtype))


#: the most elements a MelWeightMatrix folded at import may have
MAX_FOLDED_MEL = 2**24


@converts("MelWeightMatrix")
def _mel_weight_matrix(ctx: NodeContext) -> None:
    # ONNX's reference, step by step and in the inputs' own dtypes (its rounding decides
    # which spectrogram bin each mel edge falls in): triangles between mel-spaced edges
    names = ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz")
    mels, dft_length, rate, low, high = (ctx.const(k, name).reshape(()) for k, name in enumerate(names))
    bins = int(dft_length) // 2 + 1
    if int(mels) < 1 or int(dft_length) < 1 or int(rate) < 1 or bins * int(mels) > MAX_FOLDED_MEL:
        raise ctx.fail(f"num_mel_bins={int(mels)}, dft_length={int(dft_length)} and sample_rate={int(rate)} must be "
                       f"positive, the matrix at most {MAX_FOLDED_MEL} elements")
    low_mel = 2595 * np.log1p(low / 700) / np.log(10)
    high_mel = 2595 * np.log1p(high / 700) / np.log(10)
    step = (high_mel - low_mel) / (int(mels) + 2)
    edges = 700 * np.expm1((np.arange(0, int(mels) + 2) * step + low_mel) / 2595 * np.log(10))
    edges = (((dft_length + 1) * edges) // rate).astype(int)
    if edges.min() < 0 or edges.max() >= bins:
        raise ctx.fail(f"the mel edges [{low}, {high}] Hz fall outside the {bins} spectrogram bins")
    out = np.zeros((bins, int(mels)))
    for i, (left, center, right) in enumerate(zip(edges, edges[1:], edges[2:])):
        if center == left:
            out[center, i] = 1
        else:
            out[left:center + 1, i] = (np.arange(left, center + 1) - left) / (center - left)
        if right > center:
            out[center:right, i] = (right - np.arange(center, right)) / (right - center)
    ctx.set_constant(0, out.astype(onnx_dtype(ctx.attr("output_datatype", 1), f"node {ctx.label!r} output_datatype")))


@converts("Compress")
def _compress(ctx: NodeContext) -> None:
    # which positions are kept depends on the condition's values, so the output's shape
    # does: they are read at import (a graph input is bound per run by the Specializer),
    # and the kept positions gathered
    keep = ctx.const(1, "condition").reshape(-1).astype(bool)
    x, value = ctx.type(0), ctx.input(0)
    axis = ctx.attr("axis")
    if axis is None:  # the flattened input
        value, axis = ctx.emit1("reshape", [value], {"shape": (x.size,)}), 0
        length = x.size
    elif -x.rank <= axis < x.rank:
        length = x.shape[axis]
    else:
        raise ctx.fail(f"axis={axis} is out of range for rank {x.rank}", ShapeError)
    if keep.size > length:
        raise ctx.fail(f"condition has {keep.size} entries, more than the {length} positions it selects from",
                       ShapeError)
    ctx.emit_output("gather", [value, ctx.constant(np.flatnonzero(keep).astype(np.int64))], {"axis": axis})


# ----- ops with a constant input that fusionlang keeps as an attribute ------------------
@converts("Trilu")
def _trilu(ctx: NodeContext) -> None:
    upper = ctx.attr("upper", 1)
    if ctx.has_input(1) and not ctx.is_const(1):
        ctx.emit_output("trilu", [ctx.input(0), ctx.input(1)], {"upper": upper})  # k known at run time only
        return
    k = int(ctx.scalar(1, "k")) if ctx.has_input(1) else 0
    ctx.emit_output("trilu", [ctx.input(0)], {"upper": upper, "k": k})


@converts("CumSum", "CumProd")
def _cumsum(ctx: NodeContext) -> None:
    axis = int(ctx.scalar(1, "axis"))
    op = "cumsum" if ctx.op_type == "CumSum" else "cumprod"
    ctx.emit_output(op, [ctx.input(0)], {"axis": axis, "exclusive": ctx.attr("exclusive", 0),
                                         "reverse": ctx.attr("reverse", 0)})


#: the most elements a Range folded at import may have (1 GiB of int64)
MAX_FOLDED_RANGE = 2**27


@converts("Range")
def _range(ctx: NodeContext) -> None:
    # the output's length depends on the values: known only when they are (folded here)
    start, limit, delta = (ctx.const(k, name) for k, name in enumerate(("start", "limit", "delta")))
    if any(v.size != 1 for v in (start, limit, delta)):
        raise ctx.fail("start, limit and delta must be scalars")
    if delta.item() == 0:
        raise ctx.fail("delta is 0: the range never ends")
    dtype = start.dtype
    count = max(int(math.ceil((limit.item() - start.item()) / delta.item())), 0)
    if count > MAX_FOLDED_RANGE:  # a hostile model must not make import allocate without bound
        raise ctx.fail(f"Range of {count} elements is too large to fold at import (at most {MAX_FOLDED_RANGE})")
    # start + k * delta in the inputs' type, as the ONNX reference computes it; float16
    # in the stash type (float32) where opset 27 asks for it
    work = dtype
    if dtype == np.float16 and (ctx.opset >= 27 or "stash_type" in ctx.attrs):
        work = onnx_dtype(ctx.attr("stash_type", 1), f"node {ctx.label!r} stash_type")
    start, delta = start.reshape(()).astype(work), delta.reshape(()).astype(work)
    ctx.set_constant(0, (start + np.arange(count, dtype=work) * delta).astype(dtype))


# ----- arg reductions: where the extreme value is ----------------------------------------
@converts("ArgMax", "ArgMin")
def _arg_extreme(ctx: NodeContext) -> None:
    axis, keepdims = ctx.attr("axis", 0), ctx.attr("keepdims", 1)
    x = ctx.input(0)
    extreme = ctx.emit1("reduce_max" if ctx.op_type == "ArgMax" else "reduce_min", [x],
                        {"axes": (axis,), "keepdims": 1})
    ctx.emit_output("index_of", [x, extreme], {"axis": axis, "keepdims": keepdims,
                                                "last": ctx.attr("select_last_index", 0)})


# ----- resize: scales or sizes known at import, turned into a fixed output shape --------
@converts("Resize", "Upsample")
def _resize(ctx: NodeContext) -> None:
    x = ctx.type(0)
    scales, sizes, roi = _resize_targets(ctx, x.shape)
    mode = ctx.attr("mode", "nearest")
    legacy = ctx.op_type == "Upsample" or ctx.opset < 11  # output cell i reads input i / scale
    if legacy and mode == "nearest" and any(s < 1 for s in scales):
        raise ctx.unsupported("nearest downsampling before opset 11 (its rounding is not specified)")
    attrs = {"sizes": sizes, "scales": scales, "mode": mode, "roi": roi,
             "coordinate_transformation_mode": "asymmetric" if legacy else
             ctx.attr("coordinate_transformation_mode", "half_pixel"),
             "nearest_mode": "floor" if legacy else ctx.attr("nearest_mode", "round_prefer_floor"),
             "cubic_coeff_a": float(ctx.attr("cubic_coeff_a", -0.75)),
             "exclude_outside": ctx.attr("exclude_outside", 0),
             "extrapolation_value": float(ctx.attr("extrapolation_value", 0.0)),
             "antialias": ctx.attr("antialias", 0)}
    ctx.emit_output("resize", [ctx.input(0)], attrs)


def _resize_targets(ctx: NodeContext, shape: tuple[int, ...]) -> tuple[tuple, tuple, tuple]:
    """(scales, output sizes, roi) of every axis, from whichever of scales and sizes is given."""
    rank = len(shape)
    if ctx.op_type == "Upsample" or ctx.opset < 11:
        given = ctx.attr("scales") if ctx.opset < 9 else ctx.const(1, "scales").ravel().tolist()
        return _from_scales(ctx, shape, tuple(range(rank)), [float(np.float32(s)) for s in given or ()]) + ((),)
    axes = tuple(a % rank if -rank <= a < rank else a for a in ctx.attr("axes", range(rank)))
    if any(not 0 <= a < rank for a in axes) or len(set(axes)) != len(axes):
        raise ctx.fail(f"axes {list(ctx.attr('axes'))} should be distinct axes of rank {rank}", ShapeError)
    roi = _resize_roi(ctx, axes, rank)
    has_scales = ctx.has_input(2) and ctx.const(2, "scales").size > 0
    if ctx.has_input(3) and ctx.const(3, "sizes").size > 0:
        if has_scales:
            raise ctx.fail("scales and sizes are both given; only one may be")
        return _from_sizes(ctx, shape, axes, ctx.ints(3, "sizes")) + (roi,)
    if not has_scales:
        raise ctx.fail("one of scales and sizes is required")
    return _from_scales(ctx, shape, axes, ctx.const(2, "scales").ravel().tolist()) + (roi,)


def _from_scales(ctx: NodeContext, shape, axes, given) -> tuple[tuple, tuple]:
    if len(given) != len(axes):
        raise ctx.fail(f"scales {given} should have {len(axes)} entries", ShapeError)
    if any(not s > 0 for s in given):
        raise ctx.fail(f"scales {given} must be positive", ShapeError)
    scales = [1.0] * len(shape)
    for a, s in zip(axes, given):
        scales[a] = float(s)
    return tuple(scales), tuple(int(math.floor(s * n)) for s, n in zip(scales, shape))


def _from_sizes(ctx: NodeContext, shape, axes, given) -> tuple[tuple, tuple]:
    if len(given) != len(axes) or any(n <= 0 for n in given):
        raise ctx.fail(f"sizes {list(given)} should be {len(axes)} positive lengths", ShapeError)
    sizes, scales = list(shape), [1.0] * len(shape)
    for a, n in zip(axes, given):
        sizes[a], scales[a] = n, n / shape[a]
    policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
    if policy not in ("stretch", "not_larger", "not_smaller"):
        raise ctx.fail(f"keep_aspect_ratio_policy={policy!r} should be stretch, not_larger or not_smaller")
    if policy != "stretch":  # one scale for all the axes, the output rounded half up
        scale = (min if policy == "not_larger" else max)(scales[a] for a in axes)
        for a in axes:
            scales[a], sizes[a] = scale, int(scale * shape[a] + 0.5)
    return tuple(scales), tuple(sizes)


def _resize_roi(ctx: NodeContext, axes, rank: int) -> tuple:
    if ctx.attr("coordinate_transformation_mode") != "tf_crop_and_resize":
        return ()
    given = ctx.const(1, "roi").ravel().tolist()
    if len(given) != 2 * len(axes):
        raise ctx.fail(f"roi {given} should have {2 * len(axes)} entries", ShapeError)
    roi = [0.0] * rank + [1.0] * rank
    for k, a in enumerate(axes):
        roi[a], roi[rank + a] = float(given[k]), float(given[len(axes) + k])
    return tuple(roi)


# ----- losses -------------------------------------------------------------------------
@converts("NegativeLogLikelihoodLoss")
def _nll_loss(ctx: NodeContext) -> None:
    _reduced_nll(ctx, ctx.input(0))


@converts("SoftmaxCrossEntropyLoss")
def _softmax_cross_entropy_loss(ctx: NodeContext) -> None:
    # ONNX's own definition: log_softmax over the classes (axis 1), then NLL of that;
    # output 1, when the model names it, is the log-probability itself
    log_prob = ctx.emit1("log_softmax", [ctx.input(0)], {"axis": 1}, ctx.output(1))
    _reduced_nll(ctx, log_prob)


def _reduced_nll(ctx: NodeContext, log_prob: str) -> None:
    """nll_loss of ``log_prob`` against input 1 (weights: input 2), then ONNX's reduction."""
    reduction = ctx.attr("reduction", "mean")
    if isinstance(reduction, bytes):
        reduction = reduction.decode()
    if reduction not in ("none", "sum", "mean"):
        raise ctx.fail(f"reduction={reduction!r} should be 'none', 'sum' or 'mean'")
    inputs = [log_prob, ctx.input(1)] + ([ctx.input(2)] if ctx.has_input(2) else [])
    attrs = {"ignore_index": ctx.attrs["ignore_index"]} if "ignore_index" in ctx.attrs else {}
    if reduction == "none":
        ctx.emit("nll_loss", inputs, attrs, [ctx.output(0), ""])
        return
    loss, weight = ctx.emit("nll_loss", inputs, attrs, ["", ""])
    if reduction == "sum":
        ctx.emit_output("reduce_sum", [loss], {"keepdims": 0})
        return
    total = ctx.emit1("reduce_sum", [loss], {"keepdims": 0})
    # the mean is over the weight the elements carry (their count without weights)
    ctx.emit_output("div", [total, ctx.emit1("reduce_sum", [weight], {"keepdims": 0})])


# ----- bit shifts ---------------------------------------------------------------------
@converts("BitShift")
def _bit_shift(ctx: NodeContext) -> None:
    direction = ctx.attr("direction", "")
    if isinstance(direction, bytes):
        direction = direction.decode()
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.fail(f"direction={direction!r} should be 'LEFT' or 'RIGHT'")
    ctx.emit_output("bit_shift", [ctx.input(0), ctx.input(1)], {"direction": direction.lower()})


# ----- transformer ops (Attention, RMSNormalization, RotaryEmbedding, SwiGLU) ------------
CONVERTERS.update(TRANSFORMER_CONVERTERS)

# ----- sequences (resolved at import time) ---------------------------------------------
CONVERTERS.update(SEQUENCE_CONVERTERS)

# ----- indexing ops (scatters, TopK, OneHot, GridSample...) ----------------------------
CONVERTERS.update(INDEX_CONVERTERS)

# ----- recurrent ops (RNN, GRU, LSTM), unrolled -----------------------------------------
CONVERTERS.update(RNN_CONVERTERS)

# ----- control flow (resolved at import time) ------------------------------------------
CONVERTERS.update(CONTROL_CONVERTERS)


# ----- the newest ONNX ops (BitCast, CausalConvWithState, LinearAttention) ------------------
CONVERTERS.update(NEWEST_CONVERTERS)
