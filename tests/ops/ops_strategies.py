"""Hypothesis strategies: a valid (inputs, attrs) pair for each op that has an access spec.

Shapes and attributes are drawn by hypothesis (so failures shrink to small cases); array
contents come from a NumPy generator seeded by a drawn integer, which is much faster than
drawing every element.
"""

from __future__ import annotations

from math import prod

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, mutually_broadcastable_shapes

from fusionlang.ir.narrow_int import int_range

SEEDS = st.integers(0, 2**32 - 1)


def rng_of(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def normal(rng, shape, dtype="float32"):
    return rng.standard_normal(shape).astype(dtype)


def positive(rng, shape):
    return rng.uniform(0.2, 3.0, shape).astype(np.float32)


def small_ints(rng, shape, low=-5, high=6, dtype="int64"):
    return rng.integers(low, high, shape).astype(dtype)


def shapes(min_dims=0, max_dims=3, min_side=1, max_side=4):
    return array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


def finite_floats(low, high):
    return st.floats(low, high, allow_nan=False, allow_infinity=False)


STRATEGIES: dict[str, st.SearchStrategy] = {}


def strategy(*names):
    def register(fn):
        for name in names:
            STRATEGIES[name] = fn(name)
        return fn

    return register


# ----- elementwise ------------------------------------------------------------------------
_POSITIVE_DOMAIN = {"log", "sqrt", "rsqrt", "reciprocal"}
_UNARY_ATTRS = {
    "leaky_relu": {"alpha": finite_floats(0, 1)},
    "elu": {"alpha": finite_floats(0.1, 2)},
    "selu": {"alpha": finite_floats(0.5, 2), "gamma": finite_floats(0.5, 2)},
    "hard_sigmoid": {"alpha": finite_floats(0.05, 1), "beta": finite_floats(-1, 1)},
    "gelu": {"approximate": st.sampled_from(["none", "tanh"])},
    "dropout": {"ratio": finite_floats(0, 0.9)},
}


@strategy("neg", "abs", "sign", "relu", "exp", "log", "sqrt", "rsqrt", "reciprocal", "erf", "tanh", "sigmoid",
          "softplus", "softsign", "floor", "ceil", "sin", "cos", "silu", "identity", "dropout", "leaky_relu",
          "elu", "selu", "hard_sigmoid", "gelu")
def _unary(op):
    @st.composite
    def draw(d):
        shape, seed = d(shapes()), d(SEEDS)
        rng = rng_of(seed)
        if op in _POSITIVE_DOMAIN:
            x = positive(rng, shape)
        elif op in ("neg", "abs", "sign", "relu") and d(st.booleans()):
            x = small_ints(rng, shape, dtype=d(st.sampled_from(["int32", "int64"])))
        else:
            x = (normal(rng, shape) * d(st.sampled_from([1.0, 10.0, 60.0]))).astype(np.float32)
        attrs = {name: d(s) for name, s in _UNARY_ATTRS.get(op, {}).items()}
        return [x], attrs

    return draw()


@strategy("clip")
def _clip(op):
    @st.composite
    def draw(d):
        shape, seed = d(shapes()), d(SEEDS)
        rng = rng_of(seed)
        bounds = st.one_of(st.just(None), st.integers(-3, 3).map(float))
        low, high = d(bounds), d(bounds)
        x = small_ints(rng, shape, dtype="int32") if d(st.booleans()) else normal(rng, shape) * 3
        attrs = {k: v for k, v in (("min", low), ("max", high)) if v is not None}
        return [x], attrs

    return draw()


@strategy("cast")
def _cast(op):
    @st.composite
    def draw(d):
        shape, seed = d(shapes()), d(SEEDS)
        rng = rng_of(seed)
        source = d(st.sampled_from(["float32", "int64", "bool"]))
        target = d(st.sampled_from(["float32", "float64", "float16", "int32", "int64", "int8", "bool"]))
        if source == "bool":
            x = rng.random(shape) < 0.5
        elif source == "int64":
            x = small_ints(rng, shape, -100, 100)
        else:
            x = (normal(rng, shape) * 50).astype(np.float32)
        return [x], {"to": target}

    return draw()


#: same-width dtype groups bitcast moves between
_BITCAST_WIDTHS = (("int8", "uint8", "bool"), ("float16", "bfloat16", "int16", "uint16"),
                   ("float32", "int32", "uint32"), ("float64", "int64", "uint64"))


@strategy("bitcast")
def _bitcast(op):
    @st.composite
    def draw(d):
        shape, seed = d(shapes()), d(SEEDS)
        group = d(st.sampled_from(_BITCAST_WIDTHS[1:]))
        source, target = d(st.sampled_from(group)), d(st.sampled_from(group))
        size = int(np.prod(shape, dtype=np.int64)) * np.dtype(source).itemsize
        raw = rng_of(seed).integers(0, 256, size=size, dtype=np.uint8)  # any pattern: NaNs included
        return [raw.view(source).reshape(shape)], {"source": source, "to": target}

    return draw()


_ARITH = ("add", "sub", "mul", "div", "pow", "max", "min", "sum", "mean")


@strategy("add", "sub", "mul", "div", "pow", "max", "min", "sum", "mean", "prelu")
def _arith(op):
    @st.composite
    def draw(d):
        count = d(st.integers(1, 4)) if op in ("max", "min", "sum", "mean") else 2
        if op == "prelu":
            x_shape = d(shapes(1, 3))
            keep = d(st.integers(0, len(x_shape)))
            slope_shape = tuple(n if d(st.booleans()) else 1 for n in x_shape[len(x_shape) - keep:])
            in_shapes = [x_shape, slope_shape]
        else:
            in_shapes = list(d(mutually_broadcastable_shapes(num_shapes=count, max_dims=3, max_side=4)).input_shapes)
        rng = rng_of(d(SEEDS))
        integer = op in ("add", "sub", "mul", "div", "max", "min", "sum", "pow") and d(st.booleans())
        if integer:
            dtype = d(st.sampled_from(["int32", "int64"]))
            arrays = [small_ints(rng, s, -20, 21, dtype) for s in in_shapes]
            if op == "div":
                divisor = arrays[1]
                arrays[1] = np.where(divisor == 0, 3, divisor).astype(dtype)
            if op == "pow":
                arrays = [small_ints(rng, in_shapes[0], -4, 5, dtype), small_ints(rng, in_shapes[1], 0, 4, dtype)]
        elif op == "pow":
            arrays = [positive(rng, in_shapes[0]), normal(rng, in_shapes[1])]
        elif op == "div":
            arrays = [normal(rng, in_shapes[0]), positive(rng, in_shapes[1]) * rng.choice([-1, 1], in_shapes[1])]
            arrays[1] = arrays[1].astype(np.float32)
        else:
            arrays = [normal(rng, s) for s in in_shapes]
        return arrays, {}

    return draw()


@strategy("tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "round")
def _more_unary(op):
    @st.composite
    def draw(d):
        rng = rng_of(d(SEEDS))
        # scaled so the inverse functions see both their domain and beyond it (NaN), cosh and
        # sinh overflow, and round sees halves (its ties); NaN and infinities mixed in
        x = with_specials(rng, d(shapes())) * d(st.sampled_from([0.5, 1.0, 3.0, 100.0]))
        if op == "round":
            x = np.floor(x * 4) / 4
        return [x.astype(np.float32)], {}

    return draw()


@strategy("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not")
def _bitwise(op):
    @st.composite
    def draw(d):
        count = 1 if op == "bitwise_not" else 2
        in_shapes = d(mutually_broadcastable_shapes(num_shapes=count, max_dims=3, max_side=4)).input_shapes
        rng = rng_of(d(SEEDS))
        info = np.iinfo(d(st.sampled_from(["int8", "uint8", "int32", "int64"])))
        return [rng.integers(info.min, info.max, s, dtype=info.dtype, endpoint=True) for s in in_shapes], {}

    return draw()


@strategy("equal", "less", "less_equal", "greater", "greater_equal", "and", "or", "xor", "not", "where")
def _logic(op):
    @st.composite
    def draw(d):
        count = {"not": 1, "where": 3}.get(op, 2)
        in_shapes = d(mutually_broadcastable_shapes(num_shapes=count, max_dims=3, max_side=4)).input_shapes
        rng = rng_of(d(SEEDS))
        if op in ("and", "or", "xor", "not"):
            return [rng.random(s) < 0.5 for s in in_shapes], {}
        if op == "where":
            return [rng.random(in_shapes[0]) < 0.5, normal(rng, in_shapes[1]), normal(rng, in_shapes[2])], {}
        # few distinct values, so ties are common
        return [rng.integers(-2, 3, s).astype(np.float32) for s in in_shapes], {}

    return draw()


# ----- reductions -------------------------------------------------------------------------
@strategy("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod")
def _reduce(op):
    @st.composite
    def draw(d):
        shape = d(shapes(1, 4))
        rank = len(shape)
        axes = d(st.lists(st.integers(0, rank - 1), unique=True, max_size=rank))
        axes = [a - rank if d(st.booleans()) else a for a in axes]
        attrs = {"axes": tuple(axes), "keepdims": d(st.integers(0, 1)), "noop_with_empty_axes": d(st.integers(0, 1))}
        return [normal(rng_of(d(SEEDS)), shape)], attrs

    return draw()


# ----- windows ----------------------------------------------------------------------------
@st.composite
def _window(d, spatial_rank, *, pool=False):
    """Kernel, strides, dilations, pads and a spatial input shape the window fits in."""
    kernel = tuple(d(st.integers(1, 3)) for _ in range(spatial_rank))
    strides = tuple(d(st.integers(1, 3)) for _ in range(spatial_rank))
    dilations = tuple(d(st.integers(1, 2)) for _ in range(spatial_rank))
    pad_max = [k - 1 if pool else 2 for k in kernel]
    pads = tuple(d(st.integers(0, m)) for m in pad_max * 2)
    spatial = []
    for a in range(spatial_rank):
        span = dilations[a] * (kernel[a] - 1) + 1
        spatial.append(max(1, span - pads[a] - pads[a + spatial_rank]) + d(st.integers(0, 3)))
    attrs = {"kernel_shape": kernel, "strides": strides, "dilations": dilations, "pads": pads}
    return tuple(spatial), attrs


@strategy("conv")
def _conv(op):
    @st.composite
    def draw(d):
        spatial, attrs = d(_window(d(st.integers(1, 2))))
        group = d(st.integers(1, 3))
        cin, cout = group * d(st.integers(1, 2)), group * d(st.integers(1, 2))
        n = d(st.integers(1, 2))
        rng = rng_of(d(SEEDS))
        inputs = [normal(rng, (n, cin) + spatial), normal(rng, (cout, cin // group) + attrs["kernel_shape"])]
        if d(st.booleans()):
            inputs.append(normal(rng, (cout,)))
        if d(st.booleans()):
            attrs.pop("kernel_shape")
        return inputs, {**attrs, "group": group}

    return draw()


@strategy("conv_transpose")
def _conv_transpose(op):
    @st.composite
    def draw(d):
        rank = d(st.integers(1, 2))
        kernel = tuple(d(st.integers(1, 3)) for _ in range(rank))
        strides = tuple(d(st.integers(1, 3)) for _ in range(rank))
        dilations = tuple(d(st.integers(1, 2)) for _ in range(rank))
        spatial = tuple(d(st.integers(1, 3)) for _ in range(rank))
        extra = tuple(d(st.integers(0, 2)) for _ in range(rank))
        full = [s * (n - 1) + e + dl * (k - 1) + 1
                for s, n, e, dl, k in zip(strides, spatial, extra, dilations, kernel)]
        begin = [d(st.integers(0, f - 1)) for f in full]
        end = [d(st.integers(0, f - 1 - b)) for f, b in zip(full, begin)]
        group = d(st.integers(1, 2))
        cin, mg = group * d(st.integers(1, 2)), d(st.integers(1, 2))
        rng = rng_of(d(SEEDS))
        inputs = [normal(rng, (d(st.integers(1, 2)), cin) + spatial), normal(rng, (cin, mg) + kernel)]
        if d(st.booleans()):
            inputs.append(normal(rng, (mg * group,)))
        attrs = {"kernel_shape": kernel, "strides": strides, "dilations": dilations, "pads": tuple(begin + end),
                 "output_padding": extra, "group": group}
        return inputs, attrs

    return draw()


@strategy("max_pool", "average_pool")
def _pool(op):
    @st.composite
    def draw(d):
        spatial, attrs = d(_window(d(st.integers(1, 2)), pool=True))
        attrs["ceil_mode"] = d(st.integers(0, 1))
        if op == "average_pool":
            attrs["count_include_pad"] = d(st.integers(0, 1))
        shape = (d(st.integers(1, 2)), d(st.integers(1, 3))) + spatial
        return [normal(rng_of(d(SEEDS)), shape)], attrs

    return draw()


@strategy("global_average_pool", "global_max_pool")
def _global_pool(op):
    @st.composite
    def draw(d):
        return [normal(rng_of(d(SEEDS)), d(shapes(3, 4)))], {}

    return draw()


@strategy("lrn")
def _lrn(op):
    @st.composite
    def draw(d):
        shape = d(shapes(2, 4))
        attrs = {"size": d(st.integers(1, 5)), "alpha": d(finite_floats(1e-4, 1)), "beta": d(finite_floats(0.1, 1)),
                 "bias": d(finite_floats(0.5, 2))}
        return [normal(rng_of(d(SEEDS)), shape)], attrs

    return draw()


@strategy("batch_norm")
def _batch_norm(op):
    @st.composite
    def draw(d):
        shape = d(shapes(2, 4))
        rng = rng_of(d(SEEDS))
        c = (shape[1],)
        inputs = [normal(rng, shape), normal(rng, c), normal(rng, c), normal(rng, c), positive(rng, c)]
        return inputs, {"epsilon": d(finite_floats(1e-6, 0.1))}

    return draw()


# ----- matrix products --------------------------------------------------------------------
@strategy("gemm")
def _gemm(op):
    @st.composite
    def draw(d):
        m, k, n = (d(st.integers(1, 4)) for _ in range(3))
        trans_a, trans_b = d(st.integers(0, 1)), d(st.integers(0, 1))
        rng = rng_of(d(SEEDS))
        inputs = [normal(rng, (k, m) if trans_a else (m, k)), normal(rng, (n, k) if trans_b else (k, n))]
        c_shape = d(st.sampled_from([None, (), (n,), (m, 1), (1, n), (m, n)]))
        if c_shape is not None:
            inputs.append(normal(rng, c_shape))
        attrs = {"trans_a": trans_a, "trans_b": trans_b, "alpha": d(st.sampled_from([1.0, 0.5, -2.0])),
                 "beta": d(st.sampled_from([1.0, 0.0, 1.5]))}
        return inputs, attrs

    return draw()


@strategy("matmul")
def _matmul(op):
    @st.composite
    def draw(d):
        batches = d(mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3)).input_shapes
        m, k, n = (d(st.integers(1, 4)) for _ in range(3))
        a_shape = (k,) if d(st.booleans()) else batches[0] + (m, k)
        b_shape = (k,) if d(st.booleans()) else batches[1] + (k, n)
        rng = rng_of(d(SEEDS))
        if d(st.booleans()):
            return [small_ints(rng, a_shape, dtype="int32"), small_ints(rng, b_shape, dtype="int32")], {}
        return [normal(rng, a_shape), normal(rng, b_shape)], {}

    return draw()


# ----- data movement ----------------------------------------------------------------------
def _factorizations(total: int) -> list[int]:
    return [f for f in range(1, total + 1) if total % f == 0]


@strategy("reshape")
def _reshape(op):
    @st.composite
    def draw(d):
        shape = d(shapes(0, 4))
        remaining, target = prod(shape), []
        for _ in range(d(st.integers(0, 3))):
            factor = d(st.sampled_from(_factorizations(remaining)))
            target.append(factor)
            remaining //= factor
        target.append(remaining)
        if d(st.booleans()):
            target[d(st.integers(0, len(target) - 1))] = -1
        return [normal(rng_of(d(SEEDS)), shape)], {"shape": tuple(target)}

    return draw()


@strategy("transpose")
def _transpose(op):
    @st.composite
    def draw(d):
        shape = d(shapes(0, 4))
        perm = d(st.permutations(range(len(shape))))
        attrs = {"perm": tuple(perm)} if d(st.booleans()) else {}
        return [normal(rng_of(d(SEEDS)), shape)], attrs

    return draw()


@strategy("flatten")
def _flatten(op):
    @st.composite
    def draw(d):
        shape = d(shapes(0, 4))
        return [normal(rng_of(d(SEEDS)), shape)], {"axis": d(st.integers(-len(shape), len(shape)))}

    return draw()


@strategy("squeeze")
def _squeeze(op):
    @st.composite
    def draw(d):
        shape = d(shapes(0, 4, min_side=1, max_side=2))
        ones = [k for k, n in enumerate(shape) if n == 1]
        axes = d(st.lists(st.sampled_from(ones), unique=True)) if ones else []
        axes = [a - len(shape) if d(st.booleans()) else a for a in axes]
        return [normal(rng_of(d(SEEDS)), shape)], {"axes": tuple(axes)}

    return draw()


@strategy("unsqueeze")
def _unsqueeze(op):
    @st.composite
    def draw(d):
        shape = d(shapes(0, 3))
        count = d(st.integers(0, 3))
        out_rank = len(shape) + count
        axes = d(st.lists(st.integers(0, out_rank - 1), min_size=count, max_size=count, unique=True)) if count else []
        axes = [a - out_rank if d(st.booleans()) else a for a in axes]
        return [normal(rng_of(d(SEEDS)), shape)], {"axes": tuple(axes)}

    return draw()


@strategy("concat")
def _concat(op):
    @st.composite
    def draw(d):
        shape = list(d(shapes(1, 3)))
        axis = d(st.integers(-len(shape), len(shape) - 1))
        rng = rng_of(d(SEEDS))
        arrays = []
        for _ in range(d(st.integers(1, 3))):
            shape[axis] = d(st.integers(0, 3))
            arrays.append(normal(rng, tuple(shape)))
        return arrays, {"axis": axis}

    return draw()


@strategy("split")
def _split(op):
    @st.composite
    def draw(d):
        shape = d(shapes(1, 3, max_side=6))
        axis = d(st.integers(-len(shape), len(shape) - 1))
        left, sizes = shape[axis], []
        while left:
            sizes.append(d(st.integers(1, left)))
            left -= sizes[-1]
        if not sizes or d(st.booleans()):
            sizes.insert(d(st.integers(0, len(sizes))), 0)
        return [normal(rng_of(d(SEEDS)), shape)], {"axis": axis, "split": tuple(sizes)}

    return draw()


_BOUNDS = st.one_of(st.integers(-8, 8), st.sampled_from([2**63 - 1, -(2**63)]))


@strategy("slice")
def _slice(op):
    @st.composite
    def draw(d):
        shape = d(shapes(1, 3, min_side=0, max_side=6))
        rank = len(shape)
        axes = d(st.lists(st.integers(0, rank - 1), unique=True, min_size=1, max_size=rank))
        count = len(axes)
        attrs = {"starts": tuple(d(_BOUNDS) for _ in axes), "ends": tuple(d(_BOUNDS) for _ in axes)}
        if d(st.booleans()) or axes != list(range(count)):
            attrs["axes"] = tuple(a - rank if d(st.booleans()) else a for a in axes)
        if d(st.booleans()):
            attrs["steps"] = tuple(d(st.sampled_from([-3, -2, -1, 1, 2, 3])) for _ in axes)
        return [normal(rng_of(d(SEEDS)), shape)], attrs

    return draw()


@strategy("expand")
def _expand(op):
    @st.composite
    def draw(d):
        x_shape, target = d(mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3)).input_shapes
        return [normal(rng_of(d(SEEDS)), x_shape)], {"shape": target}

    return draw()


@strategy("tile")
def _tile(op):
    @st.composite
    def draw(d):
        shape = d(shapes(0, 3, max_side=3))
        repeats = tuple(d(st.integers(0, 3)) for _ in shape)
        return [normal(rng_of(d(SEEDS)), shape)], {"repeats": repeats}

    return draw()


@strategy("pad")
def _pad(op):
    @st.composite
    def draw(d):
        shape = d(shapes(1, 3, min_side=1, max_side=5))
        mode = d(st.sampled_from(["constant", "reflect", "edge", "wrap"]))
        begins, ends = [], []
        for n in shape:
            crop_b = d(st.integers(0, n))
            crop_e = d(st.integers(0, n - crop_b))
            kept = n - crop_b - crop_e
            limit = {"reflect": kept - 1, "constant": 3}.get(mode, 3 if kept else 0)
            grow_b, grow_e = d(st.integers(0, max(limit, 0))), d(st.integers(0, max(limit, 0)))
            begins.append(-crop_b if crop_b and d(st.booleans()) else grow_b)
            ends.append(-crop_e if crop_e and d(st.booleans()) else grow_e)
        attrs = {"pads": tuple(begins + ends), "mode": mode}
        if mode == "constant":
            attrs["value"] = d(finite_floats(-2, 2))
        return [normal(rng_of(d(SEEDS)), shape)], attrs

    return draw()


@strategy("gather")
def _gather(op):
    @st.composite
    def draw(d):
        data_shape = d(shapes(1, 3))
        axis = d(st.integers(-len(data_shape), len(data_shape) - 1))
        n = data_shape[axis]
        rng = rng_of(d(SEEDS))
        indices = rng.integers(-n, n, d(shapes(0, 2))).astype(d(st.sampled_from(["int64", "int32"])))
        return [normal(rng, data_shape), indices], {"axis": axis}

    return draw()


def with_specials(rng, shape):
    """Normal values, a share of them NaN, +inf or -inf."""
    x = normal(rng, shape)
    kind = rng.integers(0, 6, shape)
    return np.where(kind == 0, np.nan, np.where(kind == 1, np.inf, np.where(kind == 2, -np.inf, x))).astype(np.float32)


@strategy("is_nan", "is_inf")
def _classify(op):
    @st.composite
    def draw(d):
        x = with_specials(rng_of(d(SEEDS)), d(shapes()))
        if op == "is_nan":
            return [x], {}
        return [x], {"detect_positive": d(st.integers(0, 1)), "detect_negative": d(st.integers(0, 1))}

    return draw()


@strategy("shrink", "mish")
def _activation(op):
    @st.composite
    def draw(d):
        rng = rng_of(d(SEEDS))
        shape = d(shapes())
        if op == "mish":
            return [(normal(rng, shape) * d(st.sampled_from([1.0, 10.0, 60.0]))).astype(np.float32)], {}
        x = small_ints(rng, shape, dtype="int32") if d(st.booleans()) else normal(rng, shape)
        return [x], {"lambd": d(st.integers(0, 2).map(float)), "bias": d(st.integers(-1, 1).map(float))}

    return draw()


@strategy("remainder")
def _remainder(op):
    @st.composite
    def draw(d):
        in_shapes = d(mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4)).input_shapes
        rng = rng_of(d(SEEDS))
        fmod = d(st.integers(0, 1))
        nonzero = lambda a: np.where(a == 0, 3, a).astype(a.dtype)  # noqa: E731
        if d(st.booleans()):
            dtype = d(st.sampled_from(["int32", "int64"]))
            divisor = nonzero(small_ints(rng, in_shapes[1], -6, 7, dtype))
            return [small_ints(rng, in_shapes[0], -20, 21, dtype), divisor], {"fmod": fmod}
        return [normal(rng, in_shapes[0]) * 5, nonzero(normal(rng, in_shapes[1]))], {"fmod": fmod}

    return draw()


@strategy("bit_shift")
def _bit_shift(op):
    @st.composite
    def draw(d):
        in_shapes = d(mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4)).input_shapes
        rng = rng_of(d(SEEDS))
        info = np.iinfo(d(st.sampled_from(["int8", "uint8", "int32", "int64"])))
        # the whole range of the type, and counts from below 0 to past the width
        a = rng.integers(info.min, info.max, in_shapes[0], dtype=info.dtype, endpoint=True)
        s = rng.integers(max(info.min, -3), info.bits + 3, in_shapes[1]).astype(info.dtype)
        return [a, s], {"direction": d(st.sampled_from(["left", "right"]))}

    return draw()


@strategy("trilu")
def _trilu(op):
    @st.composite
    def draw(d):
        rng = rng_of(d(SEEDS))
        x = normal(rng, d(shapes(2, 3)))
        k = d(st.integers(-5, 5))
        # k as the attribute: the C compile test makes an integer input a constant, and a
        # run-time k is a graph input (tests/frontend/test_onnx_transformer_ops.py)
        return [x], {"upper": d(st.integers(0, 1)), "k": k}

    return draw()


@strategy("cumsum", "cumprod")
def _cumsum(op):
    @st.composite
    def draw(d):
        shape = d(shapes(1, 3))
        rng = rng_of(d(SEEDS))
        x = small_ints(rng, shape) if d(st.booleans()) else normal(rng, shape)
        return [x], {"axis": d(st.integers(-len(shape), len(shape) - 1)), "exclusive": d(st.integers(0, 1)),
                     "reverse": d(st.integers(0, 1))}

    return draw()


@strategy("index_of")
def _index_of(op):
    @st.composite
    def draw(d):
        shape = d(shapes(1, 3))
        axis = d(st.integers(-len(shape), len(shape) - 1))
        rng = rng_of(d(SEEDS))
        x = rng.integers(-2, 3, shape).astype(np.float32)  # few values: ties are common
        if d(st.booleans()):
            x[rng.random(shape) < 0.2] = np.nan
        with np.errstate(invalid="ignore"):
            target = (np.max if d(st.booleans()) else np.min)(x, axis=axis, keepdims=True)
        return [x, target], {"axis": axis, "keepdims": d(st.integers(0, 1)), "last": d(st.integers(0, 1))}

    return draw()


@strategy("gather_elements")
def _gather_elements(op):
    @st.composite
    def draw(d):
        data_shape = d(shapes(1, 3))
        axis = d(st.integers(-len(data_shape), len(data_shape) - 1))
        n = data_shape[axis]
        index_shape = tuple(d(st.integers(1, 4)) if k == axis % len(data_shape) else d(st.integers(1, m))
                            for k, m in enumerate(data_shape))
        rng = rng_of(d(SEEDS))
        indices = rng.integers(-n, n, index_shape).astype(d(st.sampled_from(["int64", "int32"])))
        return [normal(rng, data_shape), indices], {"axis": axis}

    return draw()


@strategy("gather_nd")
def _gather_nd(op):
    @st.composite
    def draw(d):
        data_shape = d(shapes(1, 4))
        b = d(st.integers(0, len(data_shape) - 1))
        m = d(st.integers(1, len(data_shape) - b))
        middle = d(shapes(0, 2))
        rng = rng_of(d(SEEDS))
        entries = [rng.integers(-n, n, data_shape[:b] + middle) for n in data_shape[b:b + m]]
        indices = np.stack(entries, axis=-1).astype(np.int64)
        return [normal(rng, data_shape), indices], {"batch_dims": b}

    return draw()


@strategy("resize")
def _resize(op):
    @st.composite
    def draw(d):
        shape = d(shapes(1, 4, min_side=1, max_side=5))
        mode = d(st.sampled_from(["nearest", "linear", "cubic"]))
        coordinates = d(st.sampled_from(["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                         "asymmetric", "tf_crop_and_resize"]))
        scales, sizes = [], []
        for n in shape:  # a scale, with the output length it gives, or a length, with its exact scale
            if d(st.booleans()):
                scale = float(np.float32(d(st.sampled_from([0.4, 0.6, 1.0, 1.5, 2.0, 2.7]))))
                scales.append(scale)
                sizes.append(max(int(scale * n), 1))
            else:
                sizes.append(d(st.integers(1, 7)))
                scales.append(sizes[-1] / n)
        attrs = {"sizes": tuple(sizes), "scales": tuple(scales), "mode": mode,
                 "coordinate_transformation_mode": coordinates,
                 "nearest_mode": d(st.sampled_from(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])),
                 "cubic_coeff_a": d(st.sampled_from([-0.75, -0.5])), "exclude_outside": d(st.integers(0, 1)),
                 "antialias": 0 if mode == "nearest" else d(st.integers(0, 1))}
        if coordinates == "tf_crop_and_resize":
            starts = [d(finite_floats(-0.3, 0.6)) for _ in shape]
            attrs["roi"] = tuple(starts + [s + d(finite_floats(0.1, 1.0)) for s in starts])
            attrs["extrapolation_value"] = d(finite_floats(-2, 2))
        rng = rng_of(d(SEEDS))
        if mode == "nearest" and d(st.booleans()):  # nearest copies cells of any dtype
            return [small_ints(rng, shape, dtype=d(st.sampled_from(["int64", "int32", "uint8"])), low=0)], attrs
        return [normal(rng, shape)], attrs

    return draw()


# ----- quantization -----------------------------------------------------------------------
_QUANTIZED = ["uint8", "int8", "uint4", "int4", "uint2", "int2", "float4_e2m1fn", "float8_e4m3fn", "float8_e4m3fnuz",
              "float8_e5m2", "float8_e5m2fnuz"]


@st.composite
def _scales(d, rng, shape):
    """(scale shape, attrs): one scale, one per element of an axis, or one per block along it."""
    mode = d(st.sampled_from(["tensor", "axis", "block"]))
    if mode == "tensor":
        return d(st.sampled_from([(), (1,)])), {}
    axis = d(st.integers(-len(shape), len(shape) - 1))
    if mode == "axis":
        return (shape[axis],), {"axis": axis}
    block = d(st.integers(1, 3))
    return tuple(-(-n // block) if j == axis % len(shape) else n for j, n in enumerate(shape)), \
        {"axis": axis, "block_size": block}


@strategy("quantize_linear", "dequantize_linear")
def _linear_quantization(op):
    @st.composite
    def draw(d):
        rng = rng_of(d(SEEDS))
        shape = d(shapes(1, 3))
        scale_shape, attrs = d(_scales(rng, shape))
        to = d(st.sampled_from(_QUANTIZED))
        float_type = d(st.sampled_from(["float32", "float32", "float64"])) if op == "quantize_linear" else "float32"
        scale = rng.uniform(0.01, 0.5, scale_shape).astype(float_type)
        if to.startswith("float"):
            zero = np.zeros(scale_shape, to)  # ONNX wants float8 (and float4) zero points to be 0
        else:
            low, high = int_range(to)
            zero = rng.integers(low // 4, high // 4 + 1, scale_shape).astype(to)
        zero = zero if d(st.booleans()) else None
        if op == "quantize_linear":
            # past the integer range, and past the float8 range when scales are small
            x = (rng.standard_normal(shape) * d(st.sampled_from([1.0, 30.0, 3000.0]))).astype(float_type)
            return [x, scale, zero], {**attrs, "to": to}
        if to.startswith("float"):
            x = rng.integers(0, 16 if to == "float4_e2m1fn" else 256, shape).astype(np.uint8).view(to)
            x = np.where(np.isnan(x.astype(np.float32)), np.zeros((), to), x)  # NaN != NaN in the comparison
        else:
            low, high = int_range(to)
            x = rng.integers(low, high, shape, endpoint=True).astype(to)
        return [x, scale, zero], attrs

    return draw()


# ----- scatters -------------------------------------------------------------------------------
def _scatter_shapes(d):
    """(data shape, indices shape, axis): indices no longer than data off the axis."""
    data_shape = d(shapes(1, 3))
    axis = d(st.integers(-len(data_shape), len(data_shape) - 1))
    index_shape = tuple(d(st.integers(0, 4)) if k == axis % len(data_shape) else d(st.integers(1, m))
                        for k, m in enumerate(data_shape))
    return data_shape, index_shape, axis


def _scatter_indices(d, rng, data_shape, index_shape, axis):
    n = data_shape[axis]
    # few places: repeated indices (duplicates) are common
    return rng.integers(-n, n, index_shape).astype(d(st.sampled_from(["int64", "int32"])))


@strategy("scatter_elements")
def _scatter_elements(op):
    @st.composite
    def draw(d):
        data_shape, index_shape, axis = _scatter_shapes(d)
        rng = rng_of(d(SEEDS))
        indices = _scatter_indices(d, rng, data_shape, index_shape, axis)
        make = (lambda s: small_ints(rng, s)) if d(st.booleans()) else (lambda s: normal(rng, s))
        return [make(data_shape), indices, make(index_shape)], {
            "axis": axis, "reduction": d(st.sampled_from(["add", "mul", "max", "min"]))}

    return draw()


@strategy("scatter_position")
def _scatter_position(op):
    @st.composite
    def draw(d):
        data_shape, index_shape, axis = _scatter_shapes(d)
        rng = rng_of(d(SEEDS))
        return [normal(rng, data_shape), _scatter_indices(d, rng, data_shape, index_shape, axis)], {"axis": axis}

    return draw()


@strategy("scatter_pick")
def _scatter_pick(op):
    @st.composite
    def draw(d):
        data_shape, update_shape, axis = _scatter_shapes(d)
        rng = rng_of(d(SEEDS))
        m = update_shape[axis]
        position = rng.integers(-m - 1 if m else -3, m if m else 0, data_shape).clip(-m if m else None)
        return [normal(rng, data_shape), normal(rng, update_shape), position.astype(np.int64)], {"axis": axis}

    return draw()


@strategy("segment_sum")
def _segment_sum(op):
    @st.composite
    def draw(d):
        rows, segments = d(st.integers(0, 6)), d(st.integers(1, 4))
        row_shape = d(shapes(0, 2))
        rng = rng_of(d(SEEDS))
        # few segments: rows landing on one segment (and negative indices) are common
        indices = rng.integers(-segments, segments, rows).astype(d(st.sampled_from(["int64", "int32"])))
        make = (lambda s: small_ints(rng, s)) if d(st.booleans()) else (lambda s: normal(rng, s))
        return [make((rows, *row_shape)), indices], {"num_segments": segments}

    return draw()


# ----- sorting and one-hot ----------------------------------------------------------------
@strategy("sort_position")
def _sort_position(op):
    @st.composite
    def draw(d):
        shape = d(shapes(1, 3))
        rng = rng_of(d(SEEDS))
        x = rng.integers(-2, 3, shape)  # few values: ties are common
        if d(st.booleans()):
            x = x.astype(np.float32)
            x[rng.random(shape) < 0.2] = np.nan
        return [x], {"axis": d(st.integers(-len(shape), len(shape) - 1)), "largest": d(st.integers(0, 1))}

    return draw()


@strategy("sorted_indices")
def _sorted_indices(op):
    @st.composite
    def draw(d):
        shape = d(shapes(1, 3))
        axis = d(st.integers(-len(shape), len(shape) - 1))
        rng = rng_of(d(SEEDS))
        places = np.argsort(rng.random(shape), axis=axis).astype(np.int64)  # a permutation per line
        return [places], {"axis": axis, "k": d(st.integers(0, shape[axis]))}

    return draw()


@strategy("one_hot")
def _one_hot(op):
    @st.composite
    def draw(d):
        shape = d(shapes(0, 2))
        depth = d(st.integers(1, 4))
        rng = rng_of(d(SEEDS))
        indices = rng.integers(-depth - 1, depth + 1, shape)  # some outside [-depth, depth): off everywhere
        indices = indices.astype(d(st.sampled_from(["int64", "int32", "int8"])))
        values = normal(rng, (2,)) if d(st.booleans()) else small_ints(rng, (2,))
        return [indices, values], {"depth": depth, "axis": d(st.integers(-len(shape) - 1, len(shape)))}

    return draw()


# ----- grid sampling --------------------------------------------------------------------------
def _grid_attrs(d, rank: int) -> dict:
    return {"sizes": tuple(d(st.integers(1, 4)) for _ in range(rank)),
            "mode": d(st.sampled_from(["nearest", "linear", "cubic"])),
            "padding_mode": d(st.sampled_from(["zeros", "border", "reflection"])),
            "align_corners": d(st.integers(0, 1))}


@strategy("grid_coordinates")
def _grid_coordinates(op):
    @st.composite
    def draw(d):
        rank = d(st.integers(1, 3))
        rng = rng_of(d(SEEDS))
        shape = (d(st.integers(1, 2)),) + tuple(d(st.integers(1, 3)) for _ in range(rank)) + (rank,)
        # past both borders, several spans far (reflection bounces more than once)
        return [rng.uniform(-3.5, 3.5, shape).astype(np.float32)], _grid_attrs(d, rank)

    return draw()


@strategy("grid_taps")
def _grid_taps(op):
    @st.composite
    def draw(d):
        rank = d(st.integers(1, 3))
        attrs = _grid_attrs(d, rank)
        rng = rng_of(d(SEEDS))
        shape = (d(st.integers(1, 2)),) + tuple(d(st.integers(1, 3)) for _ in range(rank))
        # coordinates as grid_coordinates leaves them, and some outside (zeros mode keeps those)
        coordinates = np.stack([rng.uniform(-2, n + 1, shape) for n in attrs["sizes"]], axis=-1)
        if attrs["mode"] == "nearest":
            coordinates = np.round(coordinates)
        return [coordinates.astype(np.float32)], attrs

    return draw()


@strategy("gather_taps")
def _gather_taps(op):
    @st.composite
    def draw(d):
        rank = d(st.integers(1, 3))
        rng = rng_of(d(SEEDS))
        sizes = tuple(d(st.integers(1, 3)) for _ in range(rank))
        batch, channels, taps = d(st.integers(1, 2)), d(st.integers(1, 3)), d(st.sampled_from([1, 2, 4]))
        where = tuple(d(st.integers(1, 3)) for _ in range(rank))
        x = normal(rng, (batch, channels) + sizes)
        cells = np.stack([rng.integers(-1, n + 1, (batch,) + where + (taps,)) for n in sizes], axis=-2)
        return [x, cells.astype(np.int64), normal(rng, cells.shape)], {}

    return draw()


@strategy("col2im")
def _col2im(op):
    @st.composite
    def draw(d):
        rank = d(st.integers(1, 2))
        block = tuple(d(st.integers(1, 3)) for _ in range(rank))
        dilations = tuple(d(st.integers(1, 2)) for _ in range(rank))
        strides = tuple(d(st.integers(1, 3)) for _ in range(rank))
        pads = tuple(d(st.integers(0, 2)) for _ in range(2 * rank))
        # an image the dilated block fits once padded
        image = tuple(max(1, dilations[k] * (block[k] - 1) + 1 - pads[k] - pads[rank + k]) + d(st.integers(0, 4))
                      for k in range(rank))
        placements = [(image[k] + pads[k] + pads[rank + k] - dilations[k] * (block[k] - 1) - 1) // strides[k] + 1
                      for k in range(rank)]
        rng = rng_of(d(SEEDS))
        x = normal(rng, (d(st.integers(1, 2)), d(st.integers(1, 2)) * prod(block), prod(placements)))
        return [x], {"image_shape": image, "block_shape": block, "dilations": dilations, "pads": pads,
                     "strides": strides}

    return draw()
