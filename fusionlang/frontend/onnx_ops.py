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

import math
from typing import Callable

import numpy as np
from onnx import numpy_helper

from fusionlang.errors import ShapeError
from fusionlang.frontend.onnx_context import NodeContext, onnx_dtype
from fusionlang.frontend.onnx_index_ops import INDEX_CONVERTERS

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
    ctx.emit_output("cast", [ctx.input(0)], {"to": to})


@converts("CastLike")
def _cast_like(ctx: NodeContext) -> None:
    ctx.emit_output("cast", [ctx.input(0)], {"to": ctx.type(1).dtype})


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


@converts(*COMPOSITE_REDUCE)
def _composite_reduce(ctx: NodeContext) -> None:
    before, op, after = COMPOSITE_REDUCE[ctx.op_type]
    x = ctx.input(0)
    if before == "square":
        x = ctx.emit1("mul", [x, x])
    elif before:
        x = ctx.emit1(before, [x])
    attrs = _reduce_attrs(ctx, 18)
    if after is None:
        ctx.emit_output(op, [x], attrs)
    else:
        ctx.emit_output(after, [ctx.emit1(op, [x], attrs)])


@converts("ReduceLogSumExp")
def _reduce_log_sum_exp(ctx: NodeContext) -> None:
    # log(sum(exp(x - m))) + m with m the max where it is finite, else 0: exp never
    # overflows, and a row holding +inf (m = inf) gives inf and one of only -inf gives -inf,
    # as onnxruntime does, where x - m would be inf - inf = NaN
    x = ctx.input(0)
    attrs = _reduce_attrs(ctx, 18)
    shift = _finite_or_zero(ctx, ctx.emit1("reduce_max", [x], {**attrs, "keepdims": 1}))
    total = ctx.emit1("reduce_sum", [ctx.emit1("exp", [ctx.emit1("sub", [x, shift])])], attrs)
    if not attrs["keepdims"]:
        shift = _finite_or_zero(ctx, ctx.emit1("reduce_max", [x], attrs))
    ctx.emit_output("add", [ctx.emit1("log", [total]), shift])


def _finite_or_zero(ctx: NodeContext, value: str) -> str:
    """``value`` where it is finite, 0 where it is +-inf or NaN (v - v is 0 just where v is
    finite)."""
    zero = ctx.constant(0, ctx.type(0).dtype)  # (value has the dtype of the node's input)
    finite = ctx.emit1("equal", [ctx.emit1("sub", [value, value]), zero])
    return ctx.emit1("where", [finite, value, zero])


# ----- softmax ------------------------------------------------------------------------
@converts("Softmax", "LogSoftmax")
def _softmax(ctx: NodeContext) -> None:
    op = "softmax" if ctx.op_type == "Softmax" else "log_softmax"
    x = ctx.input(0)
    if ctx.opset >= 13:
        ctx.emit_output(op, [x], {"axis": ctx.attr("axis", -1)})
        return
    # before opset 13 the input is flattened to 2-D at `axis` and normalized per row
    shape = ctx.type(0).shape
    rank = len(shape)
    axis = ctx.attr("axis", 1)
    if not -rank <= axis < max(rank, 1):
        raise ctx.fail(f"axis={axis} is out of range for rank {rank}", ShapeError)
    axis = axis % rank if rank else 0
    if math.prod(shape[axis + 1:]) == 1:
        # the rows are exactly the `axis` fibres: no reshaping needed
        ctx.emit_output(op, [x], {"axis": axis})
        return
    rows = ctx.emit1("reshape", [x], {"shape": (math.prod(shape[:axis]), math.prod(shape[axis:]))})
    normalized = ctx.emit1(op, [rows], {"axis": 1})
    ctx.emit_output("reshape", [normalized], {"shape": shape})


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


# ----- activations written with other ops ---------------------------------------------
@converts("HardSwish")
def _hard_swish(ctx: NodeContext) -> None:
    x = ctx.input(0)
    gate = ctx.emit1("hard_sigmoid", [x], {"alpha": 1 / 6, "beta": 0.5})
    ctx.emit_output("mul", [x, gate])


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


CONVERTERS.update(INDEX_CONVERTERS)  # scatters, TopK, OneHot...: onnx_index_ops
