"""fusionlang as an ONNX backend (``onnx.backend.base.Backend``).

``prepare`` imports the model with :func:`fusionlang.frontend.from_onnx`; ``rep.run``
executes it. Execution goes through :func:`execute` alone, so switching from the NumPy
reference interpreter to compiled code changes that one function.

    import fusionlang.onnx_backend as backend
    outputs = backend.run_model(model, [x])          # or backend.prepare(model).run({...})

The module-level ``prepare``/``run_model``/``run_node``/``supports_device`` let the module
itself be handed to ``onnx.backend.test.BackendTest``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import onnx
from onnx import helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

from fusionlang.errors import InputError, ModelError
from fusionlang.frontend import from_onnx
from fusionlang.frontend.onnx_import import MAX_OPSET
from fusionlang.ir.graph import Graph
from fusionlang.ops.interpreter import run as interpret


def execute(graph: Graph, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run ``graph``: today the reference interpreter, later compiled code."""
    return interpret(graph, feeds)


class FusionlangRep(BackendRep):
    """A prepared model: ``run(inputs)`` returns its outputs in graph output order."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self._outputs = namedtupledict("Outputs", list(graph.outputs))

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        """``inputs``: a dict by name, a list/tuple in graph input order, or one array."""
        feeds = self.feeds(inputs)
        results = execute(self.graph, feeds)
        return self._outputs(*(results[name] for name in self.graph.outputs))

    def feeds(self, inputs: Any) -> dict[str, np.ndarray]:
        names = self.graph.inputs
        if isinstance(inputs, Mapping):
            return dict(inputs)
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        if not isinstance(inputs, Sequence):
            raise InputError(f"inputs must be a dict, a list or an array, got {type(inputs).__name__}")
        if len(inputs) != len(names):
            raise InputError(f"got {len(inputs)} inputs, the model takes {len(names)} ({', '.join(names)})")
        return dict(zip(names, inputs))


class FusionlangBackend(Backend):
    @classmethod
    def supports_device(cls, device: str) -> bool:
        try:
            return Device(device).type == DeviceType.CPU
        except (AttributeError, ValueError):
            return False

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> FusionlangRep:
        if not cls.supports_device(device):
            raise ModelError(f"fusionlang's ONNX backend runs on CPU only, not {device!r}")
        return FusionlangRep(from_onnx(model, kwargs.get("input_shapes")))

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Sequence[tuple[np.dtype, tuple[int, ...]]] | None = None,
                 **kwargs: Any) -> tuple[Any, ...]:
        """Run one node on arrays: it is wrapped in a one-node model and imported."""
        arrays = [np.asarray(x) for x in (inputs.values() if isinstance(inputs, Mapping) else inputs)]
        present = [name for name in node.input if name]
        if len(arrays) != len(present):
            raise InputError(f"node {node.name or node.op_type!r} reads {len(present)} inputs, got {len(arrays)}")
        graph_inputs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                        for name, a in zip(present, arrays)]
        graph_outputs = [helper.make_empty_tensor_value_info(name) for name in node.output if name]
        opset = kwargs.get("opset_version", MAX_OPSET)
        model = helper.make_model(helper.make_graph([node], "node", graph_inputs, graph_outputs),
                                  opset_imports=[helper.make_opsetid("", opset)])
        return cls.prepare(model, device).run(arrays)


prepare = FusionlangBackend.prepare
run_model = FusionlangBackend.run_model
run_node = FusionlangBackend.run_node
supports_device = FusionlangBackend.supports_device
