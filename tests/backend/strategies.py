"""A hypothesis strategy for small random graphs of primitive ops (backend tests only).

Values stay bounded (tanh/sigmoid before exp) so float comparisons are meaningful; shapes
are small so each example compiles and runs in a fraction of a second.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from fusionlang.ops import GraphBuilder

UNARY = ["relu", "tanh", "sigmoid", "neg", "abs", "exp_tanh", "sqrt_abs"]
BINARY = ["add", "sub", "mul", "max", "min"]


@st.composite
def graphs(draw, max_ops: int = 7, dtype: str = "float32"):
    """(graph, feeds): a random DAG over 1-2 inputs of ``dtype`` (a float type)."""
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    b = GraphBuilder("random")
    values = [b.input("x", shape, dtype)]
    feeds = {"x": rng.standard_normal(shape).astype(dtype)}
    if draw(st.booleans()):
        values.append(b.input("y", shape, dtype))
        feeds["y"] = rng.standard_normal(shape).astype(dtype)
    n_ops = draw(st.integers(1, max_ops))
    for _ in range(n_ops):
        kind = draw(st.sampled_from(["unary", "unary", "binary", "binary", "bias", "reduce", "transpose",
                                     "reshape", "concat", "softmax"]))
        x = draw(st.sampled_from(values))
        xs = b.graph.types[x].shape
        if kind == "unary":
            op = draw(st.sampled_from(UNARY))
            if op == "exp_tanh":
                out = b.exp(b.tanh(x))
            elif op == "sqrt_abs":
                out = b.sqrt(b.abs(x))
            else:
                out = b.op(op, x)
        elif kind == "binary":
            same = [v for v in values if b.graph.types[v].shape == xs]
            y = draw(st.sampled_from(same))
            out = b.op(draw(st.sampled_from(BINARY)), x, y)
        elif kind == "bias":
            # broadcast a constant along some axes
            bshape = tuple(d if draw(st.booleans()) else 1 for d in xs)
            out = b.op(draw(st.sampled_from(BINARY)), x, b.constant(rng.standard_normal(bshape).astype(dtype)))
        elif kind == "reduce":
            if not xs:
                continue
            axis = draw(st.integers(0, len(xs) - 1))
            op = draw(st.sampled_from(["reduce_sum", "reduce_max", "reduce_mean"]))
            out = b.op(op, x, axes=[axis], keepdims=draw(st.sampled_from([0, 1, 1])))
        elif kind == "transpose":
            perm = draw(st.permutations(range(len(xs))))
            out = b.transpose(x, perm=list(perm))
        elif kind == "reshape":
            size = int(np.prod(xs)) if xs else 1
            factors = [d for d in range(1, size + 1) if size % d == 0]
            first = draw(st.sampled_from(factors))
            out = b.reshape(x, shape=[first, size // first])
        elif kind == "concat":
            if not xs:
                continue
            same = [v for v in values if b.graph.types[v].shape == xs]
            y = draw(st.sampled_from(same))
            out = b.concat(x, y, axis=draw(st.integers(0, len(xs) - 1)))
        else:
            if not xs:
                continue
            axis = draw(st.integers(0, len(xs) - 1))
            m = b.reduce_max(x, axes=[axis])
            e = b.exp(b.sub(x, m))
            out = b.div(e, b.reduce_sum(e, axes=[axis]))
        values.append(out)
    outputs = [values[-1]] + draw(st.lists(st.sampled_from(values[1:]), max_size=2, unique=True))
    for v in dict.fromkeys(outputs):
        if v not in b.graph.inputs:
            b.output(v)
    if not b.graph.outputs:
        b.output(b.relu(values[0]))
    return b.build(), feeds


@st.composite
def chunked_plans(draw, graph):
    """Node lists cut into contiguous chunks (contiguous in topological order = convex)."""
    names = [n.name for n in graph.nodes]
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(names) - 1)), max_size=3)))
    chunks, start = [], 0
    for c in cuts + [len(names)]:
        if c > start:
            chunks.append(names[start:c])
            start = c
    return chunks
