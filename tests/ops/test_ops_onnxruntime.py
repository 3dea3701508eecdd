"""Every op's NumPy reference against onnxruntime running the equivalent ONNX node."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from ops_cases import CASES, Case, normalized, onnx_form

from fusionlang.ir.types import TensorType
from fusionlang.ops import REGISTRY

ort = pytest.importorskip("onnxruntime")

OPSET = 20  # Gelu needs 20; AveragePool dilations and Pad 'wrap' need 19


def _model(case: Case, attrs: dict, arrays: list) -> tuple[bytes, dict]:
    form = onnx_form(case.op, attrs, arrays)
    feeds, inputs, inits, names = {}, [], [], []
    for k, array in enumerate(arrays):
        if array is None:
            names.append("")
            continue
        name = f"in{k}"
        names.append(name)
        feeds[name] = array
        inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype), array.shape))
    for k, array in enumerate(form.extra):
        if array is None:
            names.append("")
            continue
        name = f"extra{k}"
        names.append(name)
        inits.append(numpy_helper.from_array(np.asarray(array), name))
    while names and not names[-1]:
        names.pop()
    outs = [f"out{k}" for k in range(form.outputs)]
    if form.graph is not None:
        nodes = form.graph(names, outs[0])
    else:
        attrs = {k: numpy_helper.from_array(v) if isinstance(v, np.ndarray) else v for k, v in form.attrs.items()}
        nodes = [helper.make_node(form.op_type, names, outs, **attrs)]
        for k, op_type in enumerate(form.then):
            previous, outs[0] = outs[0], f"then{k}"
            nodes.append(helper.make_node(op_type, [previous], [outs[0]]))
    graph = helper.make_graph(nodes, "case", inputs, [onnx.ValueInfoProto(name=o) for o in outs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", form.opset or OPSET)])
    model.ir_version = 10
    return model.SerializeToString(), feeds


def _onnxruntime(case: Case, attrs: dict, arrays: list) -> list[np.ndarray]:
    if case.oracle != "onnxruntime":  # (an op with no ONNX form has only its hand-written oracle)
        return _HAND_ORACLES[case.oracle](attrs, arrays)
    model, feeds = _model(case, attrs, arrays)
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _lrn_loop(attrs: dict, arrays: list) -> list[np.ndarray]:
    """The ONNX LRN formula written out channel by channel."""
    x = arrays[0]
    size, channels = attrs["size"], x.shape[1]
    out = np.empty_like(x)
    for c in range(channels):
        lo, hi = max(0, c - (size - 1) // 2), min(channels - 1, c + math.ceil((size - 1) / 2))
        square_sum = np.sum(x[:, lo:hi + 1] ** 2, axis=1)
        out[:, c] = x[:, c] / (attrs["bias"] + attrs["alpha"] / size * square_sum) ** attrs["beta"]
    return [out]


def _scatter_pick_loop(attrs: dict, arrays: list) -> list[np.ndarray]:
    """Element by element: the update at the position, where there is one, else the data."""
    data, updates, position = arrays
    axis = attrs["axis"] % data.ndim
    out = data.copy()
    for here in np.ndindex(data.shape):
        if position[here] >= 0:
            out[here] = updates[here[:axis] + (position[here],) + here[axis + 1:]]
    return [out]


def _onnx_grid_sample():
    from onnx.reference.ops.op_grid_sample import GridSample

    return GridSample.__new__(GridSample)  # its helpers only (no node to build it from)


def _grid_coordinates_loop(attrs: dict, arrays: list) -> list[np.ndarray]:
    """Each coordinate through the steps of onnx's reference GridSample._run."""
    gs, grid, sizes = _onnx_grid_sample(), arrays[0], attrs["sizes"]
    align, rank = bool(attrs["align_corners"]), len(sizes)
    border = gs._prepare_border(sizes, align_corners=align)
    out = np.empty_like(grid)
    for here in np.ndindex(grid.shape[:-1]):
        for axis, size in enumerate(sizes):
            v = gs._gs_denormalize(grid[here + (rank - 1 - axis,)], size, align)
            v = np.rint(v) if attrs["mode"] == "nearest" else v
            low, high = border[axis], border[axis + rank]
            if (v < low or v > high) and attrs["padding_mode"] == "border":
                v = gs._clamp(v, 0, size - 1)
            elif (v < low or v > high) and attrs["padding_mode"] == "reflection":
                v = gs._gs_reflect(v, low, high)
            out[here + (axis,)] = v
    return [out]


def _grid_taps_loop(attrs: dict, arrays: list) -> list[np.ndarray]:
    """The taps of each coordinate as onnx's reference interpolation reads them."""
    gs, coordinates, sizes = _onnx_grid_sample(), arrays[0], attrs["sizes"]
    rank, mode = len(sizes), attrs["mode"]
    border = gs._prepare_border(sizes, align_corners=bool(attrs["align_corners"]))
    count = {"nearest": 1, "linear": 2, "cubic": 4}[mode]
    cells = np.empty(coordinates.shape[:-1] + (rank, count), coordinates.dtype)
    weights = np.empty(cells.shape, coordinates.dtype)
    for here in np.ndindex(coordinates.shape[:-1]):
        for axis, size in enumerate(sizes):
            x = float(coordinates[here + (axis,)])
            first = int(x) if mode == "nearest" else int(np.floor(x)) - (mode == "cubic")
            coeffs = np.ones(1)
            if mode != "nearest":
                coeffs = np.empty(count)
                (gs._gs_get_linear_coeffs if mode == "linear" else gs._gs_get_cubic_coeffs)(x - np.floor(x), coeffs)
            for tap in range(count):
                i = first + tap
                if attrs["padding_mode"] == "zeros":
                    cell = i if 0 <= i < size else -1
                elif attrs["padding_mode"] == "border":
                    cell = gs._clamp(i, 0, size - 1)
                else:
                    cell = int(gs._gs_reflect(i, border[axis], border[axis + rank]))
                cells[here + (axis, tap)], weights[here + (axis, tap)] = cell, coeffs[tap]
    return [cells, weights]


def _gather_taps_loop(attrs: dict, arrays: list) -> list[np.ndarray]:
    x, cells, weights = arrays
    rank, count = x.ndim - 2, cells.shape[-1]
    out = np.zeros(x.shape[:2] + cells.shape[1:-2], np.float64)
    for n, c, *where in np.ndindex(out.shape):
        for taps in np.ndindex((count,) * rank):
            at = [cells[(n, *where, axis, t)] for axis, t in enumerate(taps)]
            if all(0 <= a < size for a, size in zip(at, x.shape[2:])):
                weight = np.prod([weights[(n, *where, axis, t)] for axis, t in enumerate(taps)])
                out[(n, c, *where)] += weight * x[(n, c, *at)]
    return [out.astype(x.dtype)]


def _onnx_rotary(attrs: dict, arrays: list) -> list[np.ndarray]:
    """onnx's reference RotaryEmbedding on x (B, S, H, D), cos and sin (B, S, 1, D/2)."""
    from onnx.reference.ops.op_rotary_embedding import rotary_embedding

    x, cos, sin = arrays
    heads_first = np.transpose(x, (0, 2, 1, 3))  # the 4-D layout ONNX takes
    out = rotary_embedding(heads_first, cos[:, :, 0], sin[:, :, 0], interleaved=attrs["interleaved"])
    return [np.transpose(out, (0, 2, 1, 3))]


def _onnx_attention(attrs: dict, arrays: list) -> list[np.ndarray]:
    """onnx's reference Attention with the bias as a float attn_mask: y, then the qk output
    of modes 0, 2 and 3."""
    from onnx.reference.ops.op_attention import _compute_attention

    def run(mode):
        return _compute_attention(*arrays[:3], attn_mask=arrays[3] if len(arrays) > 3 else None, scale=attrs["scale"],
                                  softcap=attrs["softcap"], qk_matmul_output_mode=mode)

    return [run(0)[0], run(0)[3], run(2)[3], run(3)[3]]


def _onnx_bitcast(attrs: dict, arrays: list) -> list[np.ndarray]:
    """onnx's reference BitCast (opset 26, which onnxruntime 1.32 lacks)."""
    from onnx.reference.ops.op_bitcast import BitCast

    return [BitCast.eval(arrays[0], to=helper.np_dtype_to_tensor_dtype(np.dtype(attrs["to"])))]


_HAND_ORACLES = {"lrn-loop": _lrn_loop, "onnx-rotary": _onnx_rotary, "onnx-attention": _onnx_attention,
                 "scatter-pick-loop": _scatter_pick_loop, "grid-coordinates-loop": _grid_coordinates_loop,
                 "grid-taps-loop": _grid_taps_loop, "gather-taps-loop": _gather_taps_loop,
                 "onnx-bitcast": _onnx_bitcast}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_reference_matches_onnxruntime(case: Case):
    attrs = normalized(case)
    arrays = case.arrays()
    present = arrays[:max((k + 1 for k, a in enumerate(arrays) if a is not None), default=0)]
    ours = REGISTRY.get(case.op).reference(present, attrs)
    theirs = _onnxruntime(case, attrs, arrays)
    inferred = REGISTRY.infer(case.op, "n", case.attrs, [None if a is None else TensorType.of(a) for a in present],
                              present)
    assert len(ours) == len(inferred)
    rtol, atol = case.tol
    for got, want, typ in zip(ours, theirs, inferred):
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        assert TensorType.of(got) == typ
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


def test_every_op_with_a_reference_has_an_onnxruntime_case():
    covered = {case.op for case in CASES}
    missing = [name for name in REGISTRY.names() if name not in covered]
    assert missing == []
