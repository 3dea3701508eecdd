"""Well-typed operands and attributes for one op, drawn by hypothesis.

The rule checker builds a graph for a rewrite's pattern bottom-up: when it reaches an
op, some operand types are already known (computed by sub-patterns, or bound to a
variable earlier) and the others are fresh leaves. :func:`propose` draws types for the
fresh operands and values for the attributes the pattern leaves open, so that the op
type-checks (a conv's weight matches the input's channels, a reshape's target has the
input's size, a reduction's axes exist). Attributes the pattern pins are honoured;
everything else is drawn, defaults included, because a rule must hold for every value a
pattern accepts (a pattern that ignores an attribute accepts every value of it).

Shapes stay tiny (sides up to 4, ranks up to 4) so instances run in microseconds and
counterexamples shrink to something readable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from hypothesis import strategies as st

from fusionlang.ir.types import TensorType
from fusionlang.ops.registry import OpRegistry
from fusionlang.testing.values import POSITIVE, Domain

Draw = Callable[[st.SearchStrategy], Any]


class NoProposal(Exception):
    """The op cannot take operands of the known types with these attributes."""


@dataclass
class Proposal:
    #: one type per operand (the known ones unchanged)
    types: list[TensorType]
    #: attribute values (the pinned ones are applied on top by the caller)
    attrs: dict[str, Any] = field(default_factory=dict)
    #: operand position -> domain its values need beyond what the op implies
    domains: dict[int, Domain] = field(default_factory=dict)


FLOATS = ("float32", "float32", "float32", "float64")

UNARY_INT_OK = {"neg", "abs", "sign", "relu", "identity", "dropout"}
ARITH_INT_OK = {"add", "sub", "mul", "div", "max", "min", "sum"}
LOGICAL = {"and", "or", "xor", "not"}
COMPARISONS = {"equal", "less", "less_equal", "greater", "greater_equal"}
REDUCTIONS = {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"}

#: per-op strategies for attributes of elementwise ops
_ELEMENTWISE_ATTRS: dict[str, dict[str, st.SearchStrategy]] = {
    "leaky_relu": {"alpha": st.sampled_from([0.01, 0.2, 1.5])},
    "elu": {"alpha": st.sampled_from([1.0, 0.5, 2.0])},
    "selu": {"alpha": st.sampled_from([1.6732631921768188, 1.0]), "gamma": st.sampled_from([1.0507010221481323, 2.0])},
    "hard_sigmoid": {"alpha": st.sampled_from([0.2, 0.5]), "beta": st.sampled_from([0.5, 0.0])},
    "gelu": {"approximate": st.sampled_from(["none", "tanh"])},
    "dropout": {"ratio": st.sampled_from([0.5, 0.0, 0.9])},
    "clip": {"min": st.sampled_from([-math.inf, -1.0, 0.0]), "max": st.sampled_from([math.inf, 1.0, 6.0])},
}


def shape(draw: Draw, min_rank: int = 1, max_rank: int = 3, min_side: int = 1, max_side: int = 4) -> tuple:
    rank = draw(st.integers(min_rank, max_rank))
    return tuple(draw(st.integers(min_side, max_side)) for _ in range(rank))


def related_shape(draw: Draw, base: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts with ``base``: the same (most often), one that broadcasts
    into it (fewer axes, some of size 1), or one it broadcasts into (more axes, or an
    axis of size 1 grown)."""
    how = draw(st.sampled_from(["same", "same", "into", "from"]))
    if how == "same":
        return base
    if how == "into":
        keep = draw(st.integers(0, len(base)))
        tail = base[len(base) - keep:]
        return tuple(1 if draw(st.booleans()) else d for d in tail)
    grown = tuple(draw(st.integers(2, 3)) if d == 1 and draw(st.booleans()) else d for d in base)
    if grown == base and 1 in base:
        # grow one unit axis rather than none: a rule that holds only while its fresh
        # operand broadcasts into the known one (a bias into a matmul) must meet the
        # operand that widens the result too
        unit = base.index(1)
        grown = base[:unit] + (draw(st.integers(2, 3)),) + base[unit + 1:]
    room = max(0, 4 - len(base))
    extra = draw(st.integers(0, min(room, 2))) if room else 0
    return tuple(draw(st.integers(1, 3)) for _ in range(extra)) + grown


def _attr_value(draw: Draw, kind: str, default):
    """A value for a generic attribute (of a rule-file `def` op) of the given kind."""
    if kind == "float":
        return draw(st.sampled_from([default, 0.5, 2.0] if isinstance(default, float) else [0.5, 2.0]))
    if kind == "int":
        return draw(st.sampled_from([default, 0, 1, 2] if isinstance(default, int) else [0, 1, 2]))
    return default


def _first_known(known: Sequence[TensorType | None]) -> TensorType | None:
    return next((t for t in known if t is not None), None)


def _fill(known, n, make) -> list[TensorType]:
    return [t if t is not None else make(k) for k, t in enumerate(list(known) + [None] * (n - len(known)))][:n]


# ----- elementwise ------------------------------------------------------------------------


def _elementwise(draw: Draw, op: str, n: int, known, fixed: dict, registry: OpRegistry) -> Proposal:
    base = _first_known(known)
    if op in LOGICAL:
        dtype = "bool"
    elif base is not None and op != "where":
        dtype = base.dtype
    elif op in ARITH_INT_OK or op in UNARY_INT_OK:
        dtype = draw(st.sampled_from(FLOATS + ("int32", "int64")))
    else:
        dtype = draw(st.sampled_from(FLOATS))
    if op == "where":
        values = [t for t in known[1:] if t is not None]
        dtype = values[0].dtype if values else draw(st.sampled_from(FLOATS))
    base_shape = base.shape if base is not None else shape(draw, 0, 3)
    if op == "prelu":
        x = known[0] or TensorType(base_shape, dtype)
        tail = x.shape[len(x.shape) - draw(st.integers(0, len(x.shape))):]
        slope = known[1] if len(known) > 1 and known[1] is not None else \
            TensorType(tuple(d if draw(st.booleans()) else 1 for d in tail), x.dtype)
        return Proposal([x, slope])

    def make(k):
        kind = "bool" if op == "where" and k == 0 else dtype
        return TensorType(related_shape(draw, base_shape), kind)

    types = _fill(known, n, make)
    attrs = {}
    strategies = _ELEMENTWISE_ATTRS.get(op)
    if strategies is not None:
        attrs = {name: draw(s) for name, s in strategies.items()}
    else:
        opdef = registry.lookup(op)
        for name, spec in (opdef.attrs.items() if opdef else ()):
            if not spec.required:
                attrs[name] = _attr_value(draw, spec.kind, spec.default)
    if op == "pow" and types[0].dtype.startswith("int"):
        attrs = {}
    return Proposal(types, attrs)


def _cast(draw, op, n, known, fixed, registry):
    x = known[0] or TensorType(shape(draw, 0, 3), draw(st.sampled_from(FLOATS + ("int32", "int64"))))
    to = draw(st.sampled_from([x.dtype, "float32", "float64", "int32", "int64"]))
    return Proposal([x], {"to": to})


# ----- reductions and normalizations ------------------------------------------------------


def _axes(draw: Draw, rank: int, *, allow_empty: bool = True) -> tuple[int, ...]:
    if rank == 0:
        return ()
    axes = draw(st.lists(st.integers(0, rank - 1), unique=True, min_size=0 if allow_empty else 1, max_size=rank))
    return tuple(a - rank if draw(st.booleans()) else a for a in axes)


def _rank_for(fixed: dict, name: str, default_min: int) -> int:
    """Smallest rank an attribute pinned by the pattern needs (axes, axis, perm)."""
    value = fixed.get(name)
    if isinstance(value, (list, tuple)) and value:
        return max(max(a if a >= 0 else -a - 1 for a in value) + 1, default_min)
    if isinstance(value, int):
        return max(value + 1 if value >= 0 else -value, default_min)
    return default_min


def _reduce(draw, op, n, known, fixed, registry):
    low = _rank_for(fixed, "axes", 1)
    x = known[0] or TensorType(shape(draw, low, max(low, 4)), draw(st.sampled_from(FLOATS)))
    attrs = {"axes": _axes(draw, x.rank), "keepdims": draw(st.sampled_from([1, 0])),
             "noop_with_empty_axes": draw(st.sampled_from([0, 0, 1]))}
    return Proposal([x], attrs)


def _softmax(draw, op, n, known, fixed, registry):
    low = _rank_for(fixed, "axis", 1)
    x = known[0] or TensorType(shape(draw, low, max(low, 3)), draw(st.sampled_from(FLOATS)))
    return Proposal([x], {"axis": draw(st.integers(-x.rank, x.rank - 1))})


def _channels_first(draw, known, min_rank=2, max_rank=4) -> TensorType:
    if known[0] is not None:
        return known[0]
    return TensorType(shape(draw, min_rank, max_rank), draw(st.sampled_from(FLOATS)))


def _batch_norm(draw, op, n, known, fixed, registry):
    x = _channels_first(draw, known)
    if x.rank < 2:
        raise NoProposal("batch_norm needs rank >= 2")
    c = TensorType((x.shape[1],), x.dtype)
    types = _fill([x] + known[1:], n, lambda k: c)
    attrs = {"epsilon": draw(st.sampled_from([1e-5, 1e-3, 0.1]))}
    return Proposal(types, attrs, {4: POSITIVE} if op == "batch_norm" else {})


def _instance_norm(draw, op, n, known, fixed, registry):
    x = _channels_first(draw, known, 3, 4)
    if x.rank < 3:
        raise NoProposal("instance_norm needs rank >= 3")
    c = TensorType((x.shape[1],), x.dtype)
    return Proposal(_fill([x] + known[1:], n, lambda k: c), {"epsilon": draw(st.sampled_from([1e-5, 1e-3, 0.1]))})


def _layer_norm(draw, op, n, known, fixed, registry):
    low = _rank_for(fixed, "axis", 1)
    x = known[0] or TensorType(shape(draw, low, max(low, 3)), draw(st.sampled_from(FLOATS)))
    axis = fixed.get("axis", draw(st.integers(-x.rank, x.rank - 1)))
    if not isinstance(axis, int) or not -x.rank <= axis < x.rank:
        raise NoProposal("axis out of range")
    tail = x.shape[axis % x.rank:]
    param = TensorType(tail, x.dtype)
    return Proposal(_fill([x] + known[1:], n, lambda k: param), {"axis": axis, "epsilon": draw(st.sampled_from([1e-5, 1e-3]))})


def _group_norm(draw, op, n, known, fixed, registry):
    x = _channels_first(draw, known)
    if x.rank < 2:
        raise NoProposal("group_norm needs rank >= 2")
    # a divisor of the channel count, so the groups are whole
    groups = fixed.get("num_groups", draw(st.sampled_from([g for g in range(1, x.shape[1] + 1) if x.shape[1] % g == 0])))
    c = TensorType((x.shape[1],), x.dtype)
    return Proposal(_fill([x] + known[1:], n, lambda k: c),
                    {"num_groups": groups, "epsilon": draw(st.sampled_from([1e-5, 1e-3, 0.1]))})


def _mean_variance_norm(draw, op, n, known, fixed, registry):
    x = known[0] or TensorType(shape(draw, 1, 4), draw(st.sampled_from(FLOATS)))
    axes = draw(st.lists(st.integers(0, x.rank - 1), min_size=1, max_size=x.rank, unique=True))
    return Proposal([x], {"axes": tuple(a - x.rank if draw(st.booleans()) else a for a in axes)})


def _lp_norm(draw, op, n, known, fixed, registry):
    x = known[0] or TensorType(shape(draw, 1, 3), draw(st.sampled_from(FLOATS)))
    return Proposal([x], {"axis": draw(st.integers(-x.rank, x.rank - 1)), "p": draw(st.sampled_from([1, 2]))})


def _lrn(draw, op, n, known, fixed, registry):
    x = _channels_first(draw, known, 3, 4)
    attrs = {"size": draw(st.integers(1, 5)), "alpha": draw(st.sampled_from([1e-4, 0.5])),
             "beta": draw(st.sampled_from([0.75, 0.5])), "bias": draw(st.sampled_from([1.0, 2.0]))}
    return Proposal([x], attrs)


# ----- data movement ----------------------------------------------------------------------


def _transpose(draw, op, n, known, fixed, registry):
    perm = fixed.get("perm")
    if known[0] is not None:
        x = known[0]
    else:
        rank = len(perm) if perm else draw(st.integers(0, 4))
        x = TensorType(shape(draw, rank, rank), draw(st.sampled_from(FLOATS)))
    attrs = {"perm": tuple(draw(st.permutations(range(x.rank)))) if draw(st.integers(0, 3)) else ()}
    return Proposal([x], attrs)


def _factor_shape(draw: Draw, size: int) -> tuple[int, ...]:
    remaining, target = size, []
    for _ in range(draw(st.integers(0, 3))):
        factor = draw(st.sampled_from([f for f in range(1, remaining + 1) if remaining % f == 0] or [1]))
        target.append(factor)
        remaining //= max(factor, 1)
    target.append(remaining)
    return tuple(target)


def _reshape(draw, op, n, known, fixed, registry):
    target = fixed.get("shape")
    if known[0] is not None:
        x = known[0]
    elif isinstance(target, tuple) and target and all(isinstance(d, int) and d > 0 for d in target):
        x = TensorType(_factor_shape(draw, math.prod(target)), draw(st.sampled_from(FLOATS)))
    else:
        x = TensorType(shape(draw, 0, 4), draw(st.sampled_from(FLOATS)))
    new = list(_factor_shape(draw, x.size))
    if new and draw(st.integers(0, 3)) == 0:
        new[draw(st.integers(0, len(new) - 1))] = -1
    return Proposal([x], {"shape": tuple(new), "allowzero": 0})


def _flatten(draw, op, n, known, fixed, registry):
    x = known[0] or TensorType(shape(draw, 0, 4), draw(st.sampled_from(FLOATS)))
    return Proposal([x], {"axis": draw(st.integers(-x.rank, x.rank))})


def _squeeze(draw, op, n, known, fixed, registry):
    x = known[0] or TensorType(shape(draw, 1, 4, 1, 2), draw(st.sampled_from(FLOATS)))
    ones = [k for k, d in enumerate(x.shape) if d == 1]
    axes = tuple(draw(st.lists(st.sampled_from(ones), unique=True))) if ones else ()
    return Proposal([x], {"axes": tuple(a - x.rank if draw(st.booleans()) else a for a in axes)})


def _unsqueeze(draw, op, n, known, fixed, registry):
    x = known[0] or TensorType(shape(draw, 0, 3), draw(st.sampled_from(FLOATS)))
    count = draw(st.integers(1, 2))
    out_rank = x.rank + count
    axes = draw(st.lists(st.integers(0, out_rank - 1), min_size=count, max_size=count, unique=True))
    return Proposal([x], {"axes": tuple(a - out_rank if draw(st.booleans()) else a for a in axes)})


def _expand(draw, op, n, known, fixed, registry):
    x = known[0] or TensorType(shape(draw, 0, 3), draw(st.sampled_from(FLOATS)))
    grown = tuple(draw(st.integers(1, 3)) if d == 1 else d for d in x.shape)
    lead = tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 1))))
    return Proposal([x], {"shape": lead + grown})


def _tile(draw, op, n, known, fixed, registry):
    x = known[0] or TensorType(shape(draw, 1, 3), draw(st.sampled_from(FLOATS)))
    return Proposal([x], {"repeats": tuple(draw(st.integers(1, 3)) for _ in x.shape)})


def _concat(draw, op, n, known, fixed, registry):
    base = _first_known(known) or TensorType(shape(draw, 1, 3), draw(st.sampled_from(FLOATS)))
    if base.rank == 0:
        raise NoProposal("concat of scalars")
    axis = fixed.get("axis", draw(st.integers(-base.rank, base.rank - 1)))
    if not isinstance(axis, int) or not -base.rank <= axis < base.rank:
        raise NoProposal("axis out of range")

    def make(k):
        dims = list(base.shape)
        dims[axis] = draw(st.integers(1, 3))
        return TensorType(tuple(dims), base.dtype)

    return Proposal(_fill(known, n, make), {"axis": axis})


def _slice(draw, op, n, known, fixed, registry):
    x = known[0] or TensorType(shape(draw, 1, 3, 1, 5), draw(st.sampled_from(FLOATS)))
    if x.rank == 0:
        raise NoProposal("slice of a scalar")
    # as many axes as a pinned starts, ends, axes or steps has (a pattern's
    # `{starts=s, axes=[-1]}`): lists of different lengths are no slice
    lengths = {len(fixed[k]) for k in ("starts", "ends", "axes", "steps") if isinstance(fixed.get(k), (list, tuple))}
    count = min(lengths) if lengths else None
    if count is not None and not 1 <= count <= x.rank:
        raise NoProposal(f"a slice of {count} axes of a rank-{x.rank} tensor")
    axes = draw(st.lists(st.integers(0, x.rank - 1), unique=True, min_size=count or 1, max_size=count or x.rank))
    if isinstance(fixed.get("axes"), (list, tuple)):
        axes = [a % x.rank for a in fixed["axes"]]
    # starts and ends mostly inside the axis (a slice that selects something), sometimes
    # past it or counted from the end
    starts = tuple(draw(st.integers(0, max(0, x.shape[a] - 1)) | st.integers(-4, 4)) for a in axes)
    ends = tuple(draw(st.integers(1, max(1, x.shape[a])) | st.sampled_from([-1, 1, 2, 3, 5, 2**63 - 1]))
                 for a in axes)
    steps = tuple(draw(st.sampled_from([1, 1, 2, -1])) for _ in axes)
    return Proposal([x], {"starts": starts, "ends": ends, "axes": tuple(axes), "steps": steps})


def _pad(draw, op, n, known, fixed, registry):
    x = known[0] or TensorType(shape(draw, 1, 3, 2, 4), draw(st.sampled_from(FLOATS)))
    mode = draw(st.sampled_from(["constant", "edge", "reflect"]))
    limit = 1 if mode == "reflect" else 2
    pads = tuple(draw(st.integers(0, limit)) for _ in range(2 * x.rank))
    return Proposal([x], {"pads": pads, "mode": mode, "value": draw(st.sampled_from([0.0, 1.5]))})


def _gather(draw, op, n, known, fixed, registry):
    data = known[0] or TensorType(shape(draw, 1, 3), draw(st.sampled_from(FLOATS)))
    if data.rank == 0:
        raise NoProposal("gather from a scalar")
    axis = draw(st.integers(-data.rank, data.rank - 1))
    indices = known[1] if len(known) > 1 and known[1] is not None else TensorType(shape(draw, 0, 2), "int64")
    return Proposal([data, indices], {"axis": axis}, {1: Domain("index", data.shape[axis])})


def _nll_loss(draw, op, n, known, fixed, registry):
    x = known[0] or _channels_first(draw, known, 2, 4)
    if x.rank < 2:
        raise NoProposal("nll_loss needs an (N, C, d...) input")
    target = TensorType((x.shape[0],) + x.shape[2:], draw(st.sampled_from(("int64", "int32"))))
    types = [x, target] + [TensorType((x.shape[1],), x.dtype)] * (n - 2)
    # ignore_index drawn among the classes too, so some targets are ignored
    ignore = draw(st.integers(-1, x.shape[1] - 1))
    return Proposal(types, {"ignore_index": ignore}, {1: Domain("index", x.shape[1])})


def _attention(draw, op, n, known, fixed, registry):
    # q (B, H, Sq, D), k (B, H, Skv, D), v (B, H, Skv, Dv); the bias broadcasts to the scores
    dtype = known[0].dtype if known[0] is not None else draw(st.sampled_from(FLOATS))
    b, h, sq, skv, d, dv = (draw(st.integers(1, 3)) for _ in range(6))
    types = [TensorType((b, h, sq, d), dtype), TensorType((b, h, skv, d), dtype), TensorType((b, h, skv, dv), dtype)]
    if n > 3:
        types.append(TensorType(related_shape(draw, (b, h, sq, skv)) if draw(st.booleans()) else (sq, skv), dtype))
    if any(t is not None and t != want for t, want in zip(known, types)):
        raise NoProposal("attention draws its operands together")
    attrs = {"scale": draw(st.sampled_from([1.0, 0.125, 0.5])), "softcap": draw(st.sampled_from([0.0, 2.0, 30.0]))}
    return Proposal(types, attrs)


def _rotary_embedding(draw, op, n, known, fixed, registry):
    # x (..., 2h); cos and sin broadcast to (..., h)
    x = known[0]
    if x is None or x.rank < 1 or x.shape[-1] % 2:
        lead = shape(draw, 0, 3)
        x = TensorType(lead + (2 * draw(st.integers(1, 3)),), known[0].dtype if known[0] is not None
                       else draw(st.sampled_from(FLOATS)))
    half = x.shape[:-1] + (x.shape[-1] // 2,)
    angles = TensorType(half if draw(st.booleans()) else tuple(1 if k % 2 else s for k, s in enumerate(half[:-1]))
                        + half[-1:], x.dtype)
    return Proposal([x, angles, angles], {"interleaved": fixed.get("interleaved", draw(st.integers(0, 1)))})


# ----- windows and products ---------------------------------------------------------------


def _window(draw: Draw, spatial: tuple[int, ...] | None, rank: int, *, pool: bool):
    """Kernel, strides, dilations and pads for a window over ``spatial`` (drawn too when None)."""
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    strides = tuple(draw(st.integers(1, 2)) for _ in range(rank))
    dilations = tuple(draw(st.integers(1, 2)) for _ in range(rank))
    pads = tuple(draw(st.integers(0, k - 1 if pool else 1)) for k in kernel * 2)
    if spatial is None:
        spatial = tuple(max(1, dl * (k - 1) + 1 - pads[a] - pads[a + rank]) + draw(st.integers(0, 2))
                        for a, (k, dl) in enumerate(zip(kernel, dilations)))
    return spatial, {"kernel_shape": kernel, "strides": strides, "dilations": dilations, "pads": pads}


def _conv(draw, op, n, known, fixed, registry):
    x, w = known[0], known[1] if len(known) > 1 else None
    if x is not None and x.rank < 3:
        raise NoProposal("conv input needs rank >= 3")
    rank = (x.rank - 2) if x is not None else (w.rank - 2 if w is not None else draw(st.integers(1, 2)))
    dtype = (x or w).dtype if (x or w) is not None else draw(st.sampled_from(FLOATS))
    spatial, attrs = _window(draw, x.shape[2:] if x is not None else None, rank, pool=False)
    if w is not None:
        attrs["kernel_shape"] = w.shape[2:]
    if x is not None:
        cin = x.shape[1]
        groups = [g for g in range(1, cin + 1) if cin % g == 0]
    else:
        groups = [1, 2]
    group = draw(st.sampled_from(groups))
    if x is None:
        cin = group * (w.shape[1] if w is not None else draw(st.integers(1, 2)))
        x = TensorType((draw(st.integers(1, 2)), cin) + tuple(spatial), dtype)
    if w is None:
        cout = group * draw(st.integers(1, 2))
        w = TensorType((cout, cin // group) + tuple(attrs["kernel_shape"]), dtype)
    attrs["group"] = group
    if draw(st.booleans()):
        attrs["kernel_shape"] = ()
    types = [x, w] + ([known[2] if len(known) > 2 and known[2] is not None else TensorType((w.shape[0],), dtype)]
                      if n > 2 else [])
    return Proposal(types, attrs)


def _conv_transpose(draw, op, n, known, fixed, registry):
    x = known[0]
    rank = x.rank - 2 if x is not None else draw(st.integers(1, 2))
    dtype = x.dtype if x is not None else draw(st.sampled_from(FLOATS))
    group = 1
    cin = x.shape[1] if x is not None else draw(st.integers(1, 3))
    if x is None:
        x = TensorType((draw(st.integers(1, 2)), cin) + tuple(draw(st.integers(1, 3)) for _ in range(rank)), dtype)
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    w = known[1] if len(known) > 1 and known[1] is not None else TensorType((cin, draw(st.integers(1, 2))) + kernel,
                                                                              dtype)
    attrs = {"strides": tuple(draw(st.integers(1, 2)) for _ in range(rank)), "group": group,
             "pads": tuple(0 for _ in range(2 * rank))}
    types = [x, w] + ([TensorType((w.shape[1] * group,), dtype)] if n > 2 else [])
    return Proposal(types, attrs)


def _pool(draw, op, n, known, fixed, registry):
    x = known[0]
    if x is not None and x.rank < 3:
        raise NoProposal("pooling needs rank >= 3")
    rank = x.rank - 2 if x is not None else draw(st.integers(1, 2))
    spatial, attrs = _window(draw, x.shape[2:] if x is not None else None, rank, pool=True)
    if x is None:
        x = TensorType((draw(st.integers(1, 2)), draw(st.integers(1, 3))) + tuple(spatial),
                       draw(st.sampled_from(FLOATS)))
    attrs["ceil_mode"] = draw(st.sampled_from([0, 1]))
    if op == "average_pool":
        attrs["count_include_pad"] = draw(st.sampled_from([0, 1]))
    return Proposal([x], attrs)


def _global_pool(draw, op, n, known, fixed, registry):
    return Proposal([_channels_first(draw, known, 3, 4)], {})


def _matmul(draw, op, n, known, fixed, registry):
    a, b = known[0], known[1] if len(known) > 1 else None
    dtype = (a or b).dtype if (a or b) is not None else draw(st.sampled_from(FLOATS))
    if a is None and b is None:
        k = draw(st.integers(1, 4))
        batch = tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 1))))
        a = TensorType(batch + (draw(st.integers(1, 4)), k), dtype)
    if a is not None and b is None:
        k = a.shape[-1] if a.rank else 1
        tail = (k,) if a.rank == 1 and draw(st.booleans()) else (k, draw(st.integers(1, 4)))
        b = TensorType((a.shape[:-2] if a.rank > 2 and len(tail) == 2 and draw(st.booleans()) else ()) + tail, dtype)
    if a is None:
        k = b.shape[-2] if b.rank >= 2 else b.shape[0]
        a = TensorType((draw(st.integers(1, 4)), k), dtype)
    return Proposal([a, b], {})


def _gemm(draw, op, n, known, fixed, registry):
    a, b = known[0], known[1] if len(known) > 1 else None
    dtype = (a or b).dtype if (a or b) is not None else draw(st.sampled_from(FLOATS))
    trans_a, trans_b = draw(st.sampled_from([0, 1])), draw(st.sampled_from([0, 1]))
    if a is not None and a.rank != 2 or b is not None and b.rank != 2:
        raise NoProposal("gemm needs matrices")
    if a is None:
        a = TensorType((draw(st.integers(1, 4)), draw(st.integers(1, 4))), dtype)
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    if b is None:
        ncols = draw(st.integers(1, 4))
        b = TensorType((ncols, k) if trans_b else (k, ncols), dtype)
    ncols = b.shape[0] if trans_b else b.shape[1]
    types = [a, b]
    if n > 2:
        types.append(known[2] if len(known) > 2 and known[2] is not None else
                     TensorType(draw(st.sampled_from([(), (ncols,), (m, 1), (1, ncols), (m, ncols)])), dtype))
    attrs = {"trans_a": trans_a, "trans_b": trans_b, "alpha": draw(st.sampled_from([1.0, 0.5, -2.0])),
             "beta": draw(st.sampled_from([1.0, 0.0, 1.5]))}
    return Proposal(types, attrs)


GENERATORS: dict[str, Callable] = {
    "cast": _cast,
    "batch_norm": _batch_norm, "batch_norm_train": _batch_norm, "instance_norm": _instance_norm,
    "layer_norm": _layer_norm, "group_norm": _group_norm, "mean_variance_norm": _mean_variance_norm,
    "lp_norm": _lp_norm, "lrn": _lrn, "softmax": _softmax, "log_softmax": _softmax,
    "transpose": _transpose, "reshape": _reshape, "flatten": _flatten, "squeeze": _squeeze,
    "unsqueeze": _unsqueeze, "expand": _expand, "tile": _tile, "concat": _concat, "slice": _slice, "pad": _pad,
    "gather": _gather, "nll_loss": _nll_loss, "attention": _attention,
    "rotary_embedding": _rotary_embedding, "rms_norm": _layer_norm, "conv": _conv, "conv_transpose": _conv_transpose, "max_pool": _pool, "average_pool": _pool,
    "global_average_pool": _global_pool, "global_max_pool": _global_pool, "matmul": _matmul, "gemm": _gemm,
}
for _name in REDUCTIONS:
    GENERATORS[_name] = _reduce


def propose(draw: Draw, registry: OpRegistry, op: str, n: int, known: Sequence[TensorType | None],
            fixed: dict) -> Proposal:
    """Types for the ``n`` operands of an ``op`` node (``known[k]`` kept where given) and
    attribute values; raises NoProposal when the known types rule the op out."""
    known = list(known) + [None] * (n - len(known))
    generator = GENERATORS.get(op)
    if generator is not None:
        return generator(draw, op, n, known, fixed, registry)
    return _elementwise(draw, op, n, known, fixed, registry)


__all__ = ["GENERATORS", "NoProposal", "Proposal", "propose", "related_shape", "shape"]
