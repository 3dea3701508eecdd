"""Converters for ONNX's recurrent ops RNN, GRU and LSTM, unrolled over the sequence.

The sequence length is static, so each node becomes the steps of its recurrence written
with existing ops: one gemm projects every step's input at once (X W^T + Wb), then each
step adds H R^T + Rb, splits the gates with slices, applies the node's activations and
updates the state elementwise. The unrolled graph fuses and compiles like any other.

Every form of the ops is covered: directions forward, reverse and bidirectional (the
reverse direction walks the steps backwards), ``activations`` with
``activation_alpha``/``activation_beta`` (each activation that takes an alpha or beta
consumes the next value; the ONNX defaults fill in), ``clip`` on the gates' inputs (not
on the cell state LSTM's h reads, as in onnxruntime), ``linear_before_reset`` (GRU),
``input_forget`` (LSTM: the forget gate is 1 - the input gate), peepholes P (LSTM),
``layout`` 1 (batch first), the optional B, initial_h and initial_c, and
``sequence_lens``: a step at or past a batch entry's length keeps its state and writes
zeros to Y (an entry of length 0 ends with zero states, as in onnxruntime). That mask
also makes the reverse direction start at each entry's last valid step, since the steps
past it leave the initial state untouched.

This module imports only the NodeContext; ``onnx_ops`` merges :data:`RNN_CONVERTERS`
into its table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from fusionlang.errors import ShapeError
from fusionlang.frontend.onnx_context import NodeContext

RNN_CONVERTERS: dict[str, Callable[[NodeContext], None]] = {}

#: op -> (gates, default activations per direction, number of state tensors)
_FORMS = {"RNN": (1, ("tanh",), 1), "GRU": (3, ("sigmoid", "tanh"), 1),
          "LSTM": (4, ("sigmoid", "tanh", "tanh"), 2)}

#: activation (lower case) -> (default alpha, default beta); None: takes no such value
_ACTIVATION_PARAMS = {
    "relu": (None, None), "tanh": (None, None), "sigmoid": (None, None),
    "softsign": (None, None), "softplus": (None, None),
    "affine": (1.0, 0.0), "leakyrelu": (0.01, None), "thresholdedrelu": (1.0, None),
    "scaledtanh": (1.0, 1.0), "hardsigmoid": (0.2, 0.5), "elu": (1.0, None),
}


@dataclass(frozen=True)
class _Activation:
    name: str
    alpha: float | None
    beta: float | None


# ----- the node's settings ------------------------------------------------------------
def _activations(ctx: NodeContext, directions: int) -> list[list[_Activation]]:
    """The activations of each direction, alpha and beta taken in order from the lists."""
    per_direction = _FORMS[ctx.op_type][1]
    names = [str(n) for n in ctx.attr("activations", [])] or list(per_direction) * directions
    if len(names) != len(per_direction) * directions:
        raise ctx.fail(f"activations lists {len(names)} functions, expected {len(per_direction)} per direction "
                       f"for {directions} direction(s)")
    alphas = list(ctx.attr("activation_alpha", []))
    betas = list(ctx.attr("activation_beta", []))
    chosen = []
    for name in names:
        key = name.lower()
        if key not in _ACTIVATION_PARAMS:
            raise ctx.unsupported(f"activation {name!r} (known: {', '.join(sorted(_ACTIVATION_PARAMS))})")
        alpha, beta = _ACTIVATION_PARAMS[key]
        if alpha is not None and alphas:
            alpha = float(alphas.pop(0))
        if beta is not None and betas:
            beta = float(betas.pop(0))
        chosen.append(_Activation(key, alpha, beta))
    size = len(per_direction)
    return [chosen[d * size:(d + 1) * size] for d in range(directions)]


@dataclass(frozen=True)
class _Shape:
    steps: int
    batch: int
    hidden: int
    directions: int


def _shape(ctx: NodeContext, gates: int) -> _Shape:
    x, w, r = ctx.type(0), ctx.type(1), ctx.type(2)
    if x.rank != 3 or w.rank != 3 or r.rank != 3:
        raise ctx.fail(f"X {x}, W {w} and R {r} should all be 3-D", ShapeError)
    steps, batch = x.shape[:2] if ctx.attr("layout", 0) == 0 else x.shape[1::-1]
    if steps == 0:
        raise ctx.unsupported("X with a sequence length of 0")
    directions = {"forward": 1, "reverse": 1, "bidirectional": 2}.get(ctx.attr("direction", "forward"))
    if directions is None:
        raise ctx.fail(f"direction={ctx.attr('direction')!r} should be forward, reverse or bidirectional")
    hidden = r.shape[2]
    if ctx.attr("hidden_size") is not None and ctx.attr("hidden_size") != hidden:
        raise ctx.fail(f"hidden_size={ctx.attr('hidden_size')} differs from R's last axis {hidden}", ShapeError)
    expected_w = (directions, gates * hidden, x.shape[2])
    if w.shape != expected_w or r.shape != (directions, gates * hidden, hidden):
        raise ctx.fail(f"W {w} and R {r} should be {list(expected_w)} and "
                       f"{[directions, gates * hidden, hidden]}", ShapeError)
    return _Shape(steps, batch, hidden, directions)


# ----- small graph helpers ------------------------------------------------------------
def _rows(ctx: NodeContext, value: str, start: int, end: int, axis: int) -> str:
    return ctx.emit1("slice", [value], {"starts": (start,), "ends": (end,), "axes": (axis,), "steps": (1,)})


def _direction_part(ctx: NodeContext, value: str, d: int) -> str:
    """Direction d of a (directions, ...) tensor, without that axis."""
    return ctx.emit1("squeeze", [_rows(ctx, value, d, d + 1, 0)], {"axes": (0,)})


def _activate(ctx: NodeContext, fn: _Activation, x: str, dtype: str) -> str:
    def const(v):
        return ctx.constant(v, dtype)

    if fn.name in ("relu", "tanh", "sigmoid", "softsign", "softplus"):
        return ctx.emit1(fn.name, [x])
    if fn.name == "leakyrelu":
        return ctx.emit1("leaky_relu", [x], {"alpha": fn.alpha})
    if fn.name == "elu":
        return ctx.emit1("elu", [x], {"alpha": fn.alpha})
    if fn.name == "hardsigmoid":
        return ctx.emit1("hard_sigmoid", [x], {"alpha": fn.alpha, "beta": fn.beta})
    if fn.name == "affine":
        return ctx.emit1("add", [ctx.emit1("mul", [x, const(fn.alpha)]), const(fn.beta)])
    if fn.name == "scaledtanh":
        return ctx.emit1("mul", [ctx.emit1("tanh", [ctx.emit1("mul", [x, const(fn.beta)])]), const(fn.alpha)])
    # thresholdedrelu: x above alpha, else 0
    above = ctx.emit1("greater", [x, const(fn.alpha)])
    return ctx.emit1("where", [above, x, const(0)])


class _Cell:
    """What one direction's step needs: its weights, activations and the node's clip."""

    def __init__(self, ctx: NodeContext, d: int, shape: _Shape, activations: list[_Activation]):
        self.ctx, self.shape, self.activations = ctx, shape, activations
        self.dtype = ctx.type(0).dtype
        self.gates = _FORMS[ctx.op_type][0]
        self.w = _direction_part(ctx, ctx.input(1), d)  # (gates * hidden, input)
        self.r = _direction_part(ctx, ctx.input(2), d)  # (gates * hidden, hidden)
        size = self.gates * shape.hidden
        if ctx.has_input(3):
            if ctx.type(3).shape != (shape.directions, 2 * size):
                raise ctx.fail(f"B {ctx.type(3)} should be {[shape.directions, 2 * size]}", ShapeError)
            bias = _direction_part(ctx, ctx.input(3), d)
            self.wb, self.rb = _rows(ctx, bias, 0, size, 0), _rows(ctx, bias, size, 2 * size, 0)
        else:
            self.wb = self.rb = ctx.constant(np.zeros(size), self.dtype)
        clip = ctx.attr("clip")
        self.clip = float(clip) if clip is not None else None

    def gate(self, value: str, k: int) -> str:
        """Gate k's columns of a (batch, gates * hidden) tensor."""
        h = self.shape.hidden
        return _rows(self.ctx, value, k * h, (k + 1) * h, 1)

    def act(self, k: int, x: str, clipped: bool = True) -> str:
        """Activation k of this direction, on x clipped to [-clip, clip] when clip is set
        and ``clipped``."""
        if self.clip is not None and clipped:
            x = self.ctx.emit1("clip", [x], {"min": -self.clip, "max": self.clip})
        return _activate(self.ctx, self.activations[k], x, self.dtype)

    def recurrent(self, h: str, first: int, last: int) -> str:
        """h R^T + Rb for the gates first..last-1, as (batch, (last - first) * hidden)."""
        hid = self.shape.hidden
        r = _rows(self.ctx, self.r, first * hid, last * hid, 0)
        rb = _rows(self.ctx, self.rb, first * hid, last * hid, 0)
        return self.ctx.emit1("gemm", [h, r, rb], {"alpha": 1.0, "beta": 1.0, "trans_a": 0, "trans_b": 1})

    def const(self, value) -> str:
        return self.ctx.constant(value, self.dtype)


# ----- one step of each op ------------------------------------------------------------
def _rnn_step(cell: _Cell, xw: str, state: list[str]) -> list[str]:
    total = cell.ctx.emit1("add", [xw, cell.recurrent(state[0], 0, 1)])
    return [cell.act(0, total)]


def _gru_step(cell: _Cell, xw: str, state: list[str]) -> list[str]:
    ctx, h = cell.ctx, state[0]
    zr = ctx.emit1("add", [_rows(ctx, xw, 0, 2 * cell.shape.hidden, 1), cell.recurrent(h, 0, 2)])
    z, r = cell.act(0, cell.gate(zr, 0)), cell.act(0, cell.gate(zr, 1))
    if ctx.attr("linear_before_reset", 0):
        candidate = ctx.emit1("mul", [r, cell.recurrent(h, 2, 3)])
    else:
        candidate = cell.recurrent(ctx.emit1("mul", [r, h]), 2, 3)
    ht = cell.act(1, ctx.emit1("add", [cell.gate(xw, 2), candidate]))
    # Ht = (1 - z) * ht + z * H
    keep = ctx.emit1("mul", [z, h])
    return [ctx.emit1("add", [ctx.emit1("mul", [ctx.emit1("sub", [cell.const(1), z]), ht]), keep])]


def _lstm_step(cell: _Cell, xw: str, state: list[str], peepholes: list[str] | None) -> list[str]:
    ctx, (h, c) = cell.ctx, state
    gates = ctx.emit1("add", [xw, cell.recurrent(h, 0, 4)])  # order i, o, f, c

    def peep(k: int, value: str, cell_state: str) -> str:
        if peepholes is None:
            return value
        return ctx.emit1("add", [value, ctx.emit1("mul", [peepholes[k], cell_state])])

    i = cell.act(0, peep(0, cell.gate(gates, 0), c))
    if ctx.attr("input_forget", 0):
        f = ctx.emit1("sub", [cell.const(1), i])
    else:
        f = cell.act(0, peep(2, cell.gate(gates, 2), c))
    candidate = cell.act(1, cell.gate(gates, 3))
    c_new = ctx.emit1("add", [ctx.emit1("mul", [f, c]), ctx.emit1("mul", [i, candidate])])
    o = cell.act(0, peep(1, cell.gate(gates, 1), c_new))
    # clip bounds the gates' inputs, not the cell state h reads (as onnxruntime does)
    return [ctx.emit1("mul", [o, cell.act(2, c_new, clipped=False)]), c_new]


# ----- the unrolled direction and the node --------------------------------------------
def _initial(ctx: NodeContext, k: int, d: int, shape: _Shape, dtype: str) -> str:
    """initial_h (k=5) or initial_c (k=6) of direction d as (batch, hidden); zeros if absent."""
    if not ctx.has_input(k):
        return ctx.constant(np.zeros((shape.batch, shape.hidden)), dtype)
    value = ctx.input(k)
    expected = (shape.directions, shape.batch, shape.hidden)
    if ctx.attr("layout", 0):
        value = ctx.emit1("transpose", [value], {"perm": (1, 0, 2)})
        expected = (shape.batch, shape.directions, shape.hidden)
    if ctx.type(k).shape != expected:
        raise ctx.fail(f"input {k} {ctx.type(k)} should be {list(expected)}", ShapeError)
    return _direction_part(ctx, value, d)


def _step_masks(ctx: NodeContext, shape: _Shape) -> list[str] | None:
    """Per step, (batch, 1) bools: whether the step lies within each entry's length; None
    when sequence_lens is absent or known to cover every step."""
    if not ctx.has_input(4):
        return None
    lens_type = ctx.type(4)
    if lens_type.shape != (shape.batch,) or lens_type.dtype not in ("int32", "int64"):
        raise ctx.fail(f"sequence_lens {lens_type} should be int32[{shape.batch}]", ShapeError)
    if ctx.is_const(4):
        lens = ctx.const(4, "sequence_lens")
        if np.any((lens < 0) | (lens > shape.steps)):
            raise ctx.fail(f"sequence_lens {lens.tolist()} should lie in [0, {shape.steps}]")
        if np.all(lens == shape.steps):
            return None
    lens = ctx.emit1("reshape", [ctx.input(4)], {"shape": (shape.batch, 1)})
    return [ctx.emit1("less", [ctx.constant(t, lens_type.dtype), lens]) for t in range(shape.steps)]


def _run_direction(ctx: NodeContext, cell: _Cell, x: str, shape: _Shape, state: list[str],
                   reverse: bool, masks: list[str] | None,
                   peepholes: list[str] | None) -> tuple[list[str], list[str]]:
    """Unrolls one direction: (the step outputs in time order, the final state)."""
    flat = ctx.emit1("reshape", [x], {"shape": (shape.steps * shape.batch, -1)})
    projected = ctx.emit1("gemm", [flat, cell.w, cell.wb], {"alpha": 1.0, "beta": 1.0, "trans_a": 0, "trans_b": 1})
    projected = ctx.emit1("reshape", [projected], {"shape": (shape.steps, shape.batch, -1)})
    outputs: list[str] = [""] * shape.steps
    zero = cell.const(0)
    for t in (reversed(range(shape.steps)) if reverse else range(shape.steps)):
        xw = ctx.emit1("squeeze", [_rows(ctx, projected, t, t + 1, 0)], {"axes": (0,)})
        if ctx.op_type == "LSTM":
            new = _lstm_step(cell, xw, state, peepholes)
        else:
            new = (_rnn_step if ctx.op_type == "RNN" else _gru_step)(cell, xw, state)
        if masks is None:
            state, outputs[t] = new, new[0]
        else:  # past an entry's length: the state stays, Y is 0
            state = [ctx.emit1("where", [masks[t], n, s]) for n, s in zip(new, state)]
            outputs[t] = ctx.emit1("where", [masks[t], new[0], zero])
    if masks is not None:  # an entry of length 0 ends with zero states (as onnxruntime does)
        state = [ctx.emit1("where", [masks[0], s, zero]) for s in state]
    return outputs, state


def _peepholes(ctx: NodeContext, d: int, shape: _Shape) -> list[str] | None:
    if ctx.op_type != "LSTM" or not ctx.has_input(7):
        return None
    if ctx.type(7).shape != (shape.directions, 3 * shape.hidden):
        raise ctx.fail(f"P {ctx.type(7)} should be {[shape.directions, 3 * shape.hidden]}", ShapeError)
    p = _direction_part(ctx, ctx.input(7), d)
    return [_rows(ctx, p, k * shape.hidden, (k + 1) * shape.hidden, 0) for k in range(3)]


def _convert(ctx: NodeContext) -> None:
    gates, _, state_count = _FORMS[ctx.op_type]
    layout = ctx.attr("layout", 0)
    if layout not in (0, 1):
        raise ctx.fail(f"layout={layout} should be 0 or 1")
    shape = _shape(ctx, gates)
    activations = _activations(ctx, shape.directions)
    dtype = ctx.type(0).dtype
    x = ctx.input(0) if layout == 0 else ctx.emit1("transpose", [ctx.input(0)], {"perm": (1, 0, 2)})
    masks = _step_masks(ctx, shape)
    ys, finals = [], []
    for d in range(shape.directions):
        cell = _Cell(ctx, d, shape, activations[d])
        state = [_initial(ctx, 5 + k, d, shape, dtype) for k in range(state_count)]
        reverse = d == 1 or ctx.attr("direction", "forward") == "reverse"
        outputs, final = _run_direction(ctx, cell, x, shape, state, reverse, masks, _peepholes(ctx, d, shape))
        ys.append(ctx.emit1("concat", [ctx.emit1("unsqueeze", [o], {"axes": (0, 1)}) for o in outputs],
                            {"axis": 0}))  # (steps, 1, batch, hidden)
        finals.append([ctx.emit1("unsqueeze", [s], {"axes": (0,)}) for s in final])
    _write(ctx, 0, ys, 1, (2, 0, 1, 3))
    for k in range(state_count):
        _write(ctx, 1 + k, [f[k] for f in finals], 0, (1, 0, 2))


def _write(ctx: NodeContext, k: int, parts: list[str], axis: int, batch_first: tuple[int, ...]) -> None:
    """ONNX output k: the directions' parts joined on ``axis``, batch first under layout 1."""
    if not ctx.output(k):
        return
    if ctx.attr("layout", 0):
        joined = ctx.emit1("concat", parts, {"axis": axis}) if len(parts) > 1 else parts[0]
        ctx.emit1("transpose", [joined], {"perm": batch_first}, output=ctx.output(k))
    elif len(parts) > 1:
        ctx.emit1("concat", parts, {"axis": axis}, output=ctx.output(k))
    else:
        ctx.alias(k, parts[0])


for _op in _FORMS:
    RNN_CONVERTERS[_op] = _convert
