"""Scaled dot-product attention as one direct kernel on the C target.

A group computing ``softmax(Q K^T (/ or * scale) (+ mask)) V`` (the ``attention_block``
pattern of ``apollo_patterns.fuse``, softmax opened inside it) holds two matmuls. Each would
run as a GEMM template of its own, and together as one loop nest they are several times
slower, so without this kernel the backend's feedback refuses the group. Here it runs as
one kernel that never writes the scores to memory:

* per batch/head index, K^T is packed into a contiguous
  ``[D][N]`` panel padded to whole vectors, and V into ``[N][E]`` (or, when its head dim is
  narrow, ``[E][N]``, N padded with zeros too): any transposes the group holds on Q, K or V are folded into the
  strides the packing and loads use; a K^T or V whose rows already are whole vectors one
  after the other (the GEMM before it wrote the heads so) is read in place, unpacked;
* per block of query rows (8 with 32 vector registers, else 4), the scores are a
  register-blocked product (two accumulator vectors a row, the last of an odd count alone,
  where the registers hold 2 x 8 of them, else one; summed over the head dim in
  order, as the loop nest sums); per row the scale and mask are applied as the group's
  own nodes say (div or mul by a one-element tensor, an add of a mask broadcast over batch
  and heads, a masked_fill ``where(c, f, scores)`` of a bool mask, in the group's order),
  then the row's max (the padding set to -inf, whole vectors in independent chains),
  ``fl_expf`` (the vectorizable exp every C kernel uses, as the kernel's own copy for
  arguments <= 0 that gives the same bits, see :func:`_exp_nonpositive_c`; a result below
  2^-126 is flushed to 0, see :func:`_flushed_exp`), the sum (as the max), and the probabilities
  ``e * (1 / sum)`` (or ``e / sum``, as the group computes them), each rounded to float32
  where the reference rounds it;
* the weighted sum P.V is the same register-blocked product over the keys, stored straight
  into the output where a head's output rows are whole vectors (a narrow V: rows in
  pairs, up to 8 output columns in one pass over the keys, a vector accumulator each,
  their lanes summed in one tree, the padded keys' probabilities 0) while the block's rows
  are in L1.

With OpenMP the threads share the (batch index, row block) pairs in contiguous ranges,
each packing a batch index's panels once in its range, so one head's rows split too.

NaN and inf behave as the reference's softmax: a row of all -inf scores (a fully masked
row) or one holding +inf or NaN gives NaN probabilities, hence a NaN output row (one
exception: a probability the flush made 0 times an infinite V element is NaN, where the
reference's subnormal probability gives inf). Two guards torch puts after the softmax run
in the kernel too: ``where(is_nan(p), z, p)`` (its ONNX exports) and
``where(not(reduce_max(not(scores == -inf)) > 0), z, p)`` (its SDPA decomposition in core
ATen, what torch.compile hands over: only a row of scores that are -inf throughout becomes
z; one holding NaN stays NaN). Sums run in vector lanes, so results match the loop nest
within float32 rounding, not bit for bit; they do not depend on the number of threads (a
row is computed the same way by any thread).

Which groups run here: float32 (bool tests and masks aside), every operand from outside the
group (or through transposes in it), only the final product leaving the group, and beside it
the probabilities the product reads (a training forward saves them for the backward: the
kernel writes them too), the softmax over the last
axis, and a key length up to :data:`MAX_KEYS` (the workspace per thread holds the packed
panels and a block of score rows: no online softmax over key blocks yet).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass

from fusionlang.backend.cexpr import CTYPES, FAST_MATH_C
from fusionlang.backend.emit_c import CFunction
from fusionlang.backend.failures import ALLOC
from fusionlang.backend.gemm_template import vector_types
from fusionlang.backend.machine import Machine, host
from fusionlang.backend.poly import Array
from fusionlang.ir.graph import Graph, Node
from fusionlang.ops.shape import row_major_strides

#: the longest key sequence the kernel takes: its workspace per thread is about
#: (D + E + 1) * N floats, which stays in L2 up to this length for head dims up to 64
MAX_KEYS = 8192
#: a V head dim below this is packed transposed, so P.V is a dot product over the keys
#: (vector lanes along N) instead of an update of a row too short to fill a vector
NARROW_HEAD = 16


@dataclass(frozen=True)
class View:
    """An operand as the kernel reads it: the value, and its stride for each batch dim of
    the output and for its two matrix dims (0 where it broadcasts)."""

    value: str
    batch: tuple[int, ...]
    rows: int
    cols: int
    #: a ``mul`` or ``div`` of every element by a one-element tensor on the way to the
    #: product (a scale on Q or K computed in the group): (op, that tensor)
    scale: tuple[str, str] | None = None


@dataclass(frozen=True)
class ScoreStep:
    """One elementwise step applied to the scores: ``div`` or ``mul`` by a one-element
    tensor, ``add`` of a mask (``view``), or ``where`` a bool mask (``view``) is true the
    value of ``fill`` (torch's masked_fill); ``left`` when the scores are the right operand."""

    op: str
    view: View
    left: bool = False
    #: the tensor a ``where`` step fills in (all its elements equal: its first is read)
    fill: str | None = None


@dataclass(frozen=True)
class _RawStep:
    """A step as found in the group: op, the other operand (a ``where``'s condition),
    whether the scores are its right operand, the scores' shape there, a ``where``'s fill."""

    op: str
    other: str
    left: bool
    shape: tuple[int, ...]
    fill: str | None = None


@dataclass(frozen=True)
class AttentionKernel:
    """One attention group as the attention template: its parameters (inputs, then the
    output), the sizes, the operands' views and the steps between QK^T and the softmax."""

    params: tuple[Array, ...]
    #: the value each parameter holds (the output last, the saved probabilities before it)
    values: tuple[str, ...]
    batch: tuple[int, ...]
    m: int
    n: int
    d: int
    e: int
    q: View
    kt: View
    v: View
    #: where the output's elements go (a transpose and reshape after the product folded in)
    o: View
    steps: tuple[ScoreStep, ...]
    #: probabilities as ``e * (1 / sum)`` (the opened softmax) or ``e / sum``
    reciprocal: bool
    #: the one-element tensor a NaN probability is replaced with (torch's SDPA export:
    #: ``where(is_nan(p), 0, p)``, so a fully masked row gives 0s), or None
    nan_to: str | None = None
    #: the one-element tensor every probability of a row whose scores are all -inf is
    #: replaced with (torch's SDPA decomposition in core ATen: ``where(not(reduce_max(
    #: not(scores == -inf)) > 0), 0, p)``), or None
    masked_row_to: str | None = None
    #: the probabilities the product reads, written out too (a training forward saves
    #: them for the backward), or None
    saved: str | None = None

    #: what the kernel list and the profile call it
    strategy = "attention template"

    @property
    def flops(self) -> int:
        return 2 * math.prod(self.batch) * self.m * self.n * (self.d + self.e)

    @property
    def detail(self) -> str:
        """The problem as the kernel list and the profile print it."""
        return f"attention m={self.m} n={self.n} d={self.d} e={self.e}" + "".join(f" x{b}" for b in self.batch if b > 1)


def plan_attention(graph: Graph, names: list[str]) -> AttentionKernel | None:
    """The group ``names`` of ``graph`` as the attention kernel, or None when it is not
    exactly one scaled dot-product attention this kernel computes."""
    nodes = {n: graph.node(n) for n in names if n in graph.index.by_name}
    if len(nodes) != len(names) or sum(n.op == "matmul" for n in nodes.values()) != 2:
        return None  # (cheap first: the feedback check asks about every candidate group)
    found = _Match(graph, nodes).attention()
    if found is None or found[0] != set(names):
        return None
    return found[1]


def attention_applies(graph: Graph, names: list[str]) -> bool:
    """Whether the C target runs the group ``names`` as the attention kernel."""
    return plan_attention(graph, names) is not None


#: the ops of the guards whose outputs are bool (the one dtype besides float32 in a group)
GUARD_TESTS = frozenset({"is_nan", "equal", "not", "greater"})


@dataclass(frozen=True)
class Guard:
    """The probabilities the P.V product reads, and what replaces them: NaNs by
    ``nan_to``, or a whole row whose ``scores`` are all -inf by ``masked_row_to`` (each a
    tensor all of whose elements are equal: the kernel reads its first)."""

    probabilities: str
    nan_to: str | None = None
    masked_row_to: str | None = None
    scores: str | None = None


class _Match:
    """Walks back from the group's one output through the softmax and the score steps to
    QK^T, recording the nodes it used; any other shape gives None."""

    def __init__(self, graph: Graph, nodes: dict[str, Node]):
        self.graph, self.nodes = graph, nodes
        self.producer = {out: n for n in nodes.values() for out in n.outputs}
        self.used: set[str] = set()

    def _inner(self, value: str, op: str | tuple[str, ...]) -> Node | None:
        """The group's node computing ``value`` if its op is ``op``, marked used."""
        node = self.producer.get(value)
        ops = (op,) if isinstance(op, str) else op
        if node is None or node.op not in ops or len(node.outputs) != 1:
            return None
        self.used.add(node.name)
        return node

    def attention(self) -> tuple[set[str], AttentionKernel] | None:
        outputs = [v for n in self.nodes.values() for v in n.outputs if self._leaves_group(v)]
        final = [v for v in outputs if self.producer[v].op in ("matmul", "transpose", "reshape")]
        if len(final) != 1 or len(outputs) > 2:
            return None
        out = final[0]
        saved = next((v for v in outputs if v != out), None)
        types = self.graph.types
        stored = self._stored(out)
        # float32 throughout, but for the guards' tests and the masks of masked fills (bool)
        tests = {v for n in self.nodes.values() if n.op in GUARD_TESTS for v in n.outputs} \
            | {n.inputs[0] for n in self.nodes.values() if n.op == "where"}
        if stored is None or any(types[v].dtype != "float32" for n in self.nodes.values()
                                 for v in n.present_inputs() + n.outputs if v not in tests):
            return None
        pv, o = stored
        if saved not in (None, pv.inputs[0]):
            return None  # only the probabilities the product reads are written out
        guard = self._guard(pv.inputs[0])
        if guard is None:
            return None
        softmax = self._softmax(guard.probabilities)
        if softmax is None:
            return None
        logits, reciprocal = softmax
        if guard.scores is not None and guard.scores != logits:
            return None  # the row test reads other values than the softmax does
        chain = self._steps(logits)
        if chain is None:
            return None
        qk, steps = chain
        batch = types[pv.outputs[0]].shape[:-2]
        if types[qk.outputs[0]].shape[:-2] != batch or types[pv.inputs[0]].shape != types[qk.outputs[0]].shape:
            return None
        q, kt = (self._view(x, batch, scaled=True) for x in qk.inputs[:2])
        v = self._view(pv.inputs[1], batch)
        mask_steps = [step for step in (self._step(s, batch) for s in steps) if step is not None]
        if q is None or kt is None or v is None or len(mask_steps) != len(steps):
            return None
        m, n = types[qk.outputs[0]].shape[-2:]
        d, e = types[qk.inputs[0]].shape[-1], types[pv.outputs[0]].shape[-1]
        if n > MAX_KEYS or 0 in types[out].shape or n == 0 or d == 0:
            return None
        inputs = [q.value, kt.value, v.value] + [x.scale[1] for x in (q, kt) if x.scale] \
            + [s.view.value for s in mask_steps] + [s.fill for s in mask_steps if s.fill] + [z for z in (guard.nan_to, guard.masked_row_to) if z]
        written = ((saved,) if saved else ()) + (out,)
        values = tuple(dict.fromkeys(inputs)) + written
        params = tuple(Array(k, types[value].shape, types[value].dtype, "output" if value in written else "input",
                             value) for k, value in enumerate(values))
        kernel = AttentionKernel(params, values, tuple(batch), m, n, d, e, q, kt, v, o, tuple(mask_steps), reciprocal,
                                 guard.nan_to, guard.masked_row_to, saved)
        return self.used, kernel

    def _stored(self, out: str) -> tuple[Node, View] | None:
        """(the P.V matmul, where its elements are stored in ``out``): ``out`` is the
        product itself, or the product through transposes (heads moved back next to the
        rows) and then reshapes (heads merged), which only relabel row-major bytes."""
        value = out
        while (node := self._inner(value, "reshape")) is not None:
            if any(v in self.producer for v in node.inputs[1:]):
                return None
            value = node.inputs[0]
        layout = value  # the row-major bytes of ``out``
        perm: list[int] | None = None
        while (node := self._inner(value, "transpose")) is not None:
            own = list(node.attrs["perm"] or range(self.graph.types[value].rank)[::-1])
            perm = own if perm is None else [own[p] for p in perm]
            value = node.inputs[0]
        pv = self._inner(value, "matmul")
        rank = self.graph.types[value].rank
        if pv is None or rank < 2:
            return None
        stored = row_major_strides(self.graph.types[layout].shape)
        strides = [stored[perm.index(d)] if perm is not None else stored[d] for d in range(rank)]
        return pv, View(out, tuple(strides[:-2]), strides[-2], strides[-1])

    def _guard(self, value: str) -> Guard | None:
        """What ``value``, the product's left operand, guards: the probabilities themselves,
        ``where(is_nan(p), z, p)``, or ``where(<the row's scores are all -inf>, z, p)``;
        None for another ``where``."""
        node = self._inner(value, "where")
        if node is None:
            return Guard(value)
        cond, z, p = node.inputs
        types = self.graph.types
        if z in self.producer or not self._one_value(z) or types[value].shape != types[p].shape:
            return None
        test = self._inner(cond, "is_nan")
        if test is not None:
            return Guard(p, nan_to=z) if test.inputs[0] == p else None
        scores = self._all_minus_inf(cond)
        return None if scores is None else Guard(p, masked_row_to=z, scores=scores)

    def _all_minus_inf(self, cond: str) -> str | None:
        """The scores ``cond`` tests when it is ``not(reduce_max(cast(not(scores == -inf)))
        > 0)`` over the last axis (true where a row is -inf throughout), else None."""
        negated = self._inner(cond, "not")
        above = self._inner(negated.inputs[0], "greater") if negated is not None else None
        if above is None or not self._constant_is(above.inputs[1], 0.0):
            return None
        top = self._inner(above.inputs[0], "reduce_max")
        cast = self._inner(top.inputs[0], "cast") if top is not None and self._last_axis(top) else None
        live = self._inner(cast.inputs[0], "not") if cast is not None else None
        equal = self._inner(live.inputs[0], "equal") if live is not None else None
        if equal is None:
            return None
        inf = [k for k, v in enumerate(equal.inputs) if self._constant_is(v, -math.inf)]
        return equal.inputs[1 - inf[0]] if inf else None

    def _one_value(self, value: str) -> bool:
        """Whether every element of ``value`` is its first: one element, or a constant
        filled with one number (core ATen's ``zeros_like`` folded to the scores' shape)."""
        if self.graph.types[value].size == 1:
            return True
        array = self.graph.constants.get(value)
        return array is not None and bool((array == array.reshape(-1)[0]).all())

    def _constant_is(self, value: str, number: float) -> bool:
        """Whether ``value`` is a constant of one element equal to ``number``."""
        array = self.graph.constants.get(value)
        return array is not None and array.size == 1 and float(array.reshape(-1)[0]) == number

    def _leaves_group(self, value: str) -> bool:
        readers = self.graph.index.consumers.get(value, ())
        return value in self.graph.outputs or any(r.name not in self.nodes for r in readers)

    def _softmax(self, value: str) -> tuple[str, bool] | None:
        """(the logits, whether the probabilities are ``e * (1/sum)``) of a softmax over
        the last axis: the op itself, or as opened (max, sub, exp, sum, reciprocal and mul,
        or a div)."""
        whole = self._inner(value, "softmax")
        if whole is not None:
            rank = self.graph.types[value].rank
            return (whole.inputs[0], True) if whole.attrs.get("axis", -1) in (-1, rank - 1) else None
        last = self._inner(value, ("mul", "div"))
        if last is None:
            return None
        if last.op == "div":
            exp_value, total = last.inputs
        else:
            recips = [v for v in last.inputs if self._inner(v, "reciprocal") is not None]
            if len(recips) != 1:
                return None
            exp_value = last.inputs[1 - last.inputs.index(recips[0])]
            total = self.producer[recips[0]].inputs[0]
        summed = self._inner(total, "reduce_sum")
        exp = self._inner(exp_value, "exp")
        if summed is None or exp is None or summed.inputs[0] != exp_value or not self._last_axis(summed):
            return None
        sub = self._inner(exp.inputs[0], "sub")
        if sub is None:
            return None
        top = self._inner(sub.inputs[1], "reduce_max")
        if top is None or top.inputs[0] != sub.inputs[0] or not self._last_axis(top):
            return None
        return sub.inputs[0], last.op == "mul"

    def _last_axis(self, node: Node) -> bool:
        rank = self.graph.types[node.inputs[0]].rank
        axes = tuple(a % rank for a in node.attrs.get("axes") or ())
        present = [v for v in node.inputs[1:] if v]
        return not present and axes == (rank - 1,) and bool(node.attrs.get("keepdims", 1))

    def _steps(self, value: str) -> tuple[Node, list[_RawStep]] | None:
        """(the QK^T matmul, the steps from it to ``value`` in order). Reshapes that keep
        the last two dims (Swin's shifted windows split the windows' dim to add the mask,
        then merge it back) only relabel the batch dims, so they are no steps of their own."""
        steps: list[_RawStep] = []
        types = self.graph.types
        while True:
            node = self._inner(value, ("matmul", "div", "mul", "add", "reshape", "where"))
            if node is None:
                return None
            if node.op == "matmul":
                return node, steps[::-1]
            if node.op == "where":
                fill = self._masked_fill(node)
                if fill is None:
                    return None
                steps.append(fill)
                value = node.inputs[2]
                continue
            if node.op == "reshape":
                if types[node.inputs[0]].shape[-2:] != types[value].shape[-2:] or types[value].rank < 2:
                    return None
                value = node.inputs[0]
                continue
            mine = [k for k, v in enumerate(node.inputs) if self.producer.get(v) is not None]
            if len(mine) != 1 or types[node.outputs[0]].shape != types[node.inputs[mine[0]]].shape:
                return None
            if node.op == "div" and mine[0] != 0:
                return None  # a scalar over the scores is no scale
            other = node.inputs[1 - mine[0]]
            if node.op != "add" and types[other].size != 1:
                return None
            steps.append(_RawStep(node.op, other, mine[0] == 1, types[value].shape))
            value = node.inputs[mine[0]]

    def _masked_fill(self, node: Node) -> _RawStep | None:
        """``where(c, f, scores)`` (torch's ``masked_fill``) as a step: ``c`` a bool tensor
        from outside the group broadcast to the scores, ``f`` one value from outside it."""
        cond, fill, scores = node.inputs
        types = self.graph.types
        if cond in self.producer or fill in self.producer or scores not in self.producer \
                or types[cond].dtype != "bool" or not self._one_value(fill) \
                or types[node.outputs[0]].shape != types[scores].shape:
            return None
        return _RawStep("where", cond, False, types[scores].shape, fill)

    def _step(self, step: _RawStep, batch) -> ScoreStep | None:
        if step.op not in ("add", "where"):
            return ScoreStep(step.op, View(step.other, (0,) * len(batch), 0, 0), step.left)
        view = self._view(step.other, step.shape[:-2])
        if view is None:
            return None
        rebatched = _rebatched(view, step.shape[:-2], batch, step.left, step.op)
        return None if rebatched is None else dataclasses.replace(rebatched, fill=step.fill)

    def _view(self, value: str, batch, scaled: bool = False) -> View | None:
        """``value`` (through the group's transposes and, when ``scaled``, one scale by a
        one-element tensor, which commutes with them exactly) as strides over the output's
        batch dims and its last two dims, broadcasting as numpy does; None when it is
        computed in the group otherwise, or has more batch dims than the output."""
        perm: list[int] | None = None
        scale: tuple[str, str] | None = None
        while value in self.producer:
            node = self._inner(value, "transpose")
            if node is None and scaled and scale is None:
                scale, value = self._scale(value) or (None, value)
                if scale is not None:
                    continue
            if node is None:
                return None
            own = list(node.attrs["perm"] or range(self.graph.types[value].rank)[::-1])
            perm = own if perm is None else [own[p] for p in perm]
            value = node.inputs[0]
        t = self.graph.types[value]
        strides = row_major_strides(t.shape)
        shape = t.shape
        if perm is not None:
            shape, strides = tuple(shape[p] for p in perm), tuple(strides[p] for p in perm)
        if len(shape) < 2 or len(shape) - 2 > len(batch):
            return None
        lead = len(batch) - (len(shape) - 2)
        own = [0 if d < lead or shape[d - lead] == 1 else strides[d - lead] for d in range(len(batch))]
        return View(value, tuple(own), 0 if shape[-2] == 1 else strides[-2], 0 if shape[-1] == 1 else strides[-1], scale)

    def _scale(self, value: str) -> tuple[tuple[str, str], str] | None:
        """((op, the one-element tensor), the scaled operand) when ``value`` is a ``mul`` by
        (or ``div`` by) a one-element tensor from outside the group, else None."""
        node = self._inner(value, ("mul", "div"))
        if node is None:
            return None
        types = self.graph.types
        outside = [k for k, v in enumerate(node.inputs) if v not in self.producer and types[v].size == 1]
        if not outside or types[node.outputs[0]].shape != types[node.inputs[1 - outside[-1]]].shape \
                or (node.op == "div" and outside[-1] != 1):
            self.used.discard(node.name)
            return None
        k = outside[-1]
        return (node.op, node.inputs[k]), node.inputs[1 - k]


def _rebatched(view: View, own: tuple[int, ...], batch, left: bool, op: str) -> ScoreStep | None:
    """The step of a mask ``view`` over the batch dims ``own`` of a reshaped scores tensor
    as strides over the output's ``batch`` dims: the reshapes kept each row whole, so when
    both list the same extents apart from 1s, the k-th dim above 1 of one is that of the
    other; any other regrouping (dims merged or split) gives None."""
    kept = [(extent, stride) for extent, stride in zip(own, view.batch) if extent != 1]
    targets = [k for k, extent in enumerate(batch) if extent != 1]
    if [extent for extent, _ in kept] != [batch[k] for k in targets]:
        return None
    strides = [0] * len(batch)
    for (_, stride), k in zip(kept, targets):
        strides[k] = stride
    return ScoreStep(op, View(view.value, tuple(strides), view.rows, view.cols), left)


# ----- printing --------------------------------------------------------------------------


def attention_function(kernel: AttentionKernel, label: str, *, openmp: bool = False) -> CFunction:
    """The kernel's C function (it allocates its workspace, so it takes the error record)."""
    names = {value: f"p{k}" for k, value in enumerate(kernel.values)}
    decls = [f"{'const ' if a.role == 'input' else ''}{CTYPES[a.dtype]} *restrict p{k}"
             for k, a in enumerate(kernel.params)]
    params = decls + ["int64_t *restrict fl_err"]
    # named by the hash of its text under a stand-in name, then printed once more under its own
    stand_in = _source(kernel, names, params, openmp, "@NAME@")
    name = f"fl_a_{hashlib.sha256(stand_in.encode()).hexdigest()[:16]}"
    comment = f"/* {label}: {kernel.detail} as the attention template, {len(kernel.steps)} score step(s) */\n"
    return CFunction(name, comment + _source(kernel, names, params, openmp, name), list(kernel.params), 1, fallible=True,
                     vector_code=True)


def _offset(view: View, rows: str = "", cols: str = "") -> str:
    """The element offset of ``view`` at the batch indices b0, b1, ... and, when named, the
    row and column indices ``rows`` and ``cols``."""
    terms = [f"b{k} * {s}L" for k, s in enumerate(view.batch) if s]
    for index, stride in ((rows, view.rows), (cols, view.cols)):
        if index and stride:
            terms.append(f"{index} * {stride}L")
    return " + ".join(terms) or "0"


def _score_expression(kernel: AttentionKernel, names: dict[str, str], row: str) -> str:
    """The scores element ``srow[j]`` of row ``row`` through the steps, in the group's order."""
    x = "srow[j]"
    for step in kernel.steps:
        other = f"{names[step.view.value]}[{_offset(step.view, row, 'j')}]" if step.op in ("add", "where") \
            else f"{names[step.view.value]}[0]"
        if step.op == "where":
            x = f"({other} ? {names[step.fill or '']}[0] : {x})"
            continue
        sign = {"add": "+", "mul": "*", "div": "/"}[step.op]
        x = f"({other} {sign} {x})" if step.left else f"({x} {sign} {other})"
    return x


def _scaled(element: str, view: View, names: dict[str, str]) -> str:
    """``element`` of ``view`` as the group computes it: times (or over) its scale."""
    if view.scale is None:
        return element
    op, tensor = view.scale
    return f"({element} {'*' if op == 'mul' else '/'} {names[tensor]}[0])"


#: below this, exp's result is subnormal (exp(x) < 2^-126 for x < -126 ln 2)
SUBNORMAL_EXP_BELOW = -87.33654475


def _exp_nonpositive_c(name: str) -> str:
    """C of ``name``, a static exp: ``fl_expf`` (its reduction and polynomial, read from
    its text) for the arguments a softmax row passes, x - max in [-87.34, 0] or NaN (below,
    :func:`_flushed_exp` gives 0 without it). There 2^k is a normal float, so the two
    clamps and the split of 2^k into two factors go and the results keep every bit
    (checked on every float32 of the range): 16 instructions a vector fewer, about a
    quarter of UNet's 1024-key attention."""
    body = FAST_MATH_C.split("static inline float fl_expf(float x) {\n", 1)[1].split("\n")
    start = next(k for k, line in enumerate(body) if line.strip().startswith("t.f ="))
    stop = next(k for k, line in enumerate(body) if line.strip().startswith("int32_t n ="))
    return (f"static inline float {name}(float x) {{\n"
            "  union { float f; int32_t i; } v = {x}, t, s;\n" + "\n".join(body[start:stop]) + "\n"
            "  s.i = (t.i - 0x4B400000 + 127) << 23;\n"
            "  return x != x ? x : p * r * s.f + s.f;\n}\n")


def _flushed_exp(x: str, target: str, exp: str) -> str:
    """C setting ``target`` to ``fl_expf(x)`` (by the kernel's ``exp``, for x <= 0 or NaN:
    see :func:`_exp_nonpositive_c`), or to 0 where that is subnormal: the
    reference keeps those (at most 2^-126 each, so an output moves by less than 2^-126 times
    V's largest element), but each costs a microcode assist in the exp and again in P.V.
    Swin's shifted-window mask adds -100 to a third of the scores: 4x the kernel's time.
    The exp's argument is clamped too, so that the discarded lane computes no subnormal."""
    low = f"{SUBNORMAL_EXP_BELOW!r}f"
    return f"{target} = {x} < {low} ? 0.0f : {exp}({x} < {low} ? 0.0f : {x});"


def _masked_row(kernel: AttentionKernel, names: dict[str, str], lay: _Layout) -> str:
    """C, after a row's max ``top``: a row whose scores are all -inf (its max is -inf, but
    so it is when the rest are NaN, which the guard does not replace) takes the guard's
    value throughout and skips the softmax; its padding (-inf on a long row) is zeroed, as
    a narrow V's P.V reads it."""
    if kernel.masked_row_to is None:
        return ""
    return f"""                if (top == -INFINITY) {{
                    int live = 0;
                    for (long j = 0; j < {kernel.n}L; j++) live |= srow[j] != -INFINITY;
                    if (!live) {{
                        for (long j = 0; j < {kernel.n}L; j++) e[j] = {names[kernel.masked_row_to]}[0];
                        for (long j = {kernel.n}L; j < {lay.np}L; j++) e[j] = 0.0f;
                        continue;
                    }}
                }}
"""


def _save_probabilities(kernel: AttentionKernel, names: dict[str, str]) -> str:
    """C writing the block's probability rows to the saved output (row-major, the scores'
    shape), or nothing."""
    k, saved = kernel, kernel.saved
    if saved is None:
        return ""
    return f"""            for (long r = 0; r < rows; r++)
                for (long j = 0; j < {k.n}L; j++)
                    {names[saved]}[t * {k.m * k.n}L + (i + r) * {k.n}L + j] = sb[r * {_layout(k, host()).np}L + j];
"""


def _padded(count: int, vl: int) -> int:
    return -(-count // vl) * vl


def _micro(name: str, rows: int, depth: int, a_rows: int, a_cols: int, ldb: int, ldo: int, width: int, vl: int,
           span: int = 1) -> str:
    """``static`` C computing ``rows`` rows of ``out = a . b`` over ``width`` columns (a
    multiple of ``vl``): ``a`` strided (``a_rows``, ``a_cols``), ``b`` a packed panel of
    ``depth`` rows of ``ldb`` floats, ``out`` rows of ``ldo``. ``span`` vectors of each row
    (one for the last vector of an odd count) are accumulated in registers over the whole
    depth, in order (as the loop nest sums), so each panel vector loaded serves every row
    and each broadcast of ``a`` serves ``span`` vectors (with one, 9 loads fed 8 FMAs: the
    loads set the pace)."""
    paired = width // (span * vl) * span * vl
    steps = [(0, paired, span)] if paired else []
    if paired < width:
        steps.append((paired, width, 1))
    body = "".join(_micro_columns(rows, depth, a_rows, a_cols, ldb, ldo, vl, *step) for step in steps)
    return f"""static inline void {name}(const float *restrict a, const float *restrict b, float *restrict out) {{
    const fl_vf{vl} zero = {{0}};
{body}}}
"""


def _micro_columns(rows: int, depth: int, a_rows: int, a_cols: int, ldb: int, ldo: int, vl: int,
                   start: int, stop: int, span: int) -> str:
    """C of :func:`_micro`'s loop over the columns ``[start, stop)``, ``span`` vectors a step."""
    vf, vfu = f"fl_vf{vl}", f"fl_vfu{vl}"
    cols = range(span)
    acc = "\n".join(f"        {vf} acc{r}_{s} = zero;" for r in range(rows) for s in cols)
    panel = "\n".join(f"            const {vf} b{s} = *(const {vfu} *)(b + c * {ldb}L + j + {s * vl}L);" for s in cols)
    update = "\n".join(f"            {{ const float x = a[{r * a_rows}L + c * {a_cols}L]; "
                       + " ".join(f"acc{r}_{s} += x * b{s};" for s in cols) + " }" for r in range(rows))
    store = "\n".join(f"        *({vfu} *)(out + {r * ldo}L + j + {s * vl}L) = acc{r}_{s};"
                      for r in range(rows) for s in cols)
    return f"""    for (long j = {start}L; j < {stop}L; j += {span * vl}) {{
{acc}
        for (long c = 0; c < {depth}L; c++) {{
{panel}
{update}
        }}
{store}
    }}
"""


def _span(lay: "_Layout", registers: int) -> int:
    """Vectors per row a micro-kernel step accumulates: 2 where the registers hold a
    block's rows x 2 accumulators beside the panel vectors and a broadcast, else 1."""
    return 2 if 2 * lay.rows + 4 <= registers else 1


@dataclass(frozen=True)
class _Layout:
    """The workspace of one thread, in floats: K^T packed ``[d][np]``, V packed (``[e][np]``
    when narrow, ``[n][ep]`` when wide), the scores of a row block ``[rows][np]``, for a
    wide V the block's output rows ``[rows][ep]``, and for a scaled Q the block's rows
    scaled ``[rows][d]``."""

    vl: int
    rows: int
    np: int
    ep: int
    narrow_v: bool
    kernel: AttentionKernel

    @property
    def panel_v(self) -> int:
        k = self.kernel
        return k.e * self.np if self.narrow_v else k.n * self.ep

    @property
    def per_thread(self) -> int:
        k = self.kernel
        return k.d * self.np + self.panel_v + self.rows * self.np + (0 if self.narrow_v else self.rows * self.ep) \
            + self.q_block

    @property
    def k_in_place(self) -> bool:
        """Whether K^T already lies as its packed panel (rows of ``np`` floats, no scale):
        the GEMM before the kernel wrote it so, and the product reads it where it is."""
        kt = self.kernel.kt
        return kt.scale is None and kt.cols == 1 and kt.rows == self.np == self.kernel.n

    @property
    def v_in_place(self) -> bool:
        """Whether a wide V already lies as its packed panel (rows of ``ep`` floats)."""
        v = self.kernel.v
        return not self.narrow_v and v.cols == 1 and v.rows == self.ep == self.kernel.e

    #: P.V of a narrow V takes its rows in pairs (see :func:`_narrow_weighted`)
    pair_narrow_rows: bool = False

    @property
    def q_block(self) -> int:
        return self.rows * self.kernel.d if self.kernel.q.scale else 0


def _layout(kernel: AttentionKernel, machine: Machine) -> _Layout:
    vl = machine.vector_floats
    # one accumulator vector a row: 8 rows leave room for the panel vector and the
    # broadcasts in 32 registers, 4 rows in 16
    rows = 8 if machine.vector_registers >= 32 else 4
    narrow = kernel.e < NARROW_HEAD
    # a pair of rows: a vector accumulator a row and output column of a pass, and room for
    # the probabilities and a V vector
    pair = machine.vector_registers >= 2 * NARROW_COLUMNS_PER_PASS + 4
    return _Layout(vl, rows, _padded(kernel.n, vl), _padded(kernel.e, vl), narrow, kernel, pair)


#: output columns of a narrow V summed in one pass over a row's probabilities, each in a
#: vector accumulator of its own: independent sums keep both FMA pipes busy (one running
#: sum a column waited on each FMA's latency: UNet's 1024 keys at head dim 8, 3x the time)
NARROW_COLUMNS_PER_PASS = 8


def _zero_padding(n: int, np_: int) -> str:
    """C zeroing a probability row's padding ``[n, np)``, so that the narrow P.V runs over
    whole vectors (the padded K^T columns score 0, or NaN for a non-finite Q row)."""
    return f"                for (long j = {n}L; j < {np_}L; j++) e[j] = 0.0f;\n" if np_ > n else ""


def _narrow_weighted(k: AttentionKernel, lay: _Layout, o_view: View) -> str:
    """C of P.V for a narrow V (packed ``[e][np]``): the rows in pairs where 32 vector
    registers hold a pair's accumulators (each V vector loaded serves both rows: one row
    at a time took 9 loads for 8 FMAs), then one at a time; per row group, the output
    columns in passes of :data:`NARROW_COLUMNS_PER_PASS`, each pass one sweep over the
    rows' probabilities with a vector accumulator a row and column, the accumulators' lanes
    then summed in a tree that takes them all at once (:func:`_lane_sums`)."""
    pairs = ""
    if lay.rows > 1 and lay.pair_narrow_rows:
        pairs = f"""                for (; r + 2 <= rows; r += 2) {{
{_narrow_rows(k, lay, o_view, 2)}                }}
"""
    return f"""            {{
                long r = 0;
{pairs}                for (; r < rows; r++) {{
{_narrow_rows(k, lay, o_view, 1)}                }}
            }}
"""


def _narrow_rows(k: AttentionKernel, lay: _Layout, o_view: View, count: int) -> str:
    """C of :func:`_narrow_weighted`'s body for ``count`` rows from row ``r`` of the block."""
    vf, vfu, vl, np_ = f"fl_vf{lay.vl}", f"fl_vfu{lay.vl}", lay.vl, lay.np
    rows = range(count)
    lines = [f"                    const float *restrict e{q} = sb + (r + {q}) * {np_}L;\n"
             f"                    float *restrict orow{q} = ob + (i + r + {q}) * {o_view.rows}L;\n" for q in rows]
    for first in range(0, k.e, NARROW_COLUMNS_PER_PASS):
        columns = range(first, min(k.e, first + NARROW_COLUMNS_PER_PASS))
        accumulators = [f"a{q}_{c}" for q in rows for c in columns]
        zero = ", ".join(f"{a} = ({vf}){{0}}" for a in accumulators)
        loads = " ".join(f"const {vf} p{q} = *(const {vfu} *)(e{q} + j);" for q in rows)
        update = " ".join(f"{{ const {vf} v = *(const {vfu} *)(vp + {c * np_}L + j); "
                          + " ".join(f"a{q}_{c} += p{q} * v;" for q in rows) + " }" for c in columns)
        sums, statements = _lane_sums(accumulators, vl)
        store = " ".join(f"orow{q}[{c * o_view.cols}L] = {sums[q * len(columns) + c - first]};"
                         for q in rows for c in columns)
        lines.append(f"""                    {{
                        {vf} {zero};
                        for (long j = 0; j < {np_}L; j += {vl}) {{
                            {loads}
                            {update}
                        }}
                        {statements}
                        {store}
                    }}
""")
    return "".join(lines)


def _lane_sums(vectors: list[str], vl: int) -> tuple[list[str], str]:
    """(C expressions of each vector's sum of lanes, the C statements computing them): the
    vectors (zeros added up to a power of two) paired level by level, each pair's halves
    added into one vector holding both (lanes ``[0, vl/2)`` from the first, the rest from
    the second), so a level halves the vectors and their partial sums alike. One lane at a
    time, a UNet head's 8 columns were 8 chains of 16 dependent adds a row: a third of its
    1024-key attention."""
    count = 1 << (len(vectors) - 1).bit_length()
    level = list(vectors) + [f"(fl_vf{vl}){{0}}"] * (count - len(vectors))
    lanes, groups, lines, fresh = vl, 1, [], 0
    while lanes > 1:
        if len(level) % 2:
            level.append(f"(fl_vf{vl}){{0}}")
        half = lanes // 2
        low = [g * lanes + i for g in range(groups) for i in range(half)]
        low += [vl + x for x in low]
        high = [x + half for x in low]
        pairs = []
        for x, y in zip(level[::2], level[1::2]):
            name = f"s{fresh}"
            fresh += 1
            lines.append(f"const fl_vf{vl} {name} = __builtin_shuffle({x}, {y}, (fl_vi{vl}){{{', '.join(map(str, low))}}})"
                         f" + __builtin_shuffle({x}, {y}, (fl_vi{vl}){{{', '.join(map(str, high))}}});")
            pairs.append(name)
        level, lanes, groups = pairs, half, groups * 2
    # each remaining vector holds ``vl`` sums in its lanes, in the vectors' order
    sums = [f"{level[c // vl]}[{c % vl}]" for c in range(len(vectors))]
    return sums, " ".join(lines)


#: vector accumulators of a row's max and sum: independent chains, so that the passes run
#: at the loads' pace, not at one max or add's latency a vector (one chain each, at 256-bit
#: vectors, was most of UNet's 1024-key attention's softmax)
ROW_ACCUMULATORS = 4


def _softmax_row(k: AttentionKernel, names: dict[str, str], lay: _Layout, probability: str, exp: str) -> str:
    """C of one score row's softmax in place (``srow``, ``np`` floats) in separate passes:
    the score steps, the padding set to -inf (so that whole vectors pass the max and exp to
    0 for the sum), the max and the sum as explicit vectors in :data:`ROW_ACCUMULATORS`
    chains, the flushed exp, the probabilities; then for a narrow V the padding zeroed.
    Short rows too: fused loops over the keys (one pass fewer) ran their last partial
    vector as scalar code, GCC's ``omp simd`` remainder: 2.1x the kernel's time at 16 keys
    (a whole vector, the remainder loop's overhead), 1.2x at UNet's 77, equal at Swin's 49."""
    vl, np_ = lay.vl, lay.np
    simd = f"#pragma omp simd simdlen({vl})"
    steps = ""
    if k.steps:
        steps = f"""                {simd}
                for (long j = 0; j < {k.n}L; j++) srow[j] = {_score_expression(k, names, "(i + r)")};
"""
    pad = f"                for (long j = {k.n}L; j < {np_}L; j++) srow[j] = -INFINITY;\n" if np_ > k.n else ""
    # GCC's C has no ?: on vectors: the max selects on the comparison's bits (a NaN never
    # wins, as in the scalar form; it makes its exp, hence the sum, NaN)
    top = _row_reduction(lay, "srow", "top", "-INFINITY", "{a} = ({v})((({m}){x} & ({x} > {a})) | "
                         "(({m}){a} & ~({x} > {a})))", "{a} = {x} > {a} ? {x} : {a}")
    total = _row_reduction(lay, "e", "total", "0.0f", "{a} += {x}", "{a} += {x}")
    return f"""{steps}{pad}{top}{_masked_row(k, names, lay)}                {simd}
                for (long j = 0; j < {np_}L; j++) {{
                    const float d = srow[j] - top;
                    {_flushed_exp("d", "e[j]", exp)}
                }}
{total}                const float r = 1.0f / total;
                (void)r;
                {simd}
                for (long j = 0; j < {k.n}L; j++) e[j] = {probability};
{_zero_padding(k.n, np_) if lay.narrow_v else ""}"""


def _row_reduction(lay: _Layout, row: str, result: str, start: str, vector_step: str, scalar_step: str) -> str:
    """C declaring ``float result``: ``row``'s ``np`` floats reduced, vector ``t`` into
    accumulator ``t % ROW_ACCUMULATORS``, then the accumulators' lanes in a tree (each
    step the vector and itself rotated by half the lanes left: a lane at a time was one
    chain of ``vl`` dependent steps, for max and sum together about a third of a 128-key
    row's softmax). ``vector_step``/``scalar_step``: statements with ``{a}`` (the
    accumulator), ``{x}`` (the element), ``{m}`` and ``{v}`` (the vectors' integer and
    float types)."""
    vf, vfu, vl = f"fl_vf{lay.vl}", f"fl_vfu{lay.vl}", lay.vl
    count = min(ROW_ACCUMULATORS, lay.np // vl)
    accs = [f"{result}{a}" for a in range(count)]
    mask = f"fl_vi{vl}"
    steps = [vector_step.format(a=accs[t % count], x=f"(*(const {vfu} *)({row} + {t * vl}L))", m=mask, v=vf)
             + ";" for t in range(lay.np // vl)]
    merge = " ".join(vector_step.format(a=accs[0], x=other, m=mask, v=vf) + ";" for other in accs[1:])
    tree = []
    half = vl // 2
    while half:
        rotation = ", ".join(str((lane + half) % vl) for lane in range(vl))
        tree.append(f"{{ const {vf} h = __builtin_shuffle({accs[0]}, ({mask}){{{rotation}}}); "
                    + vector_step.format(a=accs[0], x="h", m=mask, v=vf) + "; }")
        half //= 2
    lanes = scalar_step.format(a=result, x=f"{accs[0]}[0]")
    return f"""                float {result} = {start};
                {{
                    {vf} {", ".join(f"{a} = ({vf}){{0}} + {start}" for a in accs)};
                    {" ".join(steps)}
                    {merge}
                    {" ".join(tree)}
                    {lanes};
                }}
"""


def _source(kernel: AttentionKernel, names: dict[str, str], decls: list[str], openmp: bool, name: str) -> str:
    k = kernel
    lay = _layout(k, host())
    vl, np_, ep = lay.vl, lay.np, lay.ep
    outer = math.prod(k.batch)
    q, kt, v = (names[x.value] for x in (k.q, k.kt, k.v))
    out = names[k.values[-1]]
    # the batch index t as one index per batch dim, row-major over the output's batch dims
    unflatten = [f"const long b{d} = (t / {math.prod(k.batch[d + 1:])}L) % {k.batch[d]}L;" for d in range(len(k.batch))]
    o_view = k.o
    team = "omp_get_max_threads()" if openmp else "1"
    me = "omp_get_thread_num()" if openmp else "0"
    # threads share the (batch index, row block) pairs in contiguous ranges: each packs a
    # batch index's panels once in its range, and a batch of one head still splits
    parallel = "    #pragma omp parallel\n" if openmp else ""
    share = "        #pragma omp for schedule(static)\n" if openmp else ""
    blocks = -(-k.m // lay.rows)
    probability = "e[j] * r" if k.reciprocal else "e[j] / total"
    if k.nan_to is not None:  # only NaN differs from itself (no -ffast-math)
        probability = f"({probability}) != ({probability}) ? {names[k.nan_to]}[0] : ({probability})"
    # a scaled Q is read from its block scaled once into the workspace (as the group
    # rounds the scaled elements), else in place through its strides
    q_rows, q_cols = (k.d, 1) if k.q.scale else (k.q.rows, k.q.cols)
    registers = host().vector_registers
    micros = "".join(_micro(f"{name}_qk{r}", r, k.d, q_rows, q_cols, np_, np_, np_, vl, _span(lay, registers))
                     for r in {lay.rows, 1})
    if lay.narrow_v:
        pack_v = f"""        for (long j = 0; j < {np_}L; j++)
            for (long c = 0; c < {k.e}L; c++) vp[c * {np_}L + j] = j < {k.n}L ? vb[j * {k.v.rows}L + c * {k.v.cols}L] : 0.0f;
"""
        weighted = _narrow_weighted(k, lay, o_view)
    else:
        # rows of whole vectors, one after the other: the product goes straight to the output
        direct = o_view.cols == 1 and ep == k.e
        target, ldo = ("ob + i * " + f"{o_view.rows}L", o_view.rows) if direct else ("ob_rows", ep)
        micros += "".join(_micro(f"{name}_pv{r}", r, k.n, np_, 1, ep, ldo, ep, vl, _span(lay, registers))
                          for r in {lay.rows, 1})
        pack_v = "" if lay.v_in_place else f"""        for (long j = 0; j < {k.n}L; j++)
            for (long c = 0; c < {ep}L; c++) vp[j * {ep}L + c] = c < {k.e}L ? vb[j * {k.v.rows}L + c * {k.v.cols}L] : 0.0f;
"""
        weighted = f"""            if (rows == {lay.rows}L) {name}_pv{lay.rows}(sb, vpan, {target});
            else for (long r = 0; r < rows; r++) {name}_pv1(sb + r * {np_}L, vpan, {target} + r * {ldo}L);
"""
        if not direct:
            weighted += f"""            for (long r = 0; r < rows; r++)
                for (long c = 0; c < {k.e}L; c++) ob[(i + r) * {o_view.rows}L + c * {o_view.cols}L] = ob_rows[r * {ep}L + c];
"""
    pack_k = "" if lay.k_in_place else f"""        for (long c = 0; c < {k.d}L; c++)
            for (long j = 0; j < {np_}L; j++) kp[c * {np_}L + j] = j < {k.n}L ? {_scaled(f"kb[c * {k.kt.rows}L + j * {k.kt.cols}L]", k.kt, names)} : 0.0f;
"""
    q_block, scale_q = f"qb + i * {k.q.rows}L", ""
    if k.q.scale:  # the block's rows scaled into qs
        q_block = "qs"
        scale_q = f"""            for (long r = 0; r < rows; r++)
                for (long c = 0; c < {k.d}L; c++)
                    qs[r * {k.d}L + c] = {_scaled(f"qb[(i + r) * {k.q.rows}L + c * {k.q.cols}L]", k.q, names)};
"""
    declare = "int omp_get_max_threads(void);\nint omp_get_thread_num(void);\n" if openmp else ""
    nbytes = f"(size_t){lay.per_thread}L * sizeof(float) * (size_t)team"
    lanes = f"typedef int fl_vi{vl} __attribute__((vector_size({4 * vl})));\n"
    return f"""{vector_types(vl)}{lanes}{declare}{_exp_nonpositive_c(f"{name}_exp")}{micros}void {name}({', '.join(decls)}) {{
    const long team = {team};
    float *work = (float *)fl_alloc({nbytes});
    if (!work) {{ fl_err[0] = {ALLOC}; fl_err[2] = (int64_t)({nbytes}); return; }}
{parallel}    {{
        float *restrict kp = work + (long)({me}) * {lay.per_thread}L;
        float *restrict vp = kp + {k.d * np_}L;
        float *restrict sb = vp + {lay.panel_v}L;
        float *restrict ob_rows = sb + {lay.rows * np_}L;
        float *restrict qs = ob_rows + {0 if lay.narrow_v else lay.rows * ep}L;
        long packed = -1;  /* the batch index whose panels kp and vp hold */
        (void)ob_rows; (void)qs;
{share}        for (long u = 0; u < {outer * blocks}L; u++) {{
        const long t = u / {blocks}L, i = (u % {blocks}L) * {lay.rows}L;
        {' '.join(unflatten)}
        const float *restrict qb = {q} + {_offset(k.q)};
        const float *restrict kb = {kt} + {_offset(k.kt)};
        const float *restrict vb = {v} + {_offset(k.v)};
        float *restrict ob = {out} + {_offset(o_view)};
        const float *restrict kpan = {"kb" if lay.k_in_place else "kp"}, *restrict vpan = {"vb" if lay.v_in_place else "vp"};
        (void)kpan; (void)vpan;
        if (t != packed) {{
{pack_k}{pack_v}        packed = t;
        }}
        {{
            const long rows = {k.m}L - i < {lay.rows}L ? {k.m}L - i : {lay.rows}L;
{scale_q}            const float *restrict qrows = {q_block};
            if (rows == {lay.rows}L) {name}_qk{lay.rows}(qrows, kpan, sb);
            else for (long r = 0; r < rows; r++) {name}_qk1(qrows + r * {q_rows}L, kpan, sb + r * {np_}L);
            for (long r = 0; r < rows; r++) {{
                float *restrict srow = sb + r * {np_}L, *restrict e = srow;
{_softmax_row(k, names, lay, probability, f"{name}_exp")}            }}
{_save_probabilities(k, names)}{weighted}        }}
        }}
    }}
    free(work);
}}
"""


__all__ = ["MAX_KEYS", "AttentionKernel", "attention_applies", "attention_function", "plan_attention"]
