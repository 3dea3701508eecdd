"""NodeContext: what an ONNX op converter sees of one node, and how it adds to the graph.

The converters (``onnx_ops``) and the driver that calls them (``onnx_import``) both
import this module, so neither imports the other's caller. The context reads and writes
through the driver (the importer object it is given): values, types, constants known at
import time, and typed, folded nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import onnx
from onnx import helper

from fusionlang.errors import FuseError, ModelError, ShapeError, UnsupportedOpError
from fusionlang.ir.types import TensorType, canonical_dtype


def onnx_dtype(elem_type: int, what: str) -> str:
    """The numpy dtype name fusionlang uses for an ONNX element type; ModelError if none."""
    try:
        return canonical_dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, ValueError, TypeError, ShapeError) as exc:
        name = onnx.TensorProto.DataType.Name(elem_type) if elem_type in onnx.TensorProto.DataType.values() \
            else str(elem_type)
        raise ModelError(f"{what} has element type {name}, which fusionlang does not support") from exc


def node_label(node: onnx.NodeProto, index: int) -> str:
    """How messages and provenance ("onnx:LABEL") name the ``index``-th node of a graph:
    its name, or "OpType#index" when it has none."""
    return node.name or f"{node.op_type}#{index}"


@dataclass(frozen=True)
class OnnxSequence:
    """An ONNX sequence known at import time: its tensors, in order, as graph values.

    fusionlang's graphs hold tensors only; a sequence whose length and positions the
    import knows lives in the importer, and the sequence ops become tensor ops on its
    elements. ``dtype`` is the element type (SequenceEmpty declares it with no element);
    ``producer`` names the node that made it, for messages.
    """

    elements: tuple[str, ...]
    dtype: str
    producer: str


class NodeContext:
    """What a converter sees of one ONNX node, and how it adds to the graph."""

    def __init__(self, importer, node: onnx.NodeProto, index: int):
        """``importer``: the driver (onnx_import._Importer) converting the model."""
        self._imp = importer
        self.graph = importer.graph
        self.proto = node
        self.op_type = node.op_type
        self.opset = importer.opset
        self.label = node_label(node, index)
        self.attrs = {a.name: _attr_value(a) for a in node.attribute}

    def count_unrolled(self, nodes: int) -> int:
        """Add ``nodes`` to what unrolling Loops and Scans has added to this import (nested
        ones too); returns the total."""
        self._imp.unrolled_nodes += nodes
        return self._imp.unrolled_nodes

    # ----- reading ----------------------------------------------------------------------
    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def fail(self, message: str, kind: type[FuseError] = ModelError) -> FuseError:
        return kind(f"node {self.label!r} ({self.op_type}): {message}")

    def unsupported(self, form: str) -> UnsupportedOpError:
        """The error for an op form fusionlang does not convert (named like an unknown op)."""
        domain = self.proto.domain if self.proto.domain not in ("", "ai.onnx") else ""
        where = f"domain {domain}" if domain else f"domain ai.onnx, opset {self.opset}"
        return UnsupportedOpError(f"node {self.label!r}: {self.op_type} ({where}) is not supported in this form: {form}")

    @property
    def num_inputs(self) -> int:
        return len(self.proto.input)

    def has_input(self, k: int) -> bool:
        return k < len(self.proto.input) and self.proto.input[k] != ""

    def input(self, k: int) -> str:
        """Graph value of ONNX input k ('' when absent), materializing a pending constant."""
        if not self.has_input(k):
            return ""
        return self._imp.value(self.proto.input[k], self)

    def inputs(self) -> list[str]:
        """Graph values of all inputs; omitted optional ones are '' (trailing ones dropped)."""
        values = [self.input(k) for k in range(self.num_inputs)]
        while values and not values[-1]:
            values.pop()
        return values

    def type(self, k: int) -> TensorType:
        name = self.proto.input[k] if self.has_input(k) else ""
        if not name:
            raise self.fail(f"input {k} is required")
        return self._imp.type_of(name, self)

    def is_const(self, k: int) -> bool:
        """Whether input k is given and known at import time (after folding)."""
        return self.has_input(k) and self._imp.constant_value(self.proto.input[k]) is not None

    def const(self, k: int, what: str) -> np.ndarray:
        """The value of input k, which must be known at import time (after folding)."""
        if not self.has_input(k):
            raise self.fail(f"input {k} ({what}) is required")
        array = self._imp.constant_value(self.proto.input[k])
        if array is None:
            raise self._imp.runtime_value_error(self, k, what)
        return array

    def fed_by_run(self, k: int) -> bool:
        """Whether input k's value comes from graph inputs a run feeds (bound as constants)."""
        return bool(self._imp.graph_inputs_feeding(self.proto.input[k]))

    def is_graph_input(self, k: int) -> bool:
        """Whether input k is a graph input a run feeds, read as it is (not computed from one)."""
        return self.has_input(k) and self._imp.graph_inputs_feeding(self.proto.input[k]) == [self.proto.input[k]]

    def is_sequence(self, k: int) -> bool:
        """Whether ONNX input k holds a sequence (made by an earlier sequence op)."""
        return self.has_input(k) and self.proto.input[k] in self._imp.sequences

    def sequence(self, k: int, what: str) -> OnnxSequence:
        """The sequence ONNX input k holds; ModelError if it is missing or a tensor."""
        if not self.has_input(k):
            raise self.fail(f"input {k} ({what}) is required")
        return self._imp.sequence(self.proto.input[k], self)

    def ints(self, k: int, what: str) -> tuple[int, ...]:
        array = self.const(k, what)
        if array.dtype.kind not in "iu":
            raise self.fail(f"input {k} ({what}) must hold integers, got {array.dtype}")
        return tuple(int(v) for v in array.ravel())

    def scalar(self, k: int, what: str) -> float:
        array = self.const(k, what)
        if array.size != 1:
            raise self.fail(f"input {k} ({what}) must hold one value, got shape {list(array.shape)}")
        return array.ravel()[0].item()

    # ----- outputs ----------------------------------------------------------------------
    @property
    def num_outputs(self) -> int:
        return len(self.proto.output)

    def output(self, k: int) -> str:
        return self.proto.output[k] if k < len(self.proto.output) else ""

    def output_used(self, k: int) -> bool:
        name = self.output(k)
        return bool(name) and self._imp.uses[name] > 0

    def reject_used_outputs(self, first: int, form: str) -> None:
        """Outputs from ``first`` on have no conversion: an error if anything reads them."""
        for k in range(first, self.num_outputs):
            if self.output_used(k):
                raise self.unsupported(f"{form} (output {k}, {self.output(k)!r}, is used)")

    # ----- writing ----------------------------------------------------------------------
    def emit(self, op: str, inputs: Sequence[str], attrs: Mapping[str, Any] | None = None,
             outputs: Sequence[str] | None = None) -> list[str]:
        """Add one typed node (folded at once when its inputs are constant).

        ``outputs`` names its results (ONNX output names, '' for an unnamed one); by
        default the op's first result gets a fresh name. Returns the result names.
        """
        return self._imp.emit(self, op, list(inputs), dict(attrs or {}), outputs)

    def emit1(self, op: str, inputs: Sequence[str], attrs: Mapping[str, Any] | None = None,
              output: str | None = None) -> str:
        return self.emit(op, inputs, attrs, [output if output is not None else ""])[0]

    def emit_output(self, op: str, inputs: Sequence[str], attrs: Mapping[str, Any] | None = None) -> str:
        """Emit the node computing ONNX output 0."""
        return self.emit1(op, inputs, attrs, self.output(0))

    def constant(self, array, dtype: str | None = None) -> str:
        """A new graph constant (fresh name)."""
        array = np.asarray(array, dtype=dtype)
        return self.graph.add_constant(self._imp.fresh("const"), array)

    def set_constant(self, k: int, array) -> None:
        """ONNX output k is a constant known now."""
        if self.output(k):
            self._imp.pending[self.output(k)] = np.asarray(array)

    def set_sequence(self, k: int, sequence: OnnxSequence) -> None:
        """ONNX output k is ``sequence`` (held by the importer, never a graph value)."""
        if self.output(k):
            self._imp.sequences[self.output(k)] = sequence

    def inline(self, body: onnx.GraphProto, inputs: Sequence[str]) -> list[str]:
        """Graph attribute ``body`` converted in place, fed graph values ``inputs``; the
        graph values of its outputs."""
        return self._imp.inline(self, body, list(inputs))

    def alias(self, k: int, value: str) -> None:
        """ONNX output k is the same tensor as graph value ``value`` (no node needed)."""
        self._imp.alias(self.output(k), value, self)

    # ----- nested graphs (onnx_control inlines If, Loop and Scan bodies) ---------------------
    def fresh_name(self, stem: str) -> str:
        """A value name no graph value nor ONNX name of the model takes."""
        return self._imp.fresh(stem)

    def define_constant(self, name: str, array) -> None:
        """ONNX value ``name`` (a fresh name) is a constant known now."""
        self._imp.pending[name] = np.asarray(array)

    def fresh_constant(self, stem: str, array) -> str:
        """A new ONNX value holding ``array``, known at import time; its name."""
        name = self.fresh_name(stem)
        self.define_constant(name, array)
        return name

    def count_reads(self, names: Sequence[str]) -> None:
        """ONNX values ``names`` are read (by inlined nodes), so converters compute them."""
        self._imp.uses.update(name for name in names if name)

    def convert_nested(self, node: onnx.NodeProto) -> None:
        """Convert ``node`` (a renamed copy of a subgraph's node) like a top-level node."""
        self._imp.convert_nested(node)

    def sequence_named(self, name: str) -> OnnxSequence | None:
        """The sequence ONNX value ``name`` holds, or None for a tensor."""
        return self._imp.sequences.get(self._imp.rename.get(name, name))

    def set_empty_optional(self, k: int) -> None:
        """ONNX output k is an optional holding nothing (known at import time)."""
        if self.output(k):
            self._imp.empty_optionals.add(self.output(k))

    def is_empty_optional(self, k: int) -> bool:
        """Whether ONNX input k is absent or an optional known to hold nothing."""
        return not self.has_input(k) or self.is_empty_optional_named(self.proto.input[k])

    def is_empty_optional_named(self, name: str) -> bool:
        """Whether ONNX value ``name`` is an optional known to hold nothing."""
        return self._imp.rename.get(name, name) in self._imp.empty_optionals

    def constant_named(self, name: str) -> np.ndarray | None:
        """The value of ONNX value ``name`` when known at import time, else None."""
        return self._imp.constant_value(name)

    def model_graph(self) -> onnx.GraphProto:
        """The model's main graph (the Gradient op reads the subgraph it differentiates there)."""
        return self._imp.model.graph

    def value_named(self, name: str) -> str:
        """The graph value of ONNX value ``name`` (a pending constant enters the graph)."""
        return self._imp.value(name, self)


def _attr_value(attr: onnx.AttributeProto) -> Any:
    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8", errors="replace") for v in value]
    return value
