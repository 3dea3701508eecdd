"""IEEE special values through every elementwise and reduction op of the registry: the
compiled C, the reference interpreter and (where it has the op) onnxruntime agree.

NaN, +-inf, -0.0, the largest floats, the smallest normal and subnormal ones, and plain
numbers are drawn into the inputs of one graph that holds every op taking float tensors
(each op on its own inputs); the graph is fused with the apollo rules (compound ops are
opened as in a real run) and compiled once, so an example costs a run, not a compile.
NaN equals NaN, infinities must agree in sign, finite values agree to a tolerance.

Ops that accumulate (sums and products: reductions, matmul, conv, pools, the opened
compound ops) get the specials but no finite magnitude beyond 1e3 or below 1e-3 (zeros
stay): their float32 partial results overflow or underflow where the reference's double
ones do not, and which one does depends on the order, so neither answer is the right one.
Means divide each term first and take every value. Ops of more than two tensors (batch
norm) are tamed too: a product of three large factors overflows or not by the order it
is multiplied in, which sympy's canonical order does not keep. Sums compare to a tolerance
scaled by their largest term (cancellation). The scale and bias of a normalization are
finite: its deviation x - mean is 0, or a rounding error away from 0, by the order of the
float sum, and times an infinite scale that is NaN or +-inf.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusionlang
from fusionlang import reference
from fusionlang.errors import FuseError
from fusionlang.ir.types import TensorType
from fusionlang.ops import REGISTRY, GraphBuilder
from fusionlang.ops.checking import op_call

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "ops"))
from ops_cases import onnx_form  # noqa: E402

ROWS, COLS = 3, 4
FLT_MAX = float(np.finfo(np.float32).max)
SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, FLT_MAX, -FLT_MAX, 1e38, -3e38, float(np.finfo(np.float32).tiny),
            1e-45, -1e-45, 1e-40, 1.0, -1.0, 0.5, -2.5, 7.0]
#: tolerance on finite values (the C twin uses fast exp/erf/tanh; sums are reordered)
RTOL, ATOL = 2e-3, 1e-6


@dataclass
class Probe:
    """One op of the graph: its input shapes and attributes."""

    op: str
    shapes: list
    attrs: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.op}{self.attrs or ''}"


def _accepts(op: str, shapes, attrs) -> bool:
    try:
        REGISTRY.infer(op, "probe", attrs, [TensorType(s, "float32") for s in shapes], [None] * len(shapes))
    except FuseError:
        return False
    return True


def probes() -> list[Probe]:
    """Every op computing on float tensors with default attributes: n inputs of the full
    shape, or a full-shape input and per-column ones (scale, bias, statistics)."""
    found = []
    for opdef in REGISTRY:
        if opdef.access is None and not opdef.compound:
            continue
        arities = [2, 3] if opdef.variadic else range(1, 6)
        for n in arities:
            same = [(ROWS, COLS)] * n
            columns = [(ROWS, COLS)] + [(COLS,)] * (n - 1)
            shapes = next((s for s in (same, columns) if _accepts(opdef.name, s, {})), None)
            if shapes is not None:
                found.append(Probe(opdef.name, shapes))
                if opdef.name.startswith("reduce_"):
                    found.append(Probe(opdef.name, shapes, {"axes": [1]}))
                break
    return found


@lru_cache(maxsize=None)
def everything():
    """(graph, compiled, probes, output name of each probe)."""
    b = GraphBuilder("special_values")
    outputs = []
    all_probes = probes()
    for k, probe in enumerate(all_probes):
        ins = [b.input(f"p{k}_{j}", shape, "float32") for j, shape in enumerate(probe.shapes)]
        out = b.op(probe.op, *ins, **probe.attrs)
        out = out[0] if isinstance(out, tuple) else out
        b.output(out)
        outputs.append(out)
    graph = b.build()
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), target="c")
    return graph, compiled, all_probes, outputs


def test_the_graph_covers_every_elementwise_and_reduction_op():
    _, _, all_probes, _ = everything()
    covered = {p.op for p in all_probes}
    for name in ("sign", "max", "min", "pow", "less", "equal", "reduce_mean", "reduce_max", "reduce_prod",
                 "softmax", "log_softmax", "layer_norm", "sigmoid", "gelu"):
        assert name in covered


#: a few values drawn (specials, or any float32), spread over all the inputs by a drawn seed
special_values = st.lists(st.sampled_from(SPECIALS) | st.floats(width=32), min_size=4, max_size=24)
#: the range of finite nonzero magnitudes an accumulating op is fed
TAME = (1e-3, 1e3)


def accumulates(graph, node) -> bool:
    """Does ``node`` sum or multiply many terms (or is it opened into ops that do)?"""
    opdef = REGISTRY.get(node.op)
    if opdef.compound:
        return True
    stmts = opdef.access(op_call(graph, node))
    return any(s.reduce in ("sum", "prod") for s in stmts)


def tamed(graph, node) -> bool:
    """Is ``node`` fed tame magnitudes only (see the module docstring)?"""
    return (accumulates(graph, node) and node.op != "reduce_mean") or len(node.present_inputs()) > 2


def feeds_from(graph, values: list, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    pool = np.array(values, np.float32)
    tame = np.where(np.isfinite(pool) & (pool != 0), np.copysign(np.clip(np.abs(pool), *TAME), pool), pool)
    finite = np.where(np.isfinite(tame), tame, np.float32(1.0))
    feeds = {}
    for node in graph.nodes:
        chosen = tame if tamed(graph, node) else pool
        for k, name in enumerate(node.inputs):
            parameter = k > 0 and REGISTRY.get(node.op).compound
            feeds[name] = rng.choice(finite if parameter else chosen, graph.types[name].shape)
    return feeds


def assert_same_values(got: np.ndarray, want: np.ndarray, what: str, atol: float = ATOL) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, what
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan = np.isnan(w)
    assert np.array_equal(np.isnan(g), nan), f"{what}: NaN at {np.argwhere(np.isnan(g) != nan)[:3].tolist()}: " \
                                             f"got {got.ravel()[:8]}, want {want.ravel()[:8]}"
    inf = np.isinf(w)
    assert np.array_equal(np.isinf(g), inf) and np.array_equal(g[inf], w[inf]), \
        f"{what}: infinities differ: got {got.ravel()[:8]}, want {want.ravel()[:8]}"
    finite = ~(nan | inf)
    np.testing.assert_allclose(g[finite], w[finite], rtol=RTOL, atol=atol, err_msg=what)


@settings(max_examples=25, deadline=None)
@given(values=special_values, seed=st.integers(0, 2**32 - 1))
def test_compiled_c_matches_the_reference_on_special_values(values, seed):
    graph, compiled, all_probes, outputs = everything()
    feeds = feeds_from(graph, values, seed)
    with np.errstate(all="ignore"):
        want = reference.run(graph, feeds)
    got = compiled.run(feeds)
    for node in graph.nodes:
        inputs = [feeds[n] for n in node.inputs]
        out = node.outputs[0]
        assert_same_values(got[out], want[out], f"{node.op}{node.attrs} on {[a.ravel().tolist() for a in inputs]}",
                           tolerance(graph, node, inputs))


def tolerance(graph, node, inputs) -> float:
    """Absolute tolerance on a finite result: a sum's rounding scales with its largest term
    (and a normalization divides it by as little as sqrt(epsilon)); so does that of a
    formula of several tensors (onnxruntime folds batch norm into x * a + b)."""
    if not (accumulates(graph, node) or tamed(graph, node)):
        return ATOL
    finite = [np.abs(a[np.isfinite(a)]) for a in inputs]
    largest = max((float(f.max()) for f in finite if f.size), default=0.0)
    return 1e-3 * max(1.0, largest)


# ----- onnxruntime --------------------------------------------------------------------
def _ort_session(graph, node):
    """An onnxruntime session computing ``node`` as ONNX does, or None where ORT lacks it."""
    import onnx
    from onnx import helper, numpy_helper

    arrays = [np.zeros(graph.types[v].shape, np.float32) for v in node.inputs]
    try:
        form = onnx_form(node.op, node.attrs, arrays)
    except KeyError:
        return None
    names = [f"in{k}" for k in range(len(arrays))]
    inputs = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, a.shape) for n, a in zip(names, arrays)]
    inits = []
    for k, extra in enumerate(form.extra):
        names.append("" if extra is None else f"extra{k}")
        if extra is not None:
            inits.append(numpy_helper.from_array(np.asarray(extra), f"extra{k}"))
    while names and not names[-1]:
        names.pop()
    if form.graph is not None:
        nodes = form.graph(names, "out")
    else:
        attrs = {k: numpy_helper.from_array(v) if isinstance(v, np.ndarray) else v for k, v in form.attrs.items()}
        steps = [f"step{k}" for k in range(len(form.then))] + ["out"]
        nodes = [helper.make_node(form.op_type, names, [steps[0]], **attrs)]
        nodes += [helper.make_node(op_type, [a], [b]) for op_type, a, b in zip(form.then, steps, steps[1:])]
    model = helper.make_model(helper.make_graph(nodes, node.op, inputs, [onnx.ValueInfoProto(name="out")], inits),
                              opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 10
    try:
        return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - an op or attribute ORT does not implement
        return None


@lru_cache(maxsize=None)
def ort_sessions():
    graph = everything()[0]
    return {node.name: _ort_session(graph, node) for node in graph.nodes}


try:
    import onnxruntime as ort
except ImportError:  # pragma: no cover
    ort = None


def _terms(graph, node) -> int:
    t_in, t_out = graph.types[node.inputs[0]], graph.types[node.outputs[0]]
    return max(1, len(node.inputs), t_in.size // max(1, t_out.size))


#: absolute tolerance against onnxruntime (its sigmoid and tanh are approximations)
ORT_ATOL = 1e-5
#: where onnxruntime computes another answer on purpose or by a known quirk, and ours is
#: kept: op -> (it differs on these inputs, why)
ORT_DIFFERS = {
    "mean": (lambda g, n, xs: any(np.any(np.abs(x[np.isfinite(x)]) >= FLT_MAX / _terms(g, n)) for x in xs),
             "ORT adds the terms before dividing and overflows to inf; the mean itself is finite"),
    "reduce_max": (lambda g, n, xs: np.isnan(xs[0]).any(),
                   "ORT's ReduceMax drops NaN in some positions; ours propagates it, as np.max and Max do"),
    "batch_norm": (lambda g, n, xs: True,
                   "ORT folds the statistics into x * a + b, which gives inf - inf = NaN where the formula "
                   "gives +-inf, and cancels where it does not (tests/ops compares it on plain values)"),
    "clip": (lambda g, n, xs: np.isinf(xs[0]).any() and n.attrs["min"] == -np.inf and n.attrs["max"] == np.inf,
             "ORT's absent bounds are +-FLT_MAX (numeric_limits), so it clips +-inf; an unbounded clip keeps it"),
}
# the probe takes remainder's default fmod=0: for floats ONNX defines only fmod=1 before
# opset 28 and ORT refuses to run it (tests/ops compares fmod=1 with ORT)
ORT_DIFFERS["remainder"] = (lambda g, n, xs: not n.attrs.get("fmod", 0),
                            "ORT runs float Mod only with fmod=1 before opset 28")
ORT_DIFFERS["reduce_mean"] = ORT_DIFFERS["mean"]
ORT_DIFFERS["reduce_min"] = ORT_DIFFERS["reduce_max"]


@pytest.mark.skipif(ort is None, reason="onnxruntime is not installed")
@settings(max_examples=25, deadline=None)
@given(values=special_values, seed=st.integers(0, 2**32 - 1))
def test_reference_matches_onnxruntime_on_special_values(values, seed):
    graph = everything()[0]
    feeds = feeds_from(graph, values, seed)
    with np.errstate(all="ignore"):
        want = reference.run(graph, feeds, keep={n.outputs[0] for n in graph.nodes})
    for node in graph.nodes:
        session = ort_sessions()[node.name]
        if session is None:
            continue
        inputs = [feeds[n] for n in node.inputs]
        if node.op in ORT_DIFFERS and ORT_DIFFERS[node.op][0](graph, node, inputs):
            continue
        theirs = session.run(None, {f"in{k}": a for k, a in enumerate(inputs)})[0]
        assert_same_values(want[node.outputs[0]], theirs, f"{node.op}{node.attrs} on "
                           f"{[a.ravel().tolist() for a in inputs]}", max(ORT_ATOL, tolerance(graph, node, inputs)))
