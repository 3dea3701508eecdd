"""``graphs()``: a hypothesis strategy of small random graphs with consistent shapes.

    from hypothesis import given
    from fusionlang.testing import graphs, feeds_for

    @given(graphs(max_nodes=10))
    def test_my_pass_keeps_values(graph):
        feeds = feeds_for(graph)
        ...

A graph grows one *family* at a time; each family adds a node (or a short idiom of
nodes) reading values already in the graph, so the result is a DAG with branches,
shared values and several outputs:

* ``unary`` — bounded elementwise ops (tanh, sigmoid, relu, erf, ``exp(tanh x)``,
  ``log(1 + |x|)``, ...): values never leave a small range;
* ``binary`` — add, sub, mul, max, min with another value or a new input/constant of a
  broadcasting shape; ``divide`` — by a leaf away from zero; ``select`` — a comparison
  and ``where``;
* ``reduce`` — sum, mean, max, min over any axes, with or without kept dims;
* ``softmax`` / ``log_softmax`` / ``norm`` — the primitive idioms (max, sub, exp, sum,
  div; mean, variance, rsqrt), on any axis;
* ``transpose``, ``reshape`` (also flatten, squeeze, unsqueeze) and ``movement``
  (concat, slice, pad, expand, tile, gather);
* ``conv`` (1-d and 2-d, groups, strides, padding), ``pool`` (max, average, global),
  ``matmul`` (2-d, batched, gemm with a bias);
* ``compound`` (only when asked for) — softmax, log_softmax, layer_norm, batch_norm,
  gelu ops, which a rule set must open before code generation.

Values stay small (inputs in [-2, 2]; bounded unary ops; weights in [-0.5, 0.5];
divisors away from 0), and shapes tiny (sides up to 4), so thousands of graphs compile
and run quickly and a float32 tolerance means something. Every value nothing reads is
a graph output, so no node is dead.
"""

from __future__ import annotations

from math import prod
from typing import cast

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from fusionlang.errors import FuseError
from fusionlang.ir.graph import Graph
from fusionlang.ops.builder import GraphBuilder
from fusionlang.testing.opgen import related_shape

#: every family, with the default weights (a family listed twice is drawn twice as often)
FAMILIES = ("unary", "unary", "binary", "binary", "divide", "select", "reduce", "reduce", "softmax", "log_softmax",
            "norm", "transpose", "transpose", "reshape", "reshape", "movement", "movement", "movement", "conv", "conv",
            "pool", "pool", "matmul", "matmul")
COMPOUND_FAMILIES = FAMILIES + ("compound",)

_UNARY = ("relu", "tanh", "sigmoid", "neg", "abs", "sin", "cos", "erf", "softsign", "silu", "gelu", "leaky_relu",
          "elu", "hard_sigmoid", "softplus", "clip", "exp_tanh", "log1p_abs", "sqrt_abs", "rsqrt_1p", "identity")
_BINARY = ("add", "sub", "mul", "max", "min")


class _Grower:
    def __init__(self, draw, name: str, rng: np.random.Generator, dtype: str):
        self.draw = draw
        self.b = GraphBuilder(name)
        self.g = self.b.graph
        self.rng = rng
        self.dtype = dtype
        self.values: list[str] = []
        self.leaves = 0

    # ----- values -----------------------------------------------------------------------
    def shape(self, value: str) -> tuple[int, ...]:
        return self.g.types[value].shape

    def pick(self, *, min_rank: int = 0, max_rank: int = 8) -> str | None:
        """An existing value (later ones more often, so chains grow deep)."""
        fits = [v for v in self.values if min_rank <= len(self.shape(v)) <= max_rank]
        if not fits:
            return None
        k = self.draw(st.integers(0, len(fits) - 1))
        return fits[len(fits) - 1 - k]

    def leaf(self, shape, *, kind: str | None = None, positive: bool = False, low: float = -2.0,
             high: float = 2.0) -> str:
        """A new graph input or constant of ``shape``."""
        kind = kind or self.draw(st.sampled_from(["input", "const"]))
        self.leaves += 1
        if kind == "input":
            return self.b.input(f"in{self.leaves}", tuple(shape), self.dtype)
        lo, hi = (0.5, 2.0) if positive else (low, high)
        values = self.rng.uniform(lo, hi, tuple(shape))
        if positive is False and kind == "const" and low < 0 and self.draw(st.integers(0, 7)) == 0:
            values = np.round(values)  # integral constants: exact zeros and ones, as in real models
        return self.b.constant(values.astype(self.dtype), name=f"c{self.leaves}")

    def operand_like(self, base: tuple[int, ...]) -> str:
        """A value broadcasting with ``base``: an existing one if any fits, else a leaf."""
        shape = related_shape(self.draw, base)
        existing = [v for v in self.values if self.shape(v) == shape]
        if existing and self.draw(st.booleans()):
            return existing[self.draw(st.integers(0, len(existing) - 1))]
        return self.leaf(shape)

    def op(self, op: str, *inputs, **attrs) -> str:
        return self.b.op(op, *inputs, **attrs)

    def add(self, value: str) -> None:
        self.values.append(value)

    def axes(self, rank: int, *, min_size: int = 1) -> list[int]:
        axes = self.draw(st.lists(st.integers(0, rank - 1), min_size=min_size, max_size=rank, unique=True))
        return [a - rank if self.draw(st.booleans()) else a for a in axes]

    # ----- families -----------------------------------------------------------------------
    def unary(self) -> None:
        x = self.pick()
        op = self.draw(st.sampled_from(_UNARY))
        if op == "exp_tanh":
            out = self.op("exp", self.op("tanh", x))
        elif op == "log1p_abs":
            out = self.op("log", self.op("add", self.op("abs", x), self.b.constant(np.ones((), self.dtype))))
        elif op == "sqrt_abs":
            out = self.op("sqrt", self.op("abs", x))
        elif op == "rsqrt_1p":
            out = self.op("rsqrt", self.op("add", self.op("mul", x, x), self.b.constant(np.ones((), self.dtype))))
        elif op == "clip":
            out = self.op("clip", x, min=self.draw(st.sampled_from([-1.0, 0.0, -np.inf])),
                          max=self.draw(st.sampled_from([1.0, 6.0, np.inf])))
        elif op == "gelu":
            out = self.op("gelu", x, approximate=self.draw(st.sampled_from(["none", "tanh"])))
        else:
            out = self.op(op, x)
        self.add(out)

    def binary(self) -> None:
        x = cast(str, self.pick())  # (any rank: some value fits)
        y = self.operand_like(self.shape(x))
        a, b = (x, y) if self.draw(st.booleans()) else (y, x)
        self.add(self.op(self.draw(st.sampled_from(_BINARY)), a, b))

    def divide(self) -> None:
        x = cast(str, self.pick())  # (any rank: some value fits)
        shape = related_shape(self.draw, self.shape(x))
        kind = self.draw(st.sampled_from(["input", "const"]))
        # a divisor is a leaf (feeds_for keeps inputs read by div away from zero)
        self.add(self.op("div", x, self.leaf(shape, kind=kind, positive=True)))

    def select(self) -> None:
        x = cast(str, self.pick())  # (any rank: some value fits)
        y = self.operand_like(self.shape(x))
        cond = self.op(self.draw(st.sampled_from(["greater", "less", "greater_equal"])), x, y)
        other = self.operand_like(self.g.types[cond].shape)
        self.add(self.op("where", cond, x, other) if self.draw(st.booleans()) else self.op("where", cond, other, y))

    def reduce(self) -> None:
        x = self.pick(min_rank=1)
        if x is None:
            return
        op = self.draw(st.sampled_from(["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_sum"]))
        axes = self.axes(len(self.shape(x)))
        self.add(self.op(op, x, axes=axes, keepdims=self.draw(st.sampled_from([1, 0]))))

    def softmax(self, log: bool = False) -> None:
        x = self.pick(min_rank=1)
        if x is None:
            return
        axes = [self.draw(st.integers(-len(self.shape(x)), len(self.shape(x)) - 1))]
        m = self.op("reduce_max", x, axes=axes, keepdims=1)
        d = self.op("sub", x, m)
        e = self.op("exp", d)
        s = self.op("reduce_sum", e, axes=axes, keepdims=1)
        self.add(self.op("sub", d, self.op("log", s)) if log else self.op("div", e, s))

    def log_softmax(self) -> None:
        self.softmax(log=True)

    def norm(self) -> None:
        x = self.pick(min_rank=1)
        if x is None:
            return
        axes = self.axes(len(self.shape(x)))
        m = self.op("reduce_mean", x, axes=axes, keepdims=1)
        d = self.op("sub", x, m)
        v = self.op("reduce_mean", self.op("mul", d, d), axes=axes, keepdims=1)
        eps = self.b.constant(np.full((), 1e-3, self.dtype))
        self.add(self.op("mul", d, self.op("rsqrt", self.op("add", v, eps))))

    def transpose(self) -> None:
        x = self.pick(min_rank=1)
        if x is None:
            return
        perm = self.draw(st.permutations(range(len(self.shape(x)))))
        self.add(self.op("transpose", x, perm=list(perm)) if self.draw(st.integers(0, 3)) else self.op("transpose", x))

    def reshape(self) -> None:
        x = cast(str, self.pick())  # (any rank: some value fits)
        shape = self.shape(x)
        how = self.draw(st.sampled_from(["reshape", "reshape", "flatten", "squeeze", "unsqueeze"]))
        if how == "flatten":
            self.add(self.op("flatten", x, axis=self.draw(st.integers(0, len(shape)))))
        elif how == "squeeze" and 1 in shape:
            ones = [k for k, d in enumerate(shape) if d == 1]
            self.add(self.op("squeeze", x, axes=self.draw(st.lists(st.sampled_from(ones), min_size=1, unique=True))))
        elif how == "unsqueeze" and len(shape) < 4:
            self.add(self.op("unsqueeze", x, axes=[self.draw(st.integers(0, len(shape)))]))
        else:
            size, target = prod(shape), []
            remaining = size
            for _ in range(self.draw(st.integers(0, 2))):
                factor = self.draw(st.sampled_from([f for f in range(1, remaining + 1) if remaining % f == 0]))
                target.append(factor)
                remaining //= factor
            target.append(remaining)
            if self.draw(st.integers(0, 2)) == 0:
                target[self.draw(st.integers(0, len(target) - 1))] = -1
            self.add(self.op("reshape", x, shape=target))

    def movement(self) -> None:
        x = self.pick(min_rank=1)
        if x is None:
            return
        shape = self.shape(x)
        rank = len(shape)
        how = self.draw(st.sampled_from(["concat", "slice", "pad", "expand", "tile", "gather"]))
        if how == "concat":
            axis = self.draw(st.integers(0, rank - 1))
            other = list(shape)
            other[axis] = self.draw(st.integers(1, 3))
            existing = [v for v in self.values if self.shape(v) == tuple(other)]
            y = existing[0] if existing and self.draw(st.booleans()) else self.leaf(other)
            pair = [x, y] if self.draw(st.booleans()) else [y, x]
            self.add(self.op("concat", *pair, axis=axis - rank if self.draw(st.booleans()) else axis))
        elif how == "slice":
            axis = self.draw(st.integers(0, rank - 1))
            n = shape[axis]
            start = self.draw(st.integers(0, n - 1))
            step = self.draw(st.sampled_from([1, 1, 2, -1]))
            end = self.draw(st.integers(start + 1, n)) if step > 0 else -n - 1
            self.add(self.op("slice", x, starts=[start], ends=[end], axes=[axis], steps=[step]))
        elif how == "pad":
            pads = [self.draw(st.integers(0, 1)) for _ in range(2 * rank)]
            self.add(self.op("pad", x, pads=pads, value=self.draw(st.sampled_from([0.0, 1.0]))))
        elif how == "expand":
            target = tuple(self.draw(st.integers(2, 3)) if d == 1 and self.draw(st.booleans()) else d for d in shape)
            if rank < 4 and self.draw(st.booleans()):
                target = (self.draw(st.integers(1, 3)),) + target
            self.add(self.op("expand", x, shape=list(target)))
        elif how == "tile":
            self.add(self.op("tile", x, repeats=[self.draw(st.integers(1, 2)) for _ in shape]))
        else:
            axis = self.draw(st.integers(0, rank - 1))
            count = self.draw(st.integers(1, 3))
            indices = self.rng.integers(-shape[axis], shape[axis], (count,)).astype(np.int64)
            self.add(self.op("gather", x, self.b.constant(indices), axis=axis))

    def conv(self) -> None:
        x = self.pick(min_rank=3, max_rank=4)
        if x is None or self.draw(st.integers(0, 3)) == 0:
            dims = self.draw(st.integers(1, 2))
            x = self.leaf((self.draw(st.integers(1, 2)), self.draw(st.integers(1, 4)))
                          + tuple(self.draw(st.integers(3, 5)) for _ in range(dims)), kind="input")
        shape = self.shape(x)
        spatial = shape[2:]
        cin = shape[1]
        group = self.draw(st.sampled_from([g for g in range(1, cin + 1) if cin % g == 0]))
        cout = group * self.draw(st.integers(1, 2))
        kernel = [self.draw(st.integers(1, min(3, s))) for s in spatial]
        # a dilated window must still fit the (padded) input
        dilations = [self.draw(st.integers(1, 2)) if (k - 1) * 2 + 1 <= s else 1 for k, s in zip(kernel, spatial)]
        pads = [self.draw(st.integers(0, k // 2)) for k in kernel] * 2
        strides = [self.draw(st.integers(1, 2)) for _ in spatial]
        w = self.leaf((cout, cin // group) + tuple(kernel), kind="const", low=-0.5, high=0.5)
        inputs = [x, w] + ([self.leaf((cout,), kind="const")] if self.draw(st.booleans()) else [])
        self.add(self.op("conv", *inputs, pads=pads, strides=strides, dilations=dilations, group=group))

    def pool(self) -> None:
        x = self.pick(min_rank=3, max_rank=4)
        if x is None:
            x = self.leaf((1, self.draw(st.integers(1, 3)), self.draw(st.integers(2, 5)), self.draw(st.integers(2, 5))),
                          kind="input")
        spatial = self.shape(x)[2:]
        how = self.draw(st.sampled_from(["max_pool", "average_pool", "global_average_pool", "global_max_pool"]))
        if how.startswith("global"):
            self.add(self.op(how, x))
            return
        kernel = [self.draw(st.integers(1, min(3, s))) for s in spatial]
        attrs = dict(kernel_shape=kernel, strides=[self.draw(st.integers(1, 2)) for _ in spatial],
                     pads=[self.draw(st.integers(0, k - 1)) for k in kernel] * 2,
                     ceil_mode=self.draw(st.sampled_from([0, 0, 1])))
        if how == "average_pool":
            attrs["count_include_pad"] = self.draw(st.sampled_from([0, 1]))
        elif self.draw(st.integers(0, 3)) == 0:
            attrs["dilations"] = [2 if (k - 1) * 2 + 1 <= s else 1 for k, s in zip(kernel, spatial)]
        self.add(self.op(how, x, **attrs))

    def matmul(self) -> None:
        x = self.pick(min_rank=2, max_rank=3)
        if x is None:
            x = self.leaf((self.draw(st.integers(1, 4)), self.draw(st.integers(1, 4))), kind="input")
        shape = self.shape(x)
        k, n = shape[-1], self.draw(st.integers(1, 4))
        if len(shape) == 2 and self.draw(st.integers(0, 2)) == 0:
            bias = self.leaf(self.draw(st.sampled_from([(n,), (shape[0], n), (1, n)])), kind="const")
            w = self.leaf((k, n), kind="const", low=-0.5, high=0.5)
            self.add(self.op("gemm", x, w, bias, alpha=self.draw(st.sampled_from([1.0, 0.5])),
                             beta=self.draw(st.sampled_from([1.0, 2.0]))))
            return
        batched = len(shape) == 3 and self.draw(st.booleans())
        w_shape = ((shape[0], k, n) if batched else (k, n))
        w = self.leaf(w_shape, low=-0.5, high=0.5)
        a, b = (x, w)
        self.add(self.op("matmul", a, b))

    def compound(self) -> None:
        x = self.pick(min_rank=1)
        if x is None:
            return
        shape = self.shape(x)
        rank = len(shape)
        how = self.draw(st.sampled_from(["softmax", "log_softmax", "layer_norm", "batch_norm", "gelu"]))
        if how in ("softmax", "log_softmax"):
            self.add(self.op(how, x, axis=self.draw(st.integers(-rank, rank - 1))))
        elif how == "layer_norm":
            axis = self.draw(st.integers(-rank, rank - 1))
            scale = self.leaf(shape[axis % rank:], kind="const", positive=True)
            self.add(self.op("layer_norm", x, scale, self.leaf(shape[axis % rank:], kind="const"), axis=axis,
                             epsilon=1e-3))
        elif how == "batch_norm" and rank >= 2:
            c = (shape[1],)
            self.add(self.op("batch_norm", x, self.leaf(c, kind="const"), self.leaf(c, kind="const"),
                             self.leaf(c, kind="const"), self.leaf(c, kind="const", positive=True), epsilon=1e-3))
        else:
            self.add(self.op("gelu", x, approximate=self.draw(st.sampled_from(["none", "tanh"]))))

    # ----- finishing --------------------------------------------------------------------
    def finish(self) -> Graph:
        used = {v for n in self.g.nodes for v in n.present_inputs()}
        computed = [out for n in self.g.nodes for out in n.outputs]
        sinks = [v for v in computed if v not in used]
        extra = [v for v in computed if v in used]
        chosen = self.draw(st.lists(st.sampled_from(extra), max_size=2, unique=True)) if extra else []
        outputs = [v for v in computed if v in set(sinks) | set(chosen)]
        self.g.outputs.extend(outputs)
        self.g.remove_unused()
        self.g.inputs = [v for v in self.g.inputs if any(v in n.inputs for n in self.g.nodes)]
        for name in [t for t in self.g.types if t not in self.g.constants and t not in self.g.inputs
                     and not any(t in n.outputs for n in self.g.nodes)]:
            del self.g.types[name]
        return self.b.build()


@st.composite
def graphs(draw, *, min_nodes: int = 1, max_nodes: int = 8, families=FAMILIES, max_rank: int = 4,
           max_side: int = 4, dtype: str = "float32", name: str = "random") -> Graph:
    """A random graph of ``min_nodes`` to ``max_nodes`` growth steps (an idiom such as
    softmax adds several nodes in one step) drawn from ``families`` (see the module
    docstring; pass ``COMPOUND_FAMILIES`` for compound ops too). Inputs are float32
    (``dtype``) with sides up to ``max_side`` and ranks up to ``max_rank``."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    grower = _Grower(draw, name, rng, dtype)
    rank = draw(st.integers(1, max_rank))
    base = tuple(draw(st.integers(1, max_side)) for _ in range(rank))
    grower.add(grower.leaf(base, kind="input"))
    if draw(st.booleans()):
        grower.add(grower.leaf(related_shape(draw, base), kind="input"))
    steps = draw(st.integers(min_nodes, max_nodes))
    for _ in range(steps):
        family = draw(st.sampled_from(list(families)))
        try:
            getattr(grower, family)()
        except FuseError:
            # a combination the op rejects (e.g. a window larger than a padded input); the
            # families are built to avoid these, and skipping one keeps the graph valid
            continue
    if not grower.g.nodes:
        grower.add(grower.op("relu", grower.values[0]))
    return grower.finish()


def sample_graphs(n: int, *, seed: int = 0, **kwargs) -> list[Graph]:
    """``n`` graphs drawn from ``graphs(**kwargs)``, the same ones for the same seed:
    for checking many graphs in batches (:func:`check_equivalence_many`) or for
    benchmarks, outside a hypothesis test."""
    out: list[Graph] = []
    strategy = graphs(**kwargs)
    round_ = 0
    while len(out) < n:
        @hypothesis_seed(seed * 1_000_003 + round_)
        @settings(max_examples=n - len(out), database=None, deadline=None, phases=(Phase.generate,),
                  suppress_health_check=list(HealthCheck))
        @given(strategy)
        def collect(graph):
            out.append(graph)

        collect()
        round_ += 1
    return out[:n]


__all__ = ["COMPOUND_FAMILIES", "FAMILIES", "graphs", "sample_graphs"]
