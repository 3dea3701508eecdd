"""Specializer: an ONNX model compiled once per distinct run-time shapes and values.

fusionlang's graphs are statically shaped, and what an op reads as axes, pads, shape or
repeats becomes a constant. A model with symbolic input dims, or one that feeds those
values as graph inputs (as ONNX allows since opsets 11 to 18), cannot be compiled before
a run. A Specializer imports it at each run with that run's shapes and values bound,
compiles it, and keeps the result in a bounded LRU cache keyed by them: a run with shapes
and values seen before reuses the compiled code. Which inputs need binding is learned
from the importer (its RuntimeInputError names them), once per model.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from fusionlang.api import compile_model, from_onnx
from fusionlang.errors import InputError, RuntimeInputError
from fusionlang.ir.graph import Graph
from fusionlang.ir.memory import check_tensor_sizes
from fusionlang.reference import run as reference_run

#: a compiled specialization's run: feeds by name -> outputs by name
Runner = Callable[[Mapping[str, np.ndarray]], Mapping[str, np.ndarray]]


class Specializer:
    """An ONNX model (path, bytes or ModelProto) compiled per run-time shapes and values.

        model = fusionlang.Specializer("model.onnx")     # symbolic batch dim
        model.run({"x": np.ones((2, 8), np.float32)})     # compiles for batch 2
        model.run({"x": np.ones((5, 8), np.float32)})     # compiles for batch 5
        model.specializations                              # 2

    ``target`` is "c", "cuda" or "reference"; ``rules`` the rule set (default: the target's,
    ``fusionlang.api.default_rules``); ``input_shapes``
    fixes dims the runs need not give. ``capacity`` bounds the cache (least recently
    used specialization evicted first). ``build`` replaces how a specialized graph is
    compiled: graph -> run function.
    """

    def __init__(self, model: Any, *, target: str = "c", rules: Any = None,
                 input_shapes: Mapping[str, Sequence[int]] | None = None, capacity: int = 8,
                 build: Callable[[Graph], Runner] | None = None):
        # imported on use, as fusionlang.api does: only importing needs onnx
        from fusionlang.frontend.onnx_import import declared_inputs, load_model

        if capacity < 1:
            raise InputError(f"capacity must be at least 1, got {capacity}")
        self.model, self.label = load_model(model)
        #: graph inputs a run must feed, in model order
        self.inputs = declared_inputs(self.model)
        self.capacity = capacity
        self.input_shapes = dict(input_shapes or {})
        self._build = build or _default_build(target, rules)
        #: inputs whose run-time shapes, and inputs whose run-time values, the import needs
        self.shape_inputs: set[str] = set()
        self.value_inputs: set[str] = set()
        #: compiles done, and runs answered from the cache
        self.specializations = 0
        self.hits = 0
        self._cache: OrderedDict[tuple, tuple[Graph, Runner]] = OrderedDict()

    def run(self, feeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Outputs by name for ``feeds`` (every graph input by name), compiling first when
        this run's shapes and values have no specialization in the cache."""
        feeds = {name: np.asarray(value) for name, value in feeds.items()}
        missing = [name for name in self.inputs if name not in feeds]
        if missing:
            raise InputError(f"missing inputs: {', '.join(missing)} (the model takes {', '.join(self.inputs)})")
        graph, runner = self.specialization(feeds)
        return dict(runner({name: feeds[name] for name in graph.inputs}))

    def specialization(self, feeds: Mapping[str, np.ndarray]) -> tuple[Graph, Runner]:
        """(graph, run function) specialized on ``feeds``, from the cache or compiled now."""
        key = self._key(feeds)
        if key in self._cache:
            self._cache.move_to_end(key)
            self.hits += 1
            return self._cache[key]
        graph = self._import(feeds)
        # a shape or value fed at run time can size a tensor past the machine's memory,
        # as a declared one can: refused before anything allocates it, as `run` does
        check_tensor_sizes(graph)
        entry = (graph, self._build(graph))
        self.specializations += 1
        self._cache[self._key(feeds)] = entry  # the import may have learned inputs the key needs
        while len(self._cache) > self.capacity:
            self._cache.popitem(last=False)
        return entry

    @property
    def stats(self) -> dict[str, int]:
        """Specializations compiled, cache hits, and specializations held now."""
        return {"specializations": self.specializations, "hits": self.hits, "cached": len(self._cache)}

    def _key(self, feeds: Mapping[str, np.ndarray]) -> tuple:
        shapes = tuple((name, feeds[name].shape) for name in sorted(self.shape_inputs))
        values = tuple((name, feeds[name].dtype.str, feeds[name].shape, feeds[name].tobytes())
                       for name in sorted(self.value_inputs))
        return shapes, values

    def _import(self, feeds: Mapping[str, np.ndarray]) -> Graph:
        return import_bound(self.model, feeds, self.input_shapes, self.shape_inputs, self.value_inputs)


def specialized_graph(model: Any, feeds: Mapping[str, np.ndarray],
                      input_shapes: Mapping[str, Sequence[int]] | None = None
                      ) -> tuple[Graph, set[str], set[str]]:
    """(graph, inputs whose shapes were taken, inputs bound as constants): ``model``
    imported with the shapes and values of ``feeds`` it needs (only those: other feeds
    stay graph inputs of their declared shapes)."""
    shapes: set[str] = set()
    values: set[str] = set()
    graph = import_bound(model, feeds, dict(input_shapes or {}), shapes, values)
    return graph, shapes, values


def import_bound(model: Any, feeds: Mapping[str, np.ndarray], input_shapes: Mapping[str, Sequence[int]],
                 shape_inputs: set[str], value_inputs: set[str]) -> Graph:
    """``model`` imported with the shapes of ``shape_inputs`` and the values of
    ``value_inputs`` taken from ``feeds``. Each RuntimeInputError names inputs to bind
    next: they join the two sets (the caller's, so it learns them) until none is new or
    ``feeds`` lacks one, when the error stands."""
    while True:
        shapes = {**input_shapes, **{name: np.shape(feeds[name]) for name in shape_inputs}}
        values = {name: feeds[name] for name in value_inputs}
        try:
            return from_onnx(model, shapes, constant_inputs=values)
        except RuntimeInputError as exc:
            learned = (set(exc.shapes) - shape_inputs) | (set(exc.values) - value_inputs)
            if not learned or not learned <= set(feeds):
                raise
            shape_inputs |= set(exc.shapes)
            value_inputs |= set(exc.values)


def _default_build(target: str, rules: Any) -> Callable[[Graph], Runner]:
    if target == "reference":
        return lambda graph: (lambda feeds: reference_run(graph, feeds))
    return lambda graph: compile_model(graph, rules, target=target).run
