"""fusionlang as an ONNX backend (``onnx.backend.base.Backend``).

``prepare`` imports the model with :func:`fusionlang.frontend.from_onnx`, fuses it with
the default rules and compiles it (target ``c``, or ``cuda`` when CuPy sees a device);
``rep.run`` runs the compiled code. A model whose input dims are symbolic, or that feeds
axes, pads, shape or repeats as graph inputs, is prepared lazily: each run specializes it
on that run's shapes and values (:class:`fusionlang.Specializer`, a bounded cache; the
rep's ``specializer.specializations`` counts the compiles). A graph the backend cannot
compile (an op with no loop form, a dtype the emitters lack) runs on the reference
interpreter instead, with a warning, and ``rep.fallback`` says why. ``prepare(model, target="reference")`` asks for
the interpreter outright.

    import fusionlang.onnx_backend as backend
    outputs = backend.run_model(model, [x])          # or backend.prepare(model).run({...})

The module-level ``prepare``/``run_model``/``run_node``/``supports_device`` let the module
itself be handed to ``onnx.backend.test.BackendTest``.
"""

from __future__ import annotations

import warnings
from typing import Any, Mapping, Sequence

import numpy as np
import onnx
from onnx import helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

import fusionlang
from fusionlang.backend import cuda_available, default_target
from fusionlang.errors import CodegenError, InputError, ModelError, RuntimeInputError
from fusionlang.frontend import from_onnx
from fusionlang.frontend.onnx_import import MAX_OPSET
from fusionlang.ir.graph import Graph
from fusionlang.ops.interpreter import run as interpret
from fusionlang.specialize import Specializer


def executor(graph: Graph, target: str, rules: str | None = None):
    """(run function, fallback reason or None) for ``graph`` on ``target``."""
    if target == "reference":
        return (lambda feeds: interpret(graph, feeds)), None
    try:
        compiled = fusionlang.compile(fusionlang.fuse(graph, rules, target=target), target)
    except CodegenError as exc:
        warnings.warn(f"fusionlang: running {graph.name!r} on the reference interpreter: {exc}", stacklevel=3)
        return (lambda feeds: interpret(graph, feeds)), str(exc)
    return compiled.run, None


class FusionlangRep(BackendRep):
    """A prepared model: ``run(inputs)`` returns its outputs in graph output order."""

    def __init__(self, graph: Graph, target: str | None = None, rules: str | None = None):
        self.graph = graph
        self.target = target or default_target()
        self._run, self.fallback = executor(graph, self.target, rules)
        self._outputs = namedtupledict("Outputs", list(graph.outputs))

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        """``inputs``: a dict by name, a list/tuple in graph input order, or one array."""
        feeds = self.feeds(inputs)
        results = self._run(feeds)
        return self._outputs(*(results[name] for name in self.graph.outputs))

    def feeds(self, inputs: Any) -> dict[str, np.ndarray]:
        return _feeds_by_name(inputs, self.graph.inputs)


class SpecializingRep(BackendRep):
    """A model prepared lazily: each run compiles it for that run's input shapes and the
    values of its shape-like inputs, or reuses the compile of an earlier run with the same."""

    def __init__(self, model: onnx.ModelProto, target: str, rules: str | None = None,
                 input_shapes: Mapping[str, Sequence[int]] | None = None):
        self.target = target
        self.specializer = Specializer(model, input_shapes=input_shapes,
                                       build=lambda graph: executor(graph, target, rules)[0])
        self._names = [v.name for v in model.graph.output]
        self._outputs = namedtupledict("Outputs", self._names)

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        results = self.specializer.run(_feeds_by_name(inputs, self.specializer.inputs))
        return self._outputs(*(results[name] for name in self._names))


def _feeds_by_name(inputs: Any, names: Sequence[str]) -> dict[str, np.ndarray]:
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
            kind = Device(device).type
        except (AttributeError, ValueError):
            return False
        return kind == DeviceType.CPU or (kind == DeviceType.CUDA and cuda_available())

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> BackendRep:
        """Import, fuse and compile ``model``. Keywords: ``target`` ("c", "cuda",
        "reference"; default from ``device``), ``rules`` (default: the target's, ``default_rules``),
        ``input_shapes`` for symbolic input dims. A model that needs run-time shapes or
        values (symbolic dims, axes/pads/shape fed as inputs) gets a SpecializingRep."""
        if not cls.supports_device(device):
            raise ModelError(f"fusionlang's ONNX backend cannot run on {device!r} here")
        target = kwargs.get("target") or ("cuda" if Device(device).type == DeviceType.CUDA else "c")
        rules = kwargs.get("rules")
        try:
            graph = from_onnx(model, kwargs.get("input_shapes"))
        except RuntimeInputError:
            return SpecializingRep(model, target, rules, kwargs.get("input_shapes"))
        return FusionlangRep(graph, target, rules)

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
