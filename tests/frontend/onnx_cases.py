"""Small ONNX models built with onnx.helper, and the runtimes to compare them on."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from fusionlang.frontend import from_onnx
from fusionlang.ops.interpreter import run as interpret

F32 = TensorProto.FLOAT
I64 = TensorProto.INT64

#: the IR version onnxruntime reads for every opset used in these tests
IR_VERSION = 8


def tensor_info(name: str, shape, elem_type: int = F32) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, shape)


def make_model(nodes, inputs, outputs, opset: int, initializers: dict | None = None) -> onnx.ModelProto:
    """``inputs``/``outputs``: {name: shape} for float32, or {name: (shape, elem_type)}."""

    def infos(spec):
        return [tensor_info(name, *shape) if isinstance(shape, tuple) else tensor_info(name, shape)
                for name, shape in spec.items()]

    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()]
    graph = helper.make_graph(nodes, "test", infos(inputs), infos(outputs), inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = IR_VERSION
    return model


def run_fusionlang(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    graph = from_onnx(model)
    results = interpret(graph, feeds)
    return [results[name] for name in graph.outputs]


def run_onnxruntime(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # the opset-7 models make it warn about old opsets
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def random_array(shape, seed: int = 0, dtype=np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def compiled_matches_reference(model, feeds, rtol=1e-5, atol=1e-6):
    """``model`` compiled to C by fusionlang's backend agrees with onnx's ReferenceEvaluator."""
    from onnx.reference import ReferenceEvaluator

    from fusionlang import onnx_backend

    got = onnx_backend.prepare(model, target="c").run(feeds)
    want = ReferenceEvaluator(model).run(None, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def backend_cases(suite: str, names, module: str):
    """(ONNX's backend-test class ``suite`` run through fusionlang with only the CPU cases
    ``names`` kept, every case name the class had): pytest collects the class from
    ``module``, the calling test module."""
    import onnx.backend.test

    import fusionlang.onnx_backend

    test = onnx.backend.test.BackendTest(fusionlang.onnx_backend, module)
    test.include(r"_cpu$")
    cases = test.test_cases[suite]
    every = {a[: -len("_cpu")] for a in vars(cases) if a.endswith("_cpu")}
    for attr in [a for a in vars(cases) if a.startswith("test_")]:
        if not attr.endswith("_cpu") or attr[: -len("_cpu")] not in names:
            delattr(cases, attr)
    return cases, every
