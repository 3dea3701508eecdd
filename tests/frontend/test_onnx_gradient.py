"""The training domain's Gradient op: derivatives built at import, compiled to C, checked
against central finite differences of the forward model run by onnx's ReferenceEvaluator."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from fusionlang import onnx_backend
from fusionlang.errors import ModelError, UnsupportedOpError
from fusionlang.frontend import from_onnx
from onnx_cases import IR_VERSION, backend_cases


F64 = TensorProto.DOUBLE
TRAINING = "ai.onnx.preview.training"


def _model(nodes, inputs, outputs, xs, y, zs=(), opset=17, initializers=None, grad_inputs=None):
    """The forward ``nodes`` plus Gradient(xs, zs, y); outputs: y's, then one dy/dx per x."""
    grads = [f"d{y}_d{x}" for x in xs]
    attrs = {"xs": list(xs), "y": y, **({"zs": list(zs)} if zs else {})}
    gradient = helper.make_node("Gradient", list(grad_inputs or [*xs, *zs]), grads, domain=TRAINING, **attrs)
    infos = [helper.make_tensor_value_info(n, F64, s) for n, s in inputs.items()]
    outs = [helper.make_tensor_value_info(n, F64, None) for n in [*outputs, *grads]]
    inits = [numpy_helper.from_array(np.asarray(v, dtype=np.float64), k) for k, v in (initializers or {}).items()]
    graph = helper.make_graph([*nodes, gradient], "grad", infos, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(TRAINING, 1)])
    model.ir_version = IR_VERSION
    return model


def _forward(model: onnx.ModelProto, y: str) -> ReferenceEvaluator:
    graph = model.graph
    nodes = [n for n in graph.node if n.op_type != "Gradient"]
    forward = helper.make_graph(nodes, "forward", graph.input, [helper.make_tensor_value_info(y, F64, None)],
                                graph.initializer)
    return ReferenceEvaluator(helper.make_model(forward, opset_imports=[model.opset_import[0]]))


def _finite_differences(model, feeds, x: str, y: str, step=1e-6) -> np.ndarray:
    forward = _forward(model, y)
    grad = np.zeros_like(feeds[x])
    for index in np.ndindex(feeds[x].shape):
        up, down = dict(feeds), dict(feeds)
        up[x], down[x] = feeds[x].copy(), feeds[x].copy()
        up[x][index] += step
        down[x][index] -= step
        grad[index] = (forward.run(None, up)[0].sum() - forward.run(None, down)[0].sum()) / (2 * step)
    return grad


def _check(model, feeds, xs, y):
    got = onnx_backend.prepare(model, target="c").run(feeds)
    for x, g in zip(xs, got[-len(xs):]):
        assert g.shape == feeds[x].shape
        np.testing.assert_allclose(g, _finite_differences(model, feeds, x, y), rtol=1e-6, atol=1e-6)


def _feeds(**shapes):
    rng = np.random.default_rng(7)
    return {name: rng.uniform(0.5, 2.0, shape) for name, shape in shapes.items()}


def test_scalar_add_and_mul_like_the_onnx_suite():
    nodes = [helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Mul", ["c", "a"], ["d"])]
    model = _model(nodes, {"a": [], "b": []}, ["d"], ["a", "b"], "d")
    got = onnx_backend.prepare(model, target="c").run({"a": np.array(1.0), "b": np.array(2.0)})
    assert [float(v) for v in got] == [3.0, 4.0, 1.0]


def test_broadcast_operands_sum_their_adjoints():
    nodes = [helper.make_node("Mul", ["x", "w"], ["t"]), helper.make_node("Div", ["t", "b"], ["u"]),
             helper.make_node("Sub", ["u", "x"], ["y"])]
    model = _model(nodes, {"x": [2, 3], "w": [3], "b": [2, 1]}, ["y"], ["x", "w", "b"], "y")
    _check(model, _feeds(x=(2, 3), w=(3,), b=(2, 1)), ["x", "w", "b"], "y")


def test_matmul_and_unary_rules_with_a_value_read_twice():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Tanh", ["h"], ["t"]),
             helper.make_node("Sigmoid", ["t"], ["s"]), helper.make_node("Exp", ["s"], ["e"]),
             helper.make_node("Log", ["x"], ["l"]), helper.make_node("Sqrt", ["e"], ["q"]),
             helper.make_node("Relu", ["q"], ["r"]), helper.make_node("ReduceSum", ["l"], ["ls"], keepdims=1),
             helper.make_node("Mul", ["r", "ls"], ["y"])]
    # ReduceSum has no rule, and needs none: it reads only x, which is in zs (held constant)
    model = _model(nodes, {"x": [2, 4], "w": [4, 3]}, ["y"], ["w"], "y", zs=["x"])
    _check(model, _feeds(x=(2, 4), w=(4, 3)), ["w"], "y")


def test_batched_matmul_broadcasts_its_weight():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Sin", ["h"], ["s"]),
             helper.make_node("Cos", ["s"], ["y"])]
    model = _model(nodes, {"x": [2, 3, 4], "w": [4, 5]}, ["y"], ["x", "w"], "y")
    _check(model, _feeds(x=(2, 3, 4), w=(4, 5)), ["x", "w"], "y")


def test_opset_12_reduces_with_the_axes_attribute_and_initializers_are_read():
    nodes = [helper.make_node("Add", ["x", "bias"], ["t"]), helper.make_node("Mul", ["t", "x2"], ["y"])]
    model = _model(nodes, {"x": [3, 1], "x2": [1, 4]}, ["y"], ["x", "x2"], "y", opset=12,
                   initializers={"bias": np.arange(4.0)})
    _check(model, _feeds(x=(3, 1), x2=(1, 4)), ["x", "x2"], "y")


def test_an_x_that_y_does_not_depend_on_gets_zeros():
    nodes = [helper.make_node("Neg", ["a"], ["y"])]
    model = _model(nodes, {"a": [2], "b": [3]}, ["y"], ["a", "b"], "y")
    got = onnx_backend.prepare(model, target="c").run(_feeds(a=2, b=3))
    np.testing.assert_array_equal(got[1], -np.ones(2))
    np.testing.assert_array_equal(got[2], np.zeros(3))


def test_gradient_evaluated_at_its_own_inputs():
    # Gradient is fed p, q: the derivative of y = a*a at a = p
    nodes = [helper.make_node("Mul", ["a", "a"], ["y"])]
    model = _model(nodes, {"a": [3], "p": [3]}, ["y"], ["a"], "y", grad_inputs=["p"])
    feeds = _feeds(a=3, p=3)
    got = onnx_backend.prepare(model, target="c").run(feeds)
    np.testing.assert_allclose(got[1], 2 * feeds["p"])


def test_a_path_through_an_op_without_a_rule_is_refused_by_name():
    nodes = [helper.make_node("Abs", ["a"], ["y"])]
    with pytest.raises(UnsupportedOpError, match=r"goes through Abs .*no derivative rule"):
        from_onnx(_model(nodes, {"a": [2]}, ["y"], ["a"], "y"))


def test_y_reading_an_input_outside_xs_and_zs_is_refused():
    nodes = [helper.make_node("Mul", ["a", "b"], ["y"])]
    with pytest.raises(ModelError, match=r"depends on graph input 'b', which is in neither xs nor zs"):
        from_onnx(_model(nodes, {"a": [2], "b": [2]}, ["y"], ["a"], "y"))


def test_integer_y_is_refused():
    nodes = [helper.make_node("Cast", ["a"], ["y"], to=TensorProto.INT64)]
    with pytest.raises(ModelError, match=r"derivatives are taken of floating-point tensors only"):
        from_onnx(_model(nodes, {"a": [2]}, ["y"], ["a"], "y"))


def test_wrong_input_count_is_refused():
    nodes = [helper.make_node("Neg", ["a"], ["y"])]
    with pytest.raises(ModelError, match=r"takes 1 inputs \(xs then zs\), the model gives 2"):
        from_onnx(_model(nodes, {"a": [2], "b": [2]}, ["y"], ["a"], "y", grad_inputs=["a", "b"]))


# ONNX's own simple-model cases for Gradient, compiled to C (a fallback to the interpreter fails)
GRADIENT_CASES = ["test_gradient_of_add", "test_gradient_of_add_and_mul"]
OnnxBackendSimpleModelTest, _ = backend_cases("OnnxBackendSimpleModelTest", GRADIENT_CASES, __name__)

pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")


def test_both_gradient_cases_are_collected():
    collected = {a[: -len("_cpu")] for a in vars(OnnxBackendSimpleModelTest) if a.endswith("_cpu")}
    assert collected == set(GRADIENT_CASES)
