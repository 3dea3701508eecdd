"""ONNX control flow resolved at import time: If inlines its chosen branch, Loop and Scan
unroll their bodies, Optional* read optionals whose presence import knows. Expected values
come from onnx.reference.ReferenceEvaluator, which runs the control flow itself."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import fusionlang
import fusionlang.onnx_backend as backend
from fusionlang.errors import ModelError, UnsupportedOpError
from fusionlang.frontend import from_onnx
from onnx_cases import F32, I64, make_model, random_array, run_fusionlang

BOOL = TensorProto.BOOL


def info(name, shape=None, elem_type=F32):
    return helper.make_tensor_value_info(name, elem_type, shape)


def body(nodes, inputs, outputs, name="body", initializers=()):
    return helper.make_graph(nodes, name, inputs, outputs, list(initializers))


def expected(model, feeds):
    return ReferenceEvaluator(model).run(None, feeds)


def assert_matches_reference(model, feeds):
    for got, want in zip(run_fusionlang(model, feeds), expected(model, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


# ----- If ---------------------------------------------------------------------------------
def if_model(cond_is_input=True, cond_from_tensor=False):
    """out = If(cond): then x * 2 (an outer value), else x + a branch initializer."""
    then_branch = body([helper.make_node("Add", ["x", "x"], ["t"])], [], [info("t")], "then")
    offset = onnx.numpy_helper.from_array(np.full([3], 5, np.float32), "offset")
    else_branch = body([helper.make_node("Add", ["x", "offset"], ["e"])], [], [info("e")], "else", [offset])
    nodes = [helper.make_node("If", ["cond"], ["out"], then_branch=then_branch, else_branch=else_branch)]
    inputs, inits = {"x": [3]}, {}
    if cond_from_tensor:
        nodes.insert(0, helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0))
        nodes.insert(1, helper.make_node("Greater", ["m", "zero"], ["cond"]))
        inits["zero"] = np.array(0, np.float32)
    elif cond_is_input:
        inputs["cond"] = ([], BOOL)
    else:
        inits["cond"] = np.array(False)
    return make_model(nodes, inputs, {"out": [3]}, 13, inits)


@pytest.mark.parametrize("cond", [True, False])
def test_if_on_a_fed_condition_specializes_on_it_and_inlines_that_branch(cond):
    model = if_model()
    rep = backend.prepare(model)
    assert isinstance(rep, backend.SpecializingRep)
    feeds = {"x": random_array([3]), "cond": np.array(cond)}
    (out,) = rep.run(feeds)
    np.testing.assert_allclose(out, expected(model, feeds)[0])


def test_if_on_a_constant_condition_leaves_no_control_flow():
    graph = from_onnx(if_model(cond_is_input=False))
    assert [node.op for node in graph.nodes if node.op != "identity"] == ["add"]  # one branch only
    assert_matches_reference(if_model(cond_is_input=False), {"x": random_array([3])})


def test_if_on_a_condition_computed_from_tensors_is_refused():
    with pytest.raises(UnsupportedOpError, match=r"If \(domain ai.onnx, opset 13\) is not supported in this form: "
                                                 r"a condition computed from tensors at run time"):
        from_onnx(if_model(cond_from_tensor=True))


def test_a_shape_fed_to_a_node_inside_a_branch_is_specialized_on():
    """The Reshape inside the branch reads graph input 'shape' through a value the branch
    computes: the run's value must still be traced back to that input."""
    nodes = [helper.make_node("Identity", ["shape"], ["branch_shape"]),
             helper.make_node("Reshape", ["x", "branch_shape"], ["t"])]
    branch = body(nodes, [], [info("t")], "then")
    node = helper.make_node("If", ["cond"], ["out"], then_branch=branch, else_branch=branch)
    model = make_model([node], {"x": [6], "shape": ([2], I64)}, {"out": None}, 13, {"cond": np.array(True)})
    feeds = {"x": random_array([6]), "shape": np.array([3, 2], np.int64)}
    np.testing.assert_array_equal(backend.prepare(model).run(feeds)[0], feeds["x"].reshape(3, 2))


def test_an_unsupported_op_inside_a_branch_is_refused_naming_it():
    branch = body([helper.make_node("NoSuchOp", ["x"], ["t"])], [], [info("t")], "then")
    node = helper.make_node("If", ["cond"], ["out"], then_branch=branch, else_branch=branch)
    model = make_model([node], {"x": [3]}, {"out": [3]}, 13, {"cond": np.array(True)})
    with pytest.raises(UnsupportedOpError, match=r"node 'If#0/then/NoSuchOp#0': NoSuchOp .* inside a subgraph "
                                                 r"has no conversion"):
        from_onnx(model)


# ----- Loop -------------------------------------------------------------------------------
def loop_model(trip_count=4, stop_after=None, cond_from_tensor=False, with_trip_count=True):
    """acc += x * iter each iteration (x read from the outer scope); each iteration's acc is
    a scan output. ``stop_after``: the body's condition turns false (computed from the
    iteration number, so known at import) once iter reaches it."""
    nodes = [helper.make_node("Cast", ["iter"], ["fiter"], to=F32),
             helper.make_node("Mul", ["x", "fiter"], ["step"]),
             helper.make_node("Add", ["acc_in", "step"], ["acc_out"]),
             helper.make_node("Identity", ["acc_out"], ["scan_out"])]
    if cond_from_tensor:
        nodes += [helper.make_node("ReduceSum", ["acc_out"], ["total"], keepdims=0),
                  helper.make_node("Less", ["total", "limit"], ["cond_out"])]
    elif stop_after is not None:
        nodes.append(helper.make_node("Less", ["iter", "last"], ["cond_out"]))
    else:
        nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    loop_body = body(nodes, [info("iter", [], I64), info("cond_in", [], BOOL), info("acc_in", [3])],
                     [info("cond_out", [], BOOL), info("acc_out", [3]), info("scan_out", [3])])
    inits = {"acc0": np.zeros(3, np.float32), "cond": np.array(True), "limit": np.array(10, np.float32),
             "last": np.array(stop_after or 0, np.int64)}
    if with_trip_count:
        inits["M"] = np.array(trip_count, np.int64)
    loop = helper.make_node("Loop", ["M" if with_trip_count else "", "cond", "acc0"], ["acc", "accs"], body=loop_body)
    return make_model([loop], {"x": [3]}, {"acc": [3], "accs": None}, 13, inits)


@pytest.mark.parametrize("trip_count,stop_after", [(4, None), (1, None), (5, 2)])
def test_loop_unrolls_threading_carried_values_and_stacking_scan_outputs(trip_count, stop_after):
    assert_matches_reference(loop_model(trip_count, stop_after), {"x": random_array([3])})


def test_loop_with_a_fed_trip_count_specializes_on_it():
    model = loop_model()
    model.graph.initializer.remove(next(t for t in model.graph.initializer if t.name == "M"))
    model.graph.input.append(info("M", [], I64))
    feeds = {"x": random_array([3]), "M": np.array(3, np.int64)}
    np.testing.assert_allclose(backend.prepare(model).run(feeds)[1], expected(model, feeds)[1], rtol=1e-6)


def fusing_work(monkeypatch, trip_count: int, strategy: str) -> dict[str, int]:
    """How much work fusing ``loop_model(trip_count)`` with ``strategy`` (feedback on) did,
    counted where it grew faster than the model: the nodes read looking for compound ops to
    open (once per group checked, each time the whole graph), and the pieces of the isl sets
    the backend's check intersected and joined (a concat's slices, each against all before)."""
    import islpy as isl

    import fusionlang.engine.lowering as lowering

    work = {"nodes read": 0, "pieces intersected": 0, "pieces joined": 0}
    find = lowering.compound_nodes

    def counted_find(graph, registry):
        work["nodes read"] += len(graph.nodes)
        return find(graph, registry)

    def counted(method, key, size):
        real = getattr(method[0], method[1])

        def call(self, other):
            work[key] += size(self) + size(other)
            return real(self, other)
        monkeypatch.setattr(method[0], method[1], call)

    monkeypatch.setattr(lowering, "compound_nodes", counted_find)
    counted((isl.Set, "intersect"), "pieces intersected", isl.Set.n_basic_set)
    counted((isl.UnionSet, "union"), "pieces joined", isl.UnionSet.n_set)
    fusionlang.fuse(from_onnx(loop_model(trip_count)), "tvm" if strategy == "tvm" else "apollo", strategy)
    monkeypatch.undo()
    return work


@pytest.mark.parametrize("strategy", ["apollo", "tvm"])
def test_fusing_an_unrolled_loop_does_work_linear_in_its_trip_count(monkeypatch, strategy):
    """A Loop of 20,000 iterations took 358 s to fuse: every group the backend checked made
    the whole graph be searched for compound ops again, and a concat of the scan outputs'
    n slices was checked slice against all slices before it. Four times the iterations now
    cost about four times the work, not sixteen."""
    short, long = fusing_work(monkeypatch, 60, strategy), fusing_work(monkeypatch, 240, strategy)
    for what, amount in long.items():
        assert amount <= 6 * max(short[what], 1), (what, short[what], amount)


def test_a_long_loop_compiled_fused_computes_what_the_reference_does():
    model = loop_model(trip_count=150)
    feeds = {"x": random_array([3])}
    graph = from_onnx(model)
    plan = fusionlang.fuse(graph)
    assert len(plan.kernels) > 1  # the unrolled chain is split into several fused kernels
    got = fusionlang.compile(plan, "c").run(feeds)
    for name, want in zip(graph.outputs, expected(model, feeds)):
        np.testing.assert_allclose(got[name], want, rtol=1e-6, atol=1e-6)


def test_a_loop_condition_computed_from_tensors_is_refused():
    with pytest.raises(UnsupportedOpError, match="not supported in this form: a loop condition computed from "
                                                 "tensors"):
        from_onnx(loop_model(cond_from_tensor=True))


def test_a_loop_without_a_trip_count_is_refused():
    with pytest.raises(UnsupportedOpError, match="not supported in this form: no trip count M"):
        from_onnx(loop_model(with_trip_count=False))


def test_a_loop_too_long_to_unroll_is_refused():
    with pytest.raises(UnsupportedOpError, match=r"1000000 iterations of a 5-node body \(unrolling adds at most"):
        from_onnx(loop_model(trip_count=1_000_000))


def test_a_trip_count_computed_from_tensors_is_refused():
    model = loop_model()
    model.graph.initializer.remove(next(t for t in model.graph.initializer if t.name == "M"))
    model.graph.input.append(info("n", [], I64))
    model.graph.node.insert(0, helper.make_node("Abs", ["n"], ["M"]))
    with pytest.raises(UnsupportedOpError, match="not supported in this form: a trip count computed from tensors"):
        from_onnx(model)


def test_scan_outputs_of_a_loop_that_runs_no_iteration_are_refused():
    with pytest.raises(UnsupportedOpError, match="not supported in this form: a scan output of a loop that runs no "
                                                 "iteration"):
        from_onnx(loop_model(trip_count=0))


def test_a_loop_body_without_its_inputs_is_a_model_error():
    model = loop_model()
    del model.graph.node[0].attribute[0].g.input[0]
    with pytest.raises(ModelError, match=r"node 'Loop#0' \(Loop\): the body takes 2 inputs and gives 3 outputs; a "
                                         r"loop with 1 carried values needs 3 and at least 2"):
        from_onnx(model)


def test_an_if_nested_in_a_loop_reads_the_body_values_of_its_own_iteration():
    """The nested If's branches read the body's iter and acc_in: each unrolled copy must
    rename those reads to its own iteration's values."""
    is_even = [helper.make_node("Mod", ["iter", "two"], ["rem"]), helper.make_node("Equal", ["rem", "zero"], ["even"])]
    then_branch = body([helper.make_node("Add", ["acc_in", "x"], ["t"])], [], [info("t", [3])], "then")
    else_branch = body([helper.make_node("Sub", ["acc_in", "x"], ["e"])], [], [info("e", [3])], "else")
    nodes = is_even + [helper.make_node("If", ["even"], ["acc_out"], then_branch=then_branch,
                                        else_branch=else_branch),
                       helper.make_node("Identity", ["cond_in"], ["cond_out"])]
    loop_body = body(nodes, [info("iter", [], I64), info("cond_in", [], BOOL), info("acc_in", [3])],
                     [info("cond_out", [], BOOL), info("acc_out", [3])])
    loop = helper.make_node("Loop", ["M", "cond", "acc0"], ["acc"], body=loop_body)
    inits = {"M": np.array(5, np.int64), "cond": np.array(True), "acc0": np.ones(3, np.float32),
             "two": np.array(2, np.int64), "zero": np.array(0, np.int64)}
    model = make_model([loop], {"x": [3]}, {"acc": [3]}, 13, inits)
    assert_matches_reference(model, {"x": random_array([3])})


# ----- Scan -------------------------------------------------------------------------------
def scan_body():
    nodes = [helper.make_node("Add", ["sum_in", "next"], ["sum_out"]),
             helper.make_node("Mul", ["sum_out", "next"], ["scan_out"])]
    return body(nodes, [info("sum_in", [2]), info("next", [2])], [info("sum_out", [2]), info("scan_out", [2])])


def numpy_scan(init, xs, in_axis=0, out_axis=0, reverse_in=False, reverse_out=False):
    """scan_body's Scan in NumPy: onnx.reference supports only axis 0, forward."""
    steps = list(np.moveaxis(xs, in_axis, 0))
    total, ys = init, []
    for x in steps[::-1] if reverse_in else steps:
        total = total + x
        ys.append(total * x)
    return total, np.stack(ys[::-1] if reverse_out else ys, axis=out_axis)


def test_scan_unrolls_over_the_sequence_axis_like_the_reference():
    node = helper.make_node("Scan", ["init", "xs"], ["total", "ys"], num_scan_inputs=1, body=scan_body())
    model = make_model([node], {"init": [2], "xs": [4, 2]}, {"total": [2], "ys": None}, 11)
    feeds = {"init": random_array([2], 1), "xs": random_array([4, 2], 2)}
    assert_matches_reference(model, feeds)
    for got, want in zip(run_fusionlang(model, feeds), numpy_scan(feeds["init"], feeds["xs"])):
        np.testing.assert_allclose(got, want, rtol=1e-6)  # the NumPy scan agrees with the reference


@pytest.mark.parametrize("in_axis,out_axis,reverse_in,reverse_out",
                         [(1, -1, False, False), (0, 0, True, False), (0, 1, False, True), (1, 0, True, True)])
def test_scan_takes_any_axis_and_direction(in_axis, out_axis, reverse_in, reverse_out):
    shape = [2, 4] if in_axis == 1 else [4, 2]
    node = helper.make_node("Scan", ["init", "xs"], ["total", "ys"], num_scan_inputs=1, body=scan_body(),
                            scan_input_axes=[in_axis], scan_output_axes=[out_axis],
                            scan_input_directions=[int(reverse_in)], scan_output_directions=[int(reverse_out)])
    model = make_model([node], {"init": [2], "xs": shape}, {"total": [2], "ys": None}, 11)
    feeds = {"init": random_array([2], 1), "xs": random_array(shape, 2)}
    for got, want in zip(run_fusionlang(model, feeds),
                         numpy_scan(feeds["init"], feeds["xs"], in_axis, out_axis, reverse_in, reverse_out)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_opset_8_scan_scans_each_batch_entry():
    node = helper.make_node("Scan", ["", "init", "xs"], ["total", "ys"], num_scan_inputs=1, body=scan_body())
    model = make_model([node], {"init": [3, 2], "xs": [3, 4, 2]}, {"total": [3, 2], "ys": None}, 8)
    feeds = {"init": random_array([3, 2], 1), "xs": random_array([3, 4, 2], 2)}
    # onnx.reference implements only Scan-9 on: opset 8's result is Scan-9's per batch entry
    per_entry = [expected(make_model([helper.make_node("Scan", ["init", "xs"], ["total", "ys"], num_scan_inputs=1,
                                                       body=scan_body())],
                                     {"init": [2], "xs": [4, 2]}, {"total": [2], "ys": None}, 9),
                          {"init": feeds["init"][b], "xs": feeds["xs"][b]}) for b in range(3)]
    total, ys = run_fusionlang(model, feeds)
    np.testing.assert_allclose(total, np.stack([e[0] for e in per_entry]), rtol=1e-6)
    np.testing.assert_allclose(ys, np.stack([e[1] for e in per_entry]), rtol=1e-6)


def test_a_scan_over_an_empty_sequence_is_refused():
    node = helper.make_node("Scan", ["init", "xs"], ["total", "ys"], num_scan_inputs=1, body=scan_body())
    model = make_model([node], {"init": [2], "xs": [0, 2]}, {"total": [2], "ys": None}, 11)
    with pytest.raises(UnsupportedOpError, match="not supported in this form: a scan over an empty sequence"):
        from_onnx(model)


def test_an_opset_8_scan_too_long_to_unroll_counts_every_batch_entry():
    node = helper.make_node("Scan", ["", "init", "xs"], ["total", "ys"], num_scan_inputs=1, body=scan_body())
    model = make_model([node], {"init": [2, 2], "xs": [2, 60_000, 2]}, {"total": [2, 2], "ys": None}, 8)
    with pytest.raises(UnsupportedOpError, match=r"120000 iterations of a 2-node body"):
        from_onnx(model)


def test_opset_8_scan_with_sequence_lens_is_refused():
    node = helper.make_node("Scan", ["lens", "init", "xs"], ["total", "ys"], num_scan_inputs=1, body=scan_body())
    model = make_model([node], {"init": [3, 2], "xs": [3, 4, 2]}, {"total": [3, 2], "ys": None}, 8,
                       {"lens": np.array([4, 4, 4], np.int32)})
    with pytest.raises(UnsupportedOpError, match=r"not supported in this form: sequence_lens"):
        from_onnx(model)


# ----- Optional ---------------------------------------------------------------------------
def optional_model(present: bool, read: str):
    make = helper.make_node("Optional", ["x"] if present else [], ["opt"],
                            **({} if present else {"type": helper.make_tensor_type_proto(F32, [3])}))
    return make_model([make, helper.make_node(read, ["opt"], ["out"])], {"x": [3]}, {"out": None}, 18)


# onnx.reference gets optionals wrong (an empty one "has" an element; GetElement adds an
# axis), so the spec's answers are written out here.
@pytest.mark.parametrize("present", [True, False])
def test_optional_has_element_is_known_at_import(present):
    (out,) = run_fusionlang(optional_model(present, "OptionalHasElement"), {"x": random_array([3])})
    assert out.dtype == np.bool_ and out.shape == () and bool(out) is present


def test_optional_get_element_of_a_present_optional_is_its_tensor():
    x = random_array([3])
    np.testing.assert_array_equal(run_fusionlang(optional_model(True, "OptionalGetElement"), {"x": x})[0], x)


def test_optional_get_element_of_an_empty_optional_is_refused():
    with pytest.raises(ModelError, match=r"node 'OptionalGetElement#1' \(OptionalGetElement\): reads the element "
                                         r"of an empty optional"):
        from_onnx(optional_model(False, "OptionalGetElement"))


def test_an_empty_optional_read_as_a_tensor_is_refused():
    model = make_model([helper.make_node("Optional", [], ["opt"], type=helper.make_tensor_type_proto(F32, [3])),
                        helper.make_node("Relu", ["opt"], ["out"])], {"x": [3]}, {"out": None}, 18)
    with pytest.raises(UnsupportedOpError, match=r"node 'Relu#1' \(Relu\) reads 'opt', an empty optional, as a "
                                                 "tensor"):
        from_onnx(model)


def test_an_optional_graph_input_is_refused_naming_its_reader():
    optional = helper.make_tensor_type_proto(F32, [3])
    graph = helper.make_graph([helper.make_node("OptionalHasElement", ["opt"], ["out"])], "test",
                              [helper.make_value_info("opt", helper.make_optional_type_proto(optional))],
                              [info("out", [], BOOL)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(UnsupportedOpError, match=r"^graph input 'opt' is an optional, read by node "
                                                 r"'OptionalHasElement#0' \(OptionalHasElement\); fusionlang "
                                                 r"resolves optionals at import time"):
        from_onnx(model)


def _nested_loops(trips: int):
    """x -> Loop(trips) { Loop(trips) { x + x } }, both trip counts the outer constant M."""
    def body(name, nodes):
        return helper.make_graph(nodes, name, [helper.make_tensor_value_info(f"{name}_i", TensorProto.INT64, []),
                                               helper.make_tensor_value_info(f"{name}_c", TensorProto.BOOL, []),
                                               helper.make_tensor_value_info(f"{name}_x", TensorProto.FLOAT, [2])],
                                 [helper.make_tensor_value_info(f"{name}_c", TensorProto.BOOL, []),
                                  helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, [2])])

    inner = body("in", [helper.make_node("Add", ["in_x", "in_x"], ["in_y"])])
    outer = body("out", [helper.make_node("Loop", ["M", "", "out_x"], ["out_y"], body=inner)])
    graph = helper.make_graph([helper.make_node("Loop", ["M", "", "x"], ["y"], body=outer)], "nested",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
                              [numpy_helper.from_array(np.array(trips, np.int64), "M")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def test_nested_loops_count_towards_one_budget(monkeypatch):
    """Each Loop was checked alone: 3 nested Loops of 1000 iterations (10**9 nodes) passed
    and ran on; now every unrolling of a model counts towards MAX_UNROLLED_NODES."""
    from fusionlang.errors import UnsupportedOpError
    from fusionlang.frontend import onnx_control

    monkeypatch.setattr(onnx_control, "MAX_UNROLLED_NODES", 500)
    graph = from_onnx(_nested_loops(8))  # 8 + 8 * 8 nodes: within the budget
    x = np.float32([1, -3])  # doubled 64 times (the outer loop's 8 nodes are inner loops)
    np.testing.assert_array_equal(fusionlang.reference.run(graph, {"x": x})["y"], x * np.float32(2.0 ** 64))
    with pytest.raises(UnsupportedOpError, match="nested loops included"):
        from_onnx(_nested_loops(30))  # each Loop alone is within it, together 30 + 900 nodes are not


def test_a_long_scan_is_refused_before_its_inputs_are_cut(monkeypatch):
    from fusionlang.errors import UnsupportedOpError
    from fusionlang.frontend import onnx_control

    monkeypatch.setattr(onnx_control, "MAX_UNROLLED_NODES", 100)
    body = helper.make_graph([helper.make_node("Add", ["s", "e"], ["s2"]), helper.make_node("Identity", ["s2"], ["o"])],
                             "b", [helper.make_tensor_value_info("s", TensorProto.FLOAT, [2]),
                                   helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])],
                             [helper.make_tensor_value_info("s2", TensorProto.FLOAT, [2]),
                              helper.make_tensor_value_info("o", TensorProto.FLOAT, [2])])
    node = helper.make_node("Scan", ["s0", "xs"], ["final", "ys"], body=body, num_scan_inputs=1)
    graph = helper.make_graph([node], "scan", [helper.make_tensor_value_info("s0", TensorProto.FLOAT, [2]),
                                               helper.make_tensor_value_info("xs", TensorProto.FLOAT, [60_000, 2])],
                              [helper.make_tensor_value_info("final", TensorProto.FLOAT, [2]),
                               helper.make_tensor_value_info("ys", TensorProto.FLOAT, [60_000, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    with pytest.raises(UnsupportedOpError, match="60000 iterations"):
        from_onnx(model)
