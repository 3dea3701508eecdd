"""Registry-level contract: docs, attribute kinds, flags, GraphBuilder and verify_graph on every op."""

from __future__ import annotations

import re

import numpy as np
import pytest
from ops_cases import CASES, Case

from fusionlang.errors import GraphError, ShapeError
from fusionlang.ir.types import TensorType
from fusionlang.ops import REGISTRY, GraphBuilder, OpCall, op_call, run, verify_graph
from fusionlang.ops.registry import ATTR_KINDS, REQUIRED, _canonical_attr

OPS = list(REGISTRY)
COMPOUND = {"batch_norm_train", "instance_norm", "layer_norm", "softmax", "log_softmax", "nll_loss",
            "group_norm", "mean_variance_norm", "lp_norm", "attention", "rms_norm", "rotary_embedding"}
REFERENCE_ONLY = {"shape", "constant_of_shape"}
ALWAYS_VIEWS = {"reshape", "flatten", "squeeze", "unsqueeze", "identity", "dropout"}


@pytest.mark.parametrize("opdef", OPS, ids=lambda o: o.name)
def test_op_is_documented_and_its_attributes_are_well_formed(opdef):
    assert opdef.doc.strip(), f"{opdef.name} has no doc"
    assert opdef.inputs and all(re.fullmatch(r"[a-z][a-z0-9_]*", name) for name in opdef.inputs)
    assert opdef.min_inputs <= len(opdef.inputs)
    assert opdef.num_outputs >= 1 and opdef.max_outputs >= opdef.num_outputs
    for name, attr in opdef.attrs.items():
        assert re.fullmatch(r"[a-z][a-z0-9_]*", name)
        assert attr.kind in ATTR_KINDS
        if attr.default is not REQUIRED and attr.default is not None:
            canonical = _canonical_attr(attr.kind, attr.default, name)
            assert np.array_equal(canonical, attr.default) if attr.kind == "tensor" else canonical == attr.default


def test_compound_ops_have_no_loop_form_and_the_rest_do():
    assert {op.name for op in OPS if op.compound} == COMPOUND
    assert {op.name for op in OPS if op.access is None} == COMPOUND | REFERENCE_ONLY


def test_only_relabeling_ops_are_views():
    x = TensorType((2, 3, 4))
    call = OpCall("any", "n", {}, [x])
    views = {op.name for op in OPS if not callable(op.view) and op.is_view(call)}
    assert views == ALWAYS_VIEWS
    assert {op.name for op in OPS if callable(op.view)} == {"transpose"}


@pytest.mark.parametrize("shape, perm, view", [((2, 3), (1, 0), False), ((1, 3), (1, 0), True),
                                               ((2, 1, 3), (1, 0, 2), True), ((2, 1, 3), (2, 1, 0), False)])
def test_transpose_is_a_view_only_when_it_moves_unit_axes(shape, perm, view):
    opdef, call = REGISTRY.call("transpose", "t", {"perm": perm}, [TensorType(shape)])
    assert opdef.is_view(call) is view


def _one_case_per_op() -> list[Case]:
    first = {}
    for case in CASES:
        first.setdefault(case.op, case)
    return list(first.values())


@pytest.mark.parametrize("case", _one_case_per_op(), ids=lambda c: c.op)
def test_graph_builder_builds_verifies_and_interprets_every_op(case):
    arrays = case.arrays()
    b = GraphBuilder(case.op)
    values = []
    for k, array in enumerate(arrays):
        # value-dependent shapes need constants; everything else is fed
        if case.op in ("constant_of_shape", "gather") and k > 0 or case.op == "constant_of_shape":
            values.append(b.constant(array))
        else:
            values.append(b.input(f"in{k}", array.shape, array.dtype))
    out = b.op(case.op, *values, name="node", **case.attrs)
    outs = out if isinstance(out, tuple) else (out,)
    b.output(*outs)
    graph = b.build()
    feeds = {f"in{k}": a for k, a in enumerate(arrays) if f"in{k}" in graph.inputs}
    with np.errstate(all="ignore"):
        got = run(graph, feeds)
        want = REGISTRY.get(case.op).reference(arrays, graph.nodes[0].attrs)
    assert len(outs) == len(want)
    for name, expected in zip(outs, want):
        np.testing.assert_array_equal(got[name], expected)
        assert TensorType.of(got[name]) == graph.types[name]
    call = op_call(graph, graph.nodes[0])
    assert call.out_types == [graph.types[o] for o in outs]


def test_split_gives_one_output_per_size():
    b = GraphBuilder()
    parts = b.split(b.input("x", (7, 2)), split=(3, 0, 4))
    assert [b.graph.types[p].shape for p in parts] == [(3, 2), (0, 2), (4, 2)]


def test_verify_graph_catches_a_wrong_recorded_type():
    b = GraphBuilder()
    y = b.matmul(b.input("a", (2, 3)), b.input("b", (3, 4)), name="mm")
    b.output(y)
    graph = b.build()
    graph.types[y] = TensorType((2, 5))
    with pytest.raises(GraphError, match=re.escape(f"node 'mm' (matmul): output {y!r} is recorded as f32[2,5] "
                                                   "but the op computes f32[2,4]")):
        verify_graph(graph)


def test_verify_graph_reruns_inference_with_constant_values():
    b = GraphBuilder()
    shape = b.constant(np.array([2, 3]))
    y = b.constant_of_shape(shape, name="fill", value=np.array([1.5], np.float32))
    b.output(y)
    graph = b.build()
    graph.constants[shape] = np.array([3, 2])
    with pytest.raises(GraphError, match=re.escape("recorded as f32[2,3] but the op computes f32[3,2]")):
        verify_graph(graph)


def test_interpreter_locates_a_bad_gather_index():
    b = GraphBuilder()
    y = b.gather(b.input("data", (5,)), b.input("idx", (2,), "int64"), name="g")
    b.output(y)
    graph = b.build()
    with pytest.raises(ShapeError, match=re.escape("node 'g' (gather): index 7 is out of range for axis 0 of size 5")):
        run(graph, {"data": np.zeros(5, np.float32), "idx": np.array([1, 7])})
