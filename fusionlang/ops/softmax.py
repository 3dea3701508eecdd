"""Softmax and log-softmax along one axis (opset-13 semantics); compound ops."""

from __future__ import annotations

import numpy as np

from fusionlang.ir.types import TensorType
from fusionlang.ops.common import accumulator, require_float
from fusionlang.ops.registry import Attr, OpCall, OpDef, register


def _infer(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    if x.rank < 1:
        raise call.fail("input must have rank >= 1")
    require_float(call, x)
    call.axis(call.attrs["axis"], x.rank)
    return [x]


def _shifted(x: np.ndarray, axis: int) -> np.ndarray:
    # subtracting the max keeps exp from overflowing and does not change the result; the
    # rest is computed in double so the sum does not depend on its order
    wide = x.astype(accumulator(x.dtype))
    return wide - wide.max(axis=axis, keepdims=True, initial=-np.inf)


def _softmax(xs, attrs):
    x = xs[0]
    e = np.exp(_shifted(x, attrs["axis"]))
    return [(e / e.sum(axis=attrs["axis"], keepdims=True)).astype(x.dtype, copy=False)]


def _log_softmax(xs, attrs):
    x = xs[0]
    d = _shifted(x, attrs["axis"])
    return [(d - np.log(np.exp(d).sum(axis=attrs["axis"], keepdims=True))).astype(x.dtype, copy=False)]


for _name, _fn, _what in (("softmax", _softmax, "exp(x) / sum(exp(x))"),
                          ("log_softmax", _log_softmax, "x - log(sum(exp(x)))")):
    register(
        OpDef(
            name=_name,
            inputs=("x",),
            attrs={"axis": Attr("int", -1, "the one axis normalized over")},
            infer=_infer,
            reference=_fn,
            compound=True,
            doc=f"{_what} along `axis`, computed stably (max subtracted first).",
        )
    )
