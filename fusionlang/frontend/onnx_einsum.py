"""ONNX Einsum lowered to the ops fusionlang compiles: a repeated label in one operand
(a diagonal) is a mask and a sum, labels nothing else needs are summed away, and operands
are combined left to right as one batched matmul each (transposes and reshapes around
it), then the result is put in the output's label order.

Equations follow numpy.einsum: letters label axes, ``...`` stands for the broadcast
leading axes, and without ``->`` the output is the ellipsis then every letter used once,
in alphabetical order.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from fusionlang.errors import ShapeError
from fusionlang.frontend.onnx_context import NodeContext

_TERM = re.compile(r"^(?:[A-Za-z]|\.\.\.)*$")


@dataclass
class Operand:
    """A graph value and the label of each of its axes."""

    value: str
    labels: list[str]


def parse_equation(ctx: NodeContext, equation: str, ranks: list[int]) -> tuple[list[list[str]], list[str]]:
    """Each input's labels and the output's, with ``...`` spelled out as labels "0", "1"...
    (the broadcast axes, aligned from the right as numpy aligns them)."""
    text = equation.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ctx.fail(f"equation {equation!r} has {len(terms)} operands but the node has {len(ranks)} inputs")
    for term in terms + ([rhs] if arrow else []):
        if not _TERM.match(term) or term.count("...") > 1:
            raise ctx.fail(f"equation {equation!r}: {term!r} is not a term (letters, at most one '...')")
    widths = [rank - len(term.replace("...", "")) for term, rank in zip(terms, ranks)]
    for term, width, rank in zip(terms, widths, ranks):
        if width < 0 or (width > 0 and "..." not in term):
            raise ctx.fail(f"equation {equation!r}: term {term!r} does not fit an input of rank {rank}", ShapeError)
    broadcast = max(widths, default=0)
    ellipsis = [str(k) for k in range(broadcast)]
    inputs = [_spell(term, ellipsis[broadcast - width:]) for term, width in zip(terms, widths)]
    if arrow and ellipsis and "..." not in rhs:
        # numpy's rule: the broadcast axes are kept, never summed silently
        raise ctx.fail(f"equation {equation!r}: the output must keep the axes '...' stands for")
    if arrow:
        output = _spell(rhs, ellipsis)
    else:
        letters = [label for term in inputs for label in term if not label.isdigit()]
        output = ellipsis + sorted(label for label in set(letters) if letters.count(label) == 1)
    used = {label for term in inputs for label in term}
    unknown = [label for label in output if label not in used]
    if unknown or len(set(output)) != len(output):
        raise ctx.fail(f"equation {equation!r}: output labels must be distinct and appear in an input")
    return inputs, output


def _spell(term: str, ellipsis: list[str]) -> list[str]:
    before, dots, after = term.partition("...")
    return list(before) + (ellipsis if dots else []) + list(after)


def convert_einsum(ctx: NodeContext) -> None:
    inputs = [ctx.input(k) for k in range(ctx.num_inputs)]
    ranks = [ctx.type(k).rank for k in range(ctx.num_inputs)]
    equation = ctx.attr("equation")
    if isinstance(equation, bytes):
        equation = equation.decode()
    if not isinstance(equation, str):
        raise ctx.fail("the equation attribute is required")
    labels, output = parse_equation(ctx, equation, ranks)
    lowering = _Lowering(ctx, _label_sizes(ctx, inputs, labels))
    operands = [lowering.diagonal(Operand(v, list(ls))) for v, ls in zip(inputs, labels)]
    result = operands[0]
    for k, other in enumerate(operands[1:], start=1):
        later = set(output).union(*(op.labels for op in operands[k + 1:]))
        result = lowering.product(result, other, later)
    result = lowering.sum_all_but(result, set(output))
    lowering.finish(result, output)


def _label_sizes(ctx: NodeContext, inputs: list[str], labels: list[list[str]]) -> dict[str, int]:
    """The size of each label: equal wherever it appears, or 1 there (broadcast)."""
    sizes: dict[str, int] = {}
    for value, term in zip(inputs, labels):
        for label, n in zip(term, ctx.graph.types[value].shape):
            known = sizes.get(label, 1)
            if n != known and 1 not in (n, known):
                name = "..." if label.isdigit() else repr(label)
                raise ctx.fail(f"label {name} has sizes {known} and {n}", ShapeError)
            sizes[label] = max(known, n)
    return sizes


class _Lowering:
    def __init__(self, ctx: NodeContext, sizes: dict[str, int]):
        self.ctx = ctx
        self.sizes = sizes

    def shape(self, value: str) -> tuple[int, ...]:
        return self.ctx.graph.types[value].shape

    def diagonal(self, op: Operand) -> Operand:
        """Each label repeated in one operand taken once: the elements off the diagonal
        masked to 0 (NaN and inf there do not leak), then summed away."""
        while len(set(op.labels)) != len(op.labels):
            label = next(label for label in op.labels if op.labels.count(label) > 1)
            first = op.labels.index(label)
            second = op.labels.index(label, first + 1)
            n = self.shape(op.value)[first]
            if self.shape(op.value)[second] != n:
                raise self.ctx.fail(f"label {label!r} has sizes {n} and {self.shape(op.value)[second]} in one "
                                    "operand", ShapeError)
            mask_shape = [1] * len(op.labels)
            mask_shape[first] = mask_shape[second] = n
            mask = np.eye(n, dtype=bool).reshape(mask_shape)
            zero = self.ctx.constant(0, self.ctx.graph.types[op.value].dtype)
            kept = self.ctx.emit1("where", [self.ctx.constant(mask), op.value, zero])
            summed = self.ctx.emit1("reduce_sum", [kept], {"axes": (second,), "keepdims": 0})
            op = Operand(summed, op.labels[:second] + op.labels[second + 1:])
        return op

    def sum_all_but(self, op: Operand, needed: set[str]) -> Operand:
        axes = tuple(k for k, label in enumerate(op.labels) if label not in needed)
        if not axes:
            return op
        summed = self.ctx.emit1("reduce_sum", [op.value], {"axes": axes, "keepdims": 0})
        return Operand(summed, [label for label in op.labels if label in needed])

    def arrange(self, op: Operand, labels: list[str], groups: list[list[str]]) -> str:
        """``op`` transposed to ``labels``' order, each label grown to its full size, and
        reshaped to one axis per group of labels."""
        value = op.value
        perm = tuple(op.labels.index(label) for label in labels)
        if perm != tuple(range(len(perm))):
            value = self.ctx.emit1("transpose", [value], {"perm": perm})
        full = tuple(self.sizes[label] for label in labels)
        if self.shape(value) != full:
            value = self.ctx.emit1("expand", [value], {"shape": full})
        grouped = tuple(math.prod(self.sizes[label] for label in group) for group in groups)
        if self.shape(value) != grouped:
            value = self.ctx.emit1("reshape", [value], {"shape": grouped})
        return value

    def product(self, a: Operand, b: Operand, later: set[str]) -> Operand:
        """a times b, summed over the labels they share that nothing later needs: one
        batched matmul [batch, m, k] @ [batch, k, n]."""
        a = self.sum_all_but(a, later | set(b.labels))
        b = self.sum_all_but(b, later | set(a.labels))
        shared = [label for label in a.labels if label in b.labels]
        batch = [label for label in shared if label in later]
        contracted = [label for label in shared if label not in later]
        a_only = [label for label in a.labels if label not in b.labels]
        b_only = [label for label in b.labels if label not in a.labels]
        left = self.arrange(a, batch + a_only + contracted, [batch, a_only, contracted])
        right = self.arrange(b, batch + contracted + b_only, [batch, contracted, b_only])
        product = self.ctx.emit1("matmul", [left, right])
        labels = batch + a_only + b_only
        shape = tuple(self.sizes[label] for label in labels)
        return Operand(self.ctx.emit1("reshape", [product], {"shape": shape}), labels)

    def finish(self, op: Operand, output: list[str]) -> None:
        perm = tuple(op.labels.index(label) for label in output)
        if perm != tuple(range(len(perm))):
            self.ctx.emit_output("transpose", [op.value], {"perm": perm})
        else:
            self.ctx.alias(0, op.value)
