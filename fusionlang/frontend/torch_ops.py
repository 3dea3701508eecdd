"""One converter per core ATen op: an FX node -> fusionlang registry ops.

The ops are the ones the ONNX converters emit (``onnx_ops``), so a graph from torch meets
the same rules, partitioner and code generators as one from ONNX. A converter reads the
node's arguments through its FxContext (FX nodes already replaced by graph values, SymInt
sizes by ints) and returns the graph value it computes, or a tuple of them for an op with
several results. ``REFUSALS`` holds, per op, the forms no converter takes (a transposed
convolution, a training-mode norm): what the capability partitioner sends to eager.
``torch_grad_ops`` adds the backward graphs' converters (and max pooling, whose indices
only its backward reads).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from fusionlang.errors import ShapeError, UnsupportedOpError
from fusionlang.ops.builder import GraphBuilder

#: slice ends past any axis ("to the end"), as the ONNX importer reads them
INT64_MAX = np.iinfo(np.int64).max


def target_name(target) -> str:
    """How an FX call_function target is named here: "aten.add.Tensor", "_operator.getitem"."""
    if isinstance(target, str):
        return target
    if type(target).__name__ == "OpOverload":
        return str(target)
    return f"{getattr(target, '__module__', '')}.{getattr(target, '__name__', repr(target))}"


#: torch dtypes whose tensors cross to numpy as they are (``Tensor.numpy()``): bfloat16 and
#: the float8 types fusionlang computes on have no numpy dtype on torch's side
EXCHANGED_DTYPES = ("float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool")


def meta_dtype(value) -> str | None:
    """The numpy dtype name of a tensor in FX metadata (``node.meta["val"]``), or None when
    it is no tensor or its dtype does not cross to fusionlang."""
    dtype = getattr(value, "dtype", None)
    name = str(dtype).removeprefix("torch.") if dtype is not None else ""
    return name if name in EXCHANGED_DTYPES else None


class FxContext:
    """What a converter sees of one FX node, and how it adds to the graph."""

    def __init__(self, builder: GraphBuilder, node, args: tuple, kwargs: dict):
        self.builder = builder
        self.node = node
        self.args = args
        self.kwargs = kwargs

    def arg(self, k: int, name: str, default: Any = None) -> Any:
        """Argument ``k`` (positional) or ``name`` (keyword); ``default`` when absent."""
        if k < len(self.args):
            return self.args[k]
        return self.kwargs.get(name, default)

    def shape(self, value: str) -> tuple[int, ...]:
        return self.builder.graph.types[value].shape

    def dtype(self, value: str) -> str:
        return self.builder.graph.types[value].dtype

    def rank(self, value: str) -> int:
        return len(self.shape(value))

    def emit(self, op: str, *inputs, **attrs) -> Any:
        return self.builder.op(op, *inputs, provenance=(f"torch:{self.node.name}",), **attrs)

    def constant(self, array) -> str:
        return self.builder.constant(np.asarray(array))

    def result_dtype(self) -> str:
        """The dtype torch gives the node's (first) result."""
        value = self.node.meta.get("val")
        if isinstance(value, (list, tuple)):
            value = value[0]
        dtype = meta_dtype(value)
        if dtype is None:
            raise ShapeError("torch gives no dtype for the result (node.meta['val'])")
        return dtype

    def operands(self, *values) -> list[str]:
        """Tensors and Python scalars as graph values of one dtype: the tensors' promoted
        dtype, made floating when a float scalar meets integer tensors (torch's rule)."""
        tensors = [v for v in values if isinstance(v, str)]
        common = np.result_type(*[self.dtype(v) for v in tensors]).name
        if np.dtype(common).kind in "biu" and any(isinstance(v, float) for v in values):
            common = "float32"
        return [self.cast(v, common) if isinstance(v, str) else self.constant(np.asarray(v, common)) for v in values]

    def cast(self, value: str, dtype: str) -> str:
        return value if self.dtype(value) == dtype else self.emit("cast", value, to=dtype)

    def axis(self, axis: int, rank: int) -> int:
        if not -rank <= axis < max(rank, 1):
            raise ShapeError(f"dim {axis} is out of range for rank {rank}")
        return axis % rank if rank else 0

    def results_used(self) -> set[int]:
        return results_used(self.node)


def results_used(node) -> set[int]:
    """Which results of a multi-result node its users read (through getitem)."""
    return {user.args[1] for user in node.users if target_name(user.target) == "_operator.getitem"}


Converter = Callable[[FxContext], Any]
CONVERTERS: dict[str, Converter] = {}
#: ATen op -> the reason a node's form is refused (None: converted)
REFUSALS: dict[str, Callable[[Any], str | None]] = {}


def _registrar(table: dict):
    def by_names(*names: str):
        def register(fn):
            for name in names:
                table[name] = fn
            return fn

        return register

    return by_names


converts = _registrar(CONVERTERS)
refuses = _registrar(REFUSALS)


# ----- elementwise --------------------------------------------------------------------
UNARY = {
    "relu": "relu", "tanh": "tanh", "sigmoid": "sigmoid", "exp": "exp", "log": "log", "sqrt": "sqrt",
    "rsqrt": "rsqrt", "neg": "neg", "abs": "abs", "erf": "erf", "reciprocal": "reciprocal", "sin": "sin",
    "cos": "cos", "floor": "floor", "ceil": "ceil", "sign": "sign", "silu": "silu", "logical_not": "not",
    "round": "round",
}


def _unary(op: str) -> Converter:
    return lambda ctx: ctx.emit(op, ctx.arg(0, "self"))


for _name, _op in UNARY.items():
    CONVERTERS[f"aten.{_name}.default"] = _unary(_op)


@converts("aten.gelu.default")
def _gelu(ctx: FxContext) -> str:
    return ctx.emit("gelu", ctx.arg(0, "self"), approximate=ctx.arg(1, "approximate", "none"))


@converts("aten.leaky_relu.default")
def _leaky_relu(ctx: FxContext) -> str:
    return ctx.emit("leaky_relu", ctx.arg(0, "self"), alpha=float(ctx.arg(1, "negative_slope", 0.01)))


@converts("aten.clamp.default")
def _clamp(ctx: FxContext) -> str:
    low, high = ctx.arg(1, "min"), ctx.arg(2, "max")
    return ctx.emit("clip", ctx.arg(0, "self"), min=-np.inf if low is None else float(low),
                    max=np.inf if high is None else float(high))


BINARY = {"mul": "mul", "div": "div", "pow": "pow", "maximum": "max", "minimum": "min", "eq": "equal",
          "lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal", "logical_and": "and",
          "logical_or": "or", "logical_xor": "xor"}
OVERLOADS = ("Tensor", "Scalar", "default", "Tensor_Scalar", "Tensor_Tensor", "Scalar_Tensor")


def _binary(op: str) -> Converter:
    def convert(ctx: FxContext) -> str:
        a, b = ctx.operands(ctx.arg(0, "self"), ctx.arg(1, "other"))
        if op in ("and", "or", "xor"):
            a, b = ctx.cast(a, "bool"), ctx.cast(b, "bool")
        return ctx.emit(op, a, b)

    return convert


for _name, _op in BINARY.items():
    for _overload in OVERLOADS:
        CONVERTERS[f"aten.{_name}.{_overload}"] = _binary(_op)


@converts("aten.ne.Tensor", "aten.ne.Scalar")
def _not_equal(ctx: FxContext) -> str:
    return ctx.emit("not", ctx.emit("equal", *ctx.operands(ctx.arg(0, "self"), ctx.arg(1, "other"))))


@converts("aten.add.Tensor", "aten.add.Scalar", "aten.sub.Tensor", "aten.sub.Scalar")
def _add_sub(ctx: FxContext) -> str:
    a, b, alpha = ctx.arg(0, "self"), ctx.arg(1, "other"), ctx.arg(2, "alpha", 1)
    a, b = ctx.operands(a, b)
    if alpha != 1:
        b = ctx.emit("mul", b, ctx.constant(np.asarray(alpha, ctx.dtype(b))))
    return ctx.emit("sub" if ".sub." in target_name(ctx.node.target) else "add", a, b)


@refuses("aten.div.Tensor_mode", "aten.div.Scalar_mode")
def _rounding_division(node) -> str:
    return "division with a rounding mode has no converter"


@converts("aten.where.self")
def _where(ctx: FxContext) -> str:
    condition = ctx.cast(ctx.arg(0, "condition"), "bool")
    return ctx.emit("where", condition, *ctx.operands(ctx.arg(1, "self"), ctx.arg(2, "other")))


@converts("aten._to_copy.default", "aten.clone.default", "aten.alias.default", "aten.lift_fresh_copy.default",
          "aten.detach.default")
def _copy(ctx: FxContext) -> str:
    # a functional graph never writes a tensor in place, so a copy is the value itself
    x = ctx.arg(0, "self")
    return ctx.cast(x, ctx.result_dtype())


# ----- linear algebra and convolution -------------------------------------------------
@converts("aten.mm.default", "aten.bmm.default", "aten.matmul.default")
def _matmul(ctx: FxContext) -> str:
    a, b = ctx.arg(0, "self"), ctx.arg(1, "mat2")
    if target_name(ctx.node.target) == "aten.mm.default":
        # a transposed matrix is read transposed (gemm's trans_a / trans_b: the GEMM template
        # packs either layout), not copied by a transpose kernel first: the backward's
        # grad^T @ x and grad @ (W^T)^T, for every weight
        a_source, b_source = _transposed_matrix(ctx, a), _transposed_matrix(ctx, b)
        if a_source is not None or b_source is not None:
            return _transposed_gemm(ctx, a, b, a_source, b_source)
    return ctx.emit("matmul", a, b)


def _transposed_gemm(ctx: FxContext, a: str, b: str, a_source: str | None, b_source: str | None, *bias: str,
                     **scaling: float) -> str:
    """A gemm reading ``a`` and ``b`` as the matrices they transpose, where they do."""
    return ctx.emit("gemm", a_source or a, b_source or b, *bias, trans_a=int(a_source is not None),
                    trans_b=int(b_source is not None), **scaling)


def _transposed_matrix(ctx: FxContext, value: str) -> str | None:
    """The matrix ``value`` is the transpose of, when a 2-D transpose computes it."""
    node = ctx.builder.graph.index.producers.get(value)
    if node is None or node.op != "transpose" or ctx.rank(value) != 2 or tuple(node.attrs["perm"]) != (1, 0):
        return None
    return node.inputs[0]


@converts("aten.addmm.default")
def _addmm(ctx: FxContext) -> str:
    bias, a, b = ctx.arg(0, "self"), ctx.arg(1, "mat1"), ctx.arg(2, "mat2")
    # a Linear's x W^T + b reads W transposed, as mm does
    return _transposed_gemm(ctx, a, b, _transposed_matrix(ctx, a), _transposed_matrix(ctx, b), bias,
                            beta=float(ctx.arg(3, "beta", 1)), alpha=float(ctx.arg(4, "alpha", 1)))


@converts("aten.t.default")
def _t(ctx: FxContext) -> str:
    x = ctx.arg(0, "self")
    return ctx.emit("transpose", x, perm=tuple(reversed(range(ctx.rank(x)))))


@converts("aten.convolution.default")
def _convolution(ctx: FxContext) -> str:
    x, weight, bias = ctx.arg(0, "input"), ctx.arg(1, "weight"), ctx.arg(2, "bias")
    spatial = ctx.rank(x) - 2
    stride, padding, dilation = (per_axis(ctx.arg(k, name), spatial) for k, name in
                                 ((3, "stride"), (4, "padding"), (5, "dilation")))
    return ctx.emit("conv", x, weight, bias, kernel_shape=ctx.shape(weight)[2:], strides=stride,
                    pads=padding + padding, dilations=dilation, group=int(ctx.arg(8, "groups", 1)))


@refuses("aten.convolution.default")
def _transposed_convolution(node) -> str | None:
    return "transposed convolution has no converter" if node.args[6] else None


def per_axis(value, spatial: int) -> tuple[int, ...]:
    values = tuple(int(v) for v in (value if isinstance(value, (list, tuple)) else [value]))
    return values * spatial if len(values) == 1 else values


# ----- norms and softmax --------------------------------------------------------------
BATCH_NORMS = ("aten._native_batch_norm_legit_no_training.default", "aten._native_batch_norm_legit_functional.default",
               "aten.native_batch_norm.default")


FUNCTIONAL_BATCH_NORM = "aten._native_batch_norm_legit_functional.default"


@converts(*BATCH_NORMS)
def _batch_norm(ctx: FxContext) -> tuple:
    x, weight, bias, mean, var = (ctx.arg(k, name) for k, name in
                                  enumerate(("input", "weight", "bias", "running_mean", "running_var")))
    channels = ctx.shape(x)[1]
    weight = weight or ctx.constant(np.ones(channels, ctx.dtype(x)))
    bias = bias or ctx.constant(np.zeros(channels, ctx.dtype(x)))
    eps = float(ctx.node.args[-1])
    if _trains(ctx.node):
        return _batch_norm_training(ctx, x, weight, bias, mean, var, float(ctx.node.args[-2]), eps)
    out = ctx.emit("batch_norm", x, weight, bias, mean, var, epsilon=eps)
    # the functional form also returns the running statistics, unchanged in eval mode
    return (out, None, None, mean, var)


def _batch_norm_training(ctx: FxContext, x: str, weight: str, bias: str, running_mean: str | None,
                         running_var: str | None, momentum: float, eps: float) -> tuple:
    """batch_norm_train (which the rules open into BN_A and BN_B), and, where read, the
    batch statistics the backward saves (mean, 1/std per channel) and the running
    statistics updated as torch does (the variance unbiased)."""
    out = ctx.emit("batch_norm_train", x, weight, bias, epsilon=eps)
    if not ctx.results_used() & {1, 2, 3, 4}:
        return (out, None, None, None, None)
    shape, dtype = ctx.shape(x), ctx.dtype(x)
    mean, var = (ctx.emit("reshape", kept, shape=(shape[1],)) for kept in _bn_a_statistics(ctx, x))
    rstd = ctx.emit("rsqrt", ctx.emit("add", var, ctx.constant(np.asarray(eps, dtype))))
    if running_mean is None or running_var is None:  # torch passes both or neither
        return (out, mean, rstd, None, None)
    count = int(np.prod(shape)) // shape[1]

    def blend(old: str, new: str, factor: float) -> str:
        kept = ctx.emit("mul", old, ctx.constant(np.asarray(1 - momentum, dtype)))
        return ctx.emit("add", kept, ctx.emit("mul", new, ctx.constant(np.asarray(momentum * factor, dtype))))

    return (out, mean, rstd, blend(running_mean, mean, 1.0), blend(running_var, var, count / max(count - 1, 1)))


def _bn_a_statistics(ctx: FxContext, x: str) -> tuple[str, str]:
    """The batch mean and biased variance per channel, kept dims, in the very form the
    rules open batch_norm_train's BN_A into (std/compound.fuse: reduce_mean, then
    variance as std/normalize.fuse opens it): the engine's common subexpressions make
    them BN_A's own reductions. Written otherwise (kept dims dropped), the statistics the
    backward saves were computed again: two more passes over every batch norm's input."""
    axes = (0,) + tuple(range(2, ctx.rank(x)))
    mean = ctx.emit("reduce_mean", x, axes=axes, keepdims=1)
    centered = ctx.emit("sub", x, mean)
    return mean, ctx.emit("reduce_mean", ctx.emit("mul", centered, centered), axes=axes, keepdims=1)


def _trains(node) -> bool:
    return target_name(node.target) != BATCH_NORMS[0] and bool(node.args[5])


@refuses(*BATCH_NORMS)
def _training_batch_norm(node) -> str | None:
    if _trains(node) and target_name(node.target) != FUNCTIONAL_BATCH_NORM:
        return "batch norm in training mode that updates its running statistics in place has no converter"
    if not _trains(node) and results_used(node) & {1, 2}:
        return "batch norm's saved mean and inverse deviation are read (training)"
    return None


@converts("aten.native_layer_norm.default")
def _layer_norm(ctx: FxContext) -> tuple:
    x, normalized, weight, bias, eps = (ctx.arg(k, name) for k, name in
                                        enumerate(("input", "normalized_shape", "weight", "bias", "eps")))
    axis = ctx.rank(x) - len(normalized)
    weight = weight or ctx.constant(np.ones(normalized, ctx.dtype(x)))
    bias = bias or ctx.constant(np.zeros(normalized, ctx.dtype(x)))
    out = ctx.emit("layer_norm", x, weight, bias, axis=axis, epsilon=float(eps))
    if not ctx.results_used() & {1, 2}:
        return (out, None, None)
    axes = tuple(range(axis, ctx.rank(x)))
    mean = ctx.emit("reduce_mean", x, axes=axes, keepdims=1)
    centered = ctx.emit("sub", x, mean)
    variance = ctx.emit("reduce_mean", ctx.emit("mul", centered, centered), axes=axes, keepdims=1)
    rstd = ctx.emit("rsqrt", ctx.emit("add", variance, ctx.constant(np.asarray(eps, ctx.dtype(x)))))
    return (out, mean, rstd)


@converts("aten._softmax.default", "aten._log_softmax.default")
def _softmax(ctx: FxContext) -> str:
    op = "log_softmax" if "log" in target_name(ctx.node.target) else "softmax"
    return ctx.emit(op, ctx.arg(0, "self"), axis=int(ctx.arg(1, "dim")))


# ----- pooling ------------------------------------------------------------------------
@converts("aten.avg_pool2d.default")
def _avg_pool(ctx: FxContext) -> str:
    kernel = per_axis(ctx.arg(1, "kernel_size"), 2)
    stride = per_axis(ctx.arg(2, "stride", []) or kernel, 2)
    padding = per_axis(ctx.arg(3, "padding", 0), 2)
    return ctx.emit("average_pool", ctx.arg(0, "self"), kernel_shape=kernel, strides=stride, pads=padding + padding,
                    ceil_mode=int(ctx.arg(4, "ceil_mode", False)),
                    count_include_pad=int(ctx.arg(5, "count_include_pad", True)))


@refuses("aten.avg_pool2d.default")
def _divisor_override(node) -> str | None:
    override = node.args[6] if len(node.args) > 6 else node.kwargs.get("divisor_override")
    return "average pooling with divisor_override has no converter" if override is not None else None


@converts("aten._adaptive_avg_pool2d.default")
def _adaptive_avg_pool(ctx: FxContext) -> str:
    x, size = ctx.arg(0, "self"), per_axis(ctx.arg(1, "output_size"), 2)
    height, width = ctx.shape(x)[-2:]
    if tuple(size) == (1, 1):
        return ctx.emit("global_average_pool", x)
    if height % size[0] or width % size[1]:
        raise UnsupportedOpError(f"adaptive pooling of {height}x{width} to {size[0]}x{size[1]} (windows of "
                                 "unequal sizes) has no converter")
    kernel = (height // size[0], width // size[1])
    return ctx.emit("average_pool", x, kernel_shape=kernel, strides=kernel)


# ----- reductions ---------------------------------------------------------------------
@converts("aten.sum.dim_IntList", "aten.mean.dim", "aten.amax.default", "aten.amin.default", "aten.sum.default",
          "aten.mean.default",
          "aten.any.dim", "aten.any.dims", "aten.any.default")
def _reduce(ctx: FxContext) -> str:
    x = ctx.arg(0, "self")
    family = target_name(ctx.node.target).split(".")[1]
    dims = ctx.arg(1, "dim") if len(ctx.args) > 1 or "dim" in ctx.kwargs else None
    dims = [dims] if isinstance(dims, int) else list(dims or [])
    axes = tuple(sorted({ctx.axis(d, ctx.rank(x)) for d in dims})) or tuple(range(ctx.rank(x)))
    keepdims = int(bool(ctx.arg(2, "keepdim", False)))
    if family == "any":  # a bool reduction: the max of the values as 0/1
        flags = ctx.emit("reduce_max", ctx.cast(x, "float32"), axes=axes, keepdims=keepdims)
        return ctx.emit("greater", flags, ctx.constant(np.float32(0)))
    op = {"sum": "reduce_sum", "mean": "reduce_mean", "amax": "reduce_max", "amin": "reduce_min"}[family]
    return ctx.emit(op, ctx.cast(x, ctx.result_dtype()), axes=axes, keepdims=keepdims)


# ----- views and layout ---------------------------------------------------------------
@converts("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default")
def _reshape(ctx: FxContext) -> str:
    # allowzero: a 0 in torch's size is an empty axis, not ONNX's "copy this dim"
    shape = tuple(int(d) for d in ctx.arg(1, "size"))
    return ctx.emit("reshape", ctx.arg(0, "self"), shape=shape, allowzero=int(0 in shape))


@converts("aten.permute.default")
def _permute(ctx: FxContext) -> str:
    x = ctx.arg(0, "self")
    return ctx.emit("transpose", x, perm=tuple(ctx.axis(d, ctx.rank(x)) for d in ctx.arg(1, "dims")))


@converts("aten.transpose.int")
def _transpose(ctx: FxContext) -> str:
    x = ctx.arg(0, "self")
    perm = list(range(ctx.rank(x)))
    a, b = ctx.axis(ctx.arg(1, "dim0"), len(perm)), ctx.axis(ctx.arg(2, "dim1"), len(perm))
    perm[a], perm[b] = perm[b], perm[a]
    return ctx.emit("transpose", x, perm=tuple(perm))


@converts("aten.expand.default")
def _expand(ctx: FxContext) -> str:
    x, size = ctx.arg(0, "self"), [int(d) for d in ctx.arg(1, "size")]
    shape = (1,) * (len(size) - ctx.rank(x)) + ctx.shape(x)
    return ctx.emit("expand", x, shape=tuple(d if s == -1 else s for s, d in zip(size, shape)))


@converts("aten.slice.Tensor")
def _slice(ctx: FxContext) -> str:
    x, dim = ctx.arg(0, "self"), ctx.arg(1, "dim", 0)
    start, end, step = ctx.arg(2, "start"), ctx.arg(3, "end"), ctx.arg(4, "step", 1)
    return ctx.emit("slice", x, starts=(0 if start is None else int(start),),
                    ends=(INT64_MAX if end is None else min(int(end), INT64_MAX),),
                    axes=(ctx.axis(dim, ctx.rank(x)),), steps=(int(step),))


@converts("aten.select.int")
def _select(ctx: FxContext) -> str:
    x = ctx.arg(0, "self")
    dim = ctx.axis(ctx.arg(1, "dim"), ctx.rank(x))
    index = int(ctx.arg(2, "index")) % ctx.shape(x)[dim]
    part = ctx.emit("slice", x, starts=(index,), ends=(index + 1,), axes=(dim,))
    return ctx.emit("squeeze", part, axes=(dim,))


@converts("aten.cat.default")
def _cat(ctx: FxContext) -> str:
    tensors = list(ctx.arg(0, "tensors"))
    axis = ctx.axis(ctx.arg(1, "dim", 0), ctx.rank(tensors[0]))
    return ctx.emit("concat", *ctx.operands(*tensors), axis=axis)


@converts("aten.unsqueeze.default")
def _unsqueeze(ctx: FxContext) -> str:
    x = ctx.arg(0, "self")
    return ctx.emit("unsqueeze", x, axes=(ctx.axis(ctx.arg(1, "dim"), ctx.rank(x) + 1),))


@converts("aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default")
def _squeeze(ctx: FxContext) -> str:
    x = ctx.arg(0, "self")
    dims = ctx.arg(1, "dim", None)
    dims = range(ctx.rank(x)) if dims is None else ([dims] if isinstance(dims, int) else dims)
    # torch leaves an axis of another size in place, where ONNX's Squeeze refuses it
    axes = tuple(sorted({ctx.axis(d, ctx.rank(x)) for d in dims if ctx.shape(x)[d] == 1}))
    return ctx.emit("squeeze", x, axes=axes) if axes else x


@converts("aten.split_with_sizes.default", "aten.split.Tensor")
def _split(ctx: FxContext) -> tuple:
    x = ctx.arg(0, "self")
    axis = ctx.axis(ctx.arg(2, "dim", 0), ctx.rank(x))
    sizes = ctx.arg(1, "split_sizes")
    if isinstance(sizes, int):  # split.Tensor: equal parts, the last one shorter
        length = ctx.shape(x)[axis]
        sizes = [min(sizes, length - start) for start in range(0, length, sizes)]
    parts = ctx.emit("split", x, axis=axis, split=tuple(int(s) for s in sizes), num_outputs=len(sizes),
                     outputs=[ctx.builder.graph.fresh_name(f"{ctx.node.name}_{k}") for k in range(len(sizes))])
    return parts if isinstance(parts, tuple) else (parts,)


@converts("aten.embedding.default")
def _embedding(ctx: FxContext) -> str:
    # padding_idx only changes the gradient: the forward pass is a row gather
    return ctx.emit("gather", ctx.arg(0, "weight"), ctx.arg(1, "indices"), axis=0)


@converts("aten.index.Tensor")
def _index(ctx: FxContext) -> str:
    # one index tensor, on the first axis: a row gather (scale_grad_by_freq's counts per token)
    (index,) = ctx.arg(1, "indices")
    return ctx.emit("gather", ctx.arg(0, "self"), index, axis=0)


@refuses("aten.index.Tensor")
def _index_form(node) -> str | None:
    return row_index_refusal("index", node.args[1])


def row_index_refusal(op: str, indices) -> str | None:
    """Why ``op`` (index, index_put) with these index tensors (FX nodes or None) has no
    converter: the converters take one int64 or int32 index tensor, on the first axis."""
    if len(indices) != 1 or indices[0] is None:
        return f"{op} with other than one index tensor, on the first axis, has no converter"
    index_type = str(getattr(indices[0].meta.get("val"), "dtype", ""))
    return None if index_type in ("torch.int64", "torch.int32") else f"{op} by {index_type} has no converter"


# ----- tensors made from sizes (constants once the sizes are known) ---------------------
@converts("aten.full.default", "aten.full_like.default", "aten.scalar_tensor.default")
def _full(ctx: FxContext) -> str:
    name = target_name(ctx.node.target)
    if name == "aten.scalar_tensor.default":
        shape, value = (), ctx.arg(0, "s")
    else:
        shape, value = ctx.arg(0, "size"), ctx.arg(1, "fill_value")
        shape = ctx.shape(shape) if name == "aten.full_like.default" else tuple(int(d) for d in shape)
    return ctx.constant(np.full(shape, value, ctx.result_dtype()))


@converts("aten.arange.start_step", "aten.arange.default", "aten.arange.start")
def _arange(ctx: FxContext) -> str:
    bounds = [a for a in ctx.args if isinstance(a, (int, float))]
    return ctx.constant(np.arange(*bounds, dtype=ctx.result_dtype()))


# ----- shape arithmetic on SymInts, evaluated at import (the sizes are concrete by then) -----
#: op name -> function of (graph, resolved args) giving the int
SYMBOLIC: dict[str, Callable[..., int]] = {
    "aten.sym_size.int": lambda graph, x, dim: graph.types[x].shape[dim],
    "aten.sym_numel.default": lambda graph, x: int(np.prod(graph.types[x].shape)),
    "_operator.mul": lambda graph, a, b: a * b,
    "_operator.add": lambda graph, a, b: a + b,
    "_operator.sub": lambda graph, a, b: a - b,
    "_operator.floordiv": lambda graph, a, b: a // b,
    "_operator.neg": lambda graph, a: -a,
}
