"""ONNX import: a ModelProto (or a file) becomes a statically shaped, verified Graph.

The driver reads the model, types the graph inputs, walks the nodes in order and hands
each one to its converter in ``onnx_ops`` through a :class:`NodeContext` (``onnx_context``;
the converters import that, never this driver). Every node a
converter emits is typed by registry inference (value_info in the file is never trusted)
and folded at once when all its inputs are constants, so later converters can read
shapes, axes and pads computed by constant subgraphs. Initializers and ``Constant``
outputs stay plain arrays until a node reads them as data: a shape tensor only ever read
as an attribute never becomes a graph constant.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any, Mapping, Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from fusionlang.errors import FuseError, InputError, ModelError, RuntimeInputError, ShapeError, UnsupportedOpError
from fusionlang.frontend.onnx_context import NodeContext, OnnxSequence, onnx_dtype
from fusionlang.frontend.onnx_control import outer_reads
from fusionlang.frontend.onnx_newops import DOMAIN_CONVERTERS
from fusionlang.frontend.onnx_ops import CONVERTERS
from fusionlang.frontend import onnx_gradient as _onnx_gradient  # noqa: F401  (registers its converter)
from fusionlang.frontend import onnx_quantize as _onnx_quantize  # noqa: F401  (registers its converters)
from fusionlang.ops.evaluate import fold_constants, fold_node
from fusionlang.frontend.unsupported import DEFAULT_DOMAINS, check_supported
from fusionlang.ir.graph import Graph, Node
from fusionlang.ir.types import TensorType, canonical_dtype
from fusionlang.ops.checking import verify_graph
from fusionlang.ops.registry import REGISTRY
from fusionlang.instrument import logger, timed
from fusionlang.stages import IMPORT

#: the ai.onnx opsets whose op forms the converters know
MIN_OPSET, MAX_OPSET = 6, 21
#: the newest opset whose op forms were checked against the converters' (docs/api.md):
#: a model of a later one is refused rather than read with forms that may have changed
NEWEST_KNOWN_OPSET = 28


#: how each API gives what a run knows, for messages
GIVE_SHAPES = ("pass input_shapes={name: [dims...]} (command line: --input-shape NAME=DxD...; `fusionlang run` "
               "also takes it from --input NAME=FILE.npy)")


def from_onnx(model, input_shapes: Mapping[str, Sequence[int]] | None = None,
              constant_inputs: Mapping[str, Any] | None = None) -> Graph:
    """Import an ONNX model (a path, serialized bytes or an ``onnx.ModelProto``).

    Opsets 6 to 21 are read with each op's form for that opset. Newer opsets are read
    with the opset-21 forms: the converted ops have kept their inputs and attributes since
    (up to opset 28, apart from Cast's and CastLike's float8-only ``round_mode``; the
    opset-23 ``precision`` of QuantizeLinear and ``output_dtype`` of DequantizeLinear are read).
    A model of a later opset than 28 is refused (ModelError): its forms are not known yet.
    ``input_shapes`` gives static shapes for graph inputs whose dims are symbolic or
    missing (it may also override declared dims). ``constant_inputs`` binds graph inputs to
    values (name -> array) that the graph holds as constants: what a model feeds as axes,
    pads, shape or repeats must be known to compile it. A model that needs shapes or values
    it was not given raises RuntimeInputError (a ModelError) naming the inputs and how to
    give them; ``fusionlang.Specializer`` gives both from each run's feeds. Raises
    ModelError for unreadable models and unsupported forms, UnsupportedOpError for ops without a conversion, and
    ShapeError when shapes do not fit; each names the node involved. Every op type without
    a conversion is named in one UnsupportedOpError, before anything is converted.
    """
    with timed(IMPORT, "read model"):
        proto, label = load_model(model)
    graph = _Importer(proto, label, dict(input_shapes or {}), dict(constant_inputs or {})).run()
    logger(IMPORT).info("%s: %d nodes, %d inputs, %d outputs", label, len(graph.nodes), len(graph.inputs),
                        len(graph.outputs))
    return graph


def load_model(model) -> tuple[onnx.ModelProto, str]:
    """The ModelProto and a label for messages; ModelError if it cannot be read."""
    if isinstance(model, onnx.ModelProto):
        label = model.graph.name or "<ModelProto>"
    elif isinstance(model, (bytes, bytearray)):
        label = "<bytes>"
        model = _parse(bytes(model), label)
    elif isinstance(model, (str, os.PathLike)):
        label = os.fspath(model)
        try:
            # onnx.load also resolves external tensor data stored beside the file
            model = onnx.load(label)
        except OSError as exc:
            raise ModelError(f"cannot read model {label!r}: {exc.strerror or exc}") from exc
        except Exception as exc:  # protobuf raises its own DecodeError family
            raise ModelError(f"cannot read model {label!r}: not a valid ONNX file ({_describe(exc)})") from exc
    else:
        raise ModelError(f"cannot read model: expected a path, bytes or onnx.ModelProto, got {type(model).__name__}")
    if not model.HasField("graph"):
        raise ModelError(f"cannot read model {label!r}: it contains no graph (truncated or not an ONNX model?)")
    return model, label


def declared_inputs(model: onnx.ModelProto) -> list[str]:
    """The graph inputs a run feeds: declared inputs that no initializer defaults."""
    initialized = {t.name for t in model.graph.initializer}
    return [vi.name for vi in model.graph.input if vi.name not in initialized]


def _parse(data: bytes, label: str) -> onnx.ModelProto:
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as exc:
        raise ModelError(f"cannot read model {label!r}: not a valid ONNX file ({_describe(exc)})") from exc
    return proto


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _Importer:
    def __init__(self, model: onnx.ModelProto, label: str, input_shapes: dict[str, Sequence[int]],
                 constant_inputs: dict[str, Any] | None = None):
        self.model = model
        self.label = label
        self.input_shapes = input_shapes
        self.constant_inputs = constant_inputs or {}
        self.graph = Graph(model.graph.name or "model")
        self.opset = _default_opset(model, label)
        #: ONNX value -> graph value, for outputs of removed Identity/Dropout nodes
        self.rename: dict[str, str] = {}
        #: constants (initializers, Constant outputs, folded shapes) not yet in the graph
        self.pending: dict[str, np.ndarray] = {}
        self.uses: Counter[str] = Counter()
        #: ONNX sequence values, known element by element at import time (never graph values)
        self.sequences: dict[str, OnnxSequence] = {}
        #: ONNX optional values known at import time to hold nothing (Optional with no input)
        self.empty_optionals: set[str] = set()
        #: renamed value -> the inlined subgraph node computing it (to trace what runs feed)
        self.nested_producers: dict[str, onnx.NodeProto] = {}
        self.graph_outputs = [v.name for v in model.graph.output]
        #: every name the model uses: new values must not take one a later node defines
        self.reserved: set[str] = set()
        self.node_names: set[str] = set()
        #: nodes every Loop and Scan unrolled so far added, nested ones included
        self.unrolled_nodes = 0

    # ----- driver -----------------------------------------------------------------------
    def run(self) -> Graph:
        g = self.model.graph
        for node in g.node:
            self.reserved.update(node.input)
            self.reserved.update(node.output)
            self.uses.update(v for v in node.input if v)
            self.uses.update(outer_reads(node))  # values read inside If/Loop/Scan bodies
        self.uses.update(self.graph_outputs)
        self.reserved.update(v.name for v in g.input)
        self.reserved.update(t.name for t in g.initializer)
        self.reserved.discard("")

        check_supported(self.model, self.label, self.opset, CONVERTERS, DOMAIN_CONVERTERS)
        with timed(IMPORT, "initializers and inputs"):
            self._read_initializers()
            self._bind_constant_inputs()
            self._add_inputs()
        with timed(IMPORT, "convert nodes"):
            for index, node in enumerate(g.node):
                ctx = NodeContext(self, node, index)
                self._convert(ctx, CONVERTERS)

        for name in self.graph_outputs:
            if name in self.sequences:
                raise UnsupportedOpError(f"graph output {name!r} is a sequence (made by node "
                                         f"{self.sequences[name].producer}); fusionlang's graphs hold tensors "
                                         "only, so a sequence may only live inside the model")
            # outputs alias() kept as real nodes, or inputs and constants: never renamed
            self.graph.outputs.append(self.value(name, None))
        with timed(IMPORT, "fold constants"):
            fold_constants(self.graph)
            self.graph.remove_unused()
        with timed(IMPORT, "verify"):
            verify_graph(self.graph)
        return self.graph

    def _convert(self, ctx: NodeContext, converters) -> None:
        proto = ctx.proto
        # check_supported refused every other op
        if proto.domain in DEFAULT_DOMAINS:
            converter = converters[proto.op_type]
        else:
            converter = DOMAIN_CONVERTERS[proto.domain, proto.op_type]
        try:
            converter(ctx)
        except FuseError as exc:
            if repr(ctx.label) in str(exc):
                raise
            labelled = type(exc)(f"node {ctx.label!r} ({proto.op_type}): {exc}")
            labelled.__dict__.update(exc.__dict__)  # keep what callers read (RuntimeInputError.values)
            raise labelled from exc
        except Exception as exc:  # a malformed attribute or tensor in the file
            raise ModelError(f"node {ctx.label!r} ({proto.op_type}): cannot convert: {_describe(exc)}") from exc
        for out in proto.output:
            if out and self.uses[out] and not self.defines(out):
                raise ModelError(f"node {ctx.label!r} ({proto.op_type}): output {out!r} is used but the "
                                 "conversion does not compute it")

    def convert_nested(self, node: onnx.NodeProto) -> None:
        """Convert a node of an inlined subgraph (onnx_control renamed its values)."""
        if node.domain not in DEFAULT_DOMAINS or node.op_type not in CONVERTERS:
            domain = node.domain if node.domain not in DEFAULT_DOMAINS else "ai.onnx"
            raise UnsupportedOpError(f"node {node.name!r}: {node.op_type} (domain {domain}, opset {self.opset}) "
                                     "inside a subgraph has no conversion")
        self.nested_producers.update((out, node) for out in node.output if out)
        self._convert(NodeContext(self, node, 0), CONVERTERS)

    def inline(self, ctx: NodeContext, body: onnx.GraphProto, inputs: list[str]) -> list[str]:
        """Convert graph attribute ``body`` into the graph, its inputs bound to graph values
        ``inputs``; returns the graph values of its outputs. Names the body defines get fresh
        ones (a body may reuse the model's names); others are the enclosing scope's."""
        if len(body.input) != len(inputs):
            raise ctx.fail(f"graph {body.name!r} takes {len(body.input)} inputs, the op passes {len(inputs)}")
        local = {v.name for v in body.input} | {t.name for t in body.initializer}
        local |= {v for node in body.node for v in node.output if v}
        names = {name: self.fresh(f"{ctx.label}/{name}") for name in sorted(local)}
        for info, value in zip(body.input, inputs):
            self.rename[names[info.name]] = value
        for tensor in body.initializer:
            self.pending[names[tensor.name]] = numpy_helper.to_array(tensor)
        nodes = [_renamed(node, names, f"{ctx.label}/{node.name or f'{node.op_type}#{k}'}")
                 for k, node in enumerate(body.node)]
        for node in nodes:
            self.uses.update(v for v in node.input if v)
            if node.domain not in DEFAULT_DOMAINS or node.op_type not in CONVERTERS:
                raise UnsupportedOpError(f"node {ctx.label!r} ({ctx.op_type}): its graph {body.name!r} uses "
                                         f"{node.op_type}, which fusionlang does not import")
        outputs = [names.get(v.name, v.name) for v in body.output]
        self.uses.update(outputs)
        for k, node in enumerate(nodes):
            self._convert(NodeContext(self, node, k), CONVERTERS)
        return [self.value(name, ctx) for name in outputs]

    # ----- inputs and initializers ------------------------------------------------------
    def _read_initializers(self) -> None:
        for tensor in self.model.graph.initializer:
            try:
                self.pending[tensor.name] = numpy_helper.to_array(tensor)
            except Exception as exc:
                raise ModelError(f"cannot read initializer {tensor.name!r} of model {self.label!r}: "
                                 f"{_describe(exc)}") from exc

    def _bind_constant_inputs(self) -> None:
        """Graph inputs given values become pending constants, like initializers."""
        declared = {vi.name: vi for vi in self.model.graph.input if vi.name not in self.pending}
        for name, value in self.constant_inputs.items():
            if name not in declared:
                raise InputError(f"constant_inputs names {name!r}, which is not a graph input of {self.label!r} "
                                 f"(inputs: {', '.join(sorted(declared)) or 'none'})")
            self.pending[name] = _bound_value(declared[name], value)

    def _add_inputs(self) -> None:
        declared = [vi for vi in self.model.graph.input if vi.name not in self.pending]
        names = {vi.name for vi in declared}
        stray = sorted(set(self.input_shapes) - names - set(self.constant_inputs))
        if stray:
            raise ModelError(f"input_shapes names {stray[0]!r}, which is not a graph input of {self.label!r} "
                             f"(inputs: {', '.join(sorted(names)) or 'none'})")
        problems = []
        for vi in declared:
            if vi.type.HasField("sequence_type"):
                raise UnsupportedOpError(f"graph input {vi.name!r} is a sequence{self._readers(vi.name)}; "
                                         "fusionlang's graphs hold tensors only, so a sequence must be built "
                                         "inside the model (SequenceConstruct, SequenceEmpty, SplitToSequence)")
            if vi.type.HasField("optional_type"):
                raise UnsupportedOpError(f"graph input {vi.name!r} is an optional{self._readers(vi.name)}; fusionlang "
                                         "resolves optionals at import time, so an optional must be built inside "
                                         "the model (Optional)")
            if not vi.type.HasField("tensor_type"):
                raise ModelError(f"graph input {vi.name!r} is not a tensor ({vi.type.WhichOneof('value')})")
            tensor_type = vi.type.tensor_type
            dtype = onnx_dtype(tensor_type.elem_type, f"graph input {vi.name!r}")
            dims = list(tensor_type.shape.dim) if tensor_type.HasField("shape") else None
            given = self.input_shapes.get(vi.name)
            if given is not None:
                shape = tuple(int(d) for d in given)
                if dims is not None and len(dims) != len(shape):
                    raise ModelError(f"input_shapes gives {vi.name!r} rank {len(shape)}, but the model declares "
                                     f"rank {len(dims)}")
            elif dims is None:
                problems.append(f"input {vi.name!r} has no declared shape")
                continue
            else:
                unknown = [f"dim {k} ({d.dim_param!r})" if d.dim_param else f"dim {k}"
                           for k, d in enumerate(dims) if not d.HasField("dim_value")]
                if unknown:
                    problems.append(f"input {vi.name!r} {', '.join(unknown)}")
                    continue
                shape = tuple(d.dim_value for d in dims)
            self.graph.add_input(vi.name, TensorType(shape, dtype))
        if problems:
            raise RuntimeInputError(f"model {self.label!r} has inputs whose shapes only a run knows: "
                                    f"{'; '.join(problems)}; {GIVE_SHAPES}",
                                    shapes=[vi.name for vi in declared if vi.name not in self.graph.types])

    def runtime_value_error(self, ctx: NodeContext, k: int, what: str) -> FuseError:
        """The error for input k of ``ctx``, which must be a constant but is not: a
        RuntimeInputError naming the graph inputs its value comes from, when it has any."""
        name = ctx.proto.input[k]
        sources = self.graph_inputs_feeding(name)
        if not sources:
            return ctx.fail(f"input {k} ({what}) must be a constant, but {name!r} is computed at run time")
        listed = ", ".join(repr(s) for s in sources)
        binding = ", ".join(f"{s!r}: array" for s in sources)
        files = " ".join(f"--input {s}=FILE.npy" for s in sources)
        return RuntimeInputError(
            f"node {ctx.label!r} ({ctx.op_type}): input {k} ({what}) comes from graph input {listed}, whose value "
            f"only a run knows (fusionlang compiles it as a constant): give it with constant_inputs={{{binding}}} "
            f"in fusionlang.from_onnx, run the model through fusionlang.Specializer (as the ONNX backend does), "
            f"or `fusionlang run MODEL {files}`", values=sources)

    def _readers(self, name: str) -> str:
        """', read by node 'n' (Op)' for the first node reading ONNX value ``name``."""
        for index, node in enumerate(self.model.graph.node):
            if name in node.input:
                return f", read by node {node.name or f'{node.op_type}#{index}'!r} ({node.op_type})"
        return ""

    def graph_inputs_feeding(self, name: str) -> list[str]:
        """The graph inputs (not initializers) ONNX value ``name`` is computed from."""
        producers = {out: node for node in self.model.graph.node for out in node.output if out}
        producers.update(self.nested_producers)
        inputs = {vi.name for vi in self.model.graph.input} - {t.name for t in self.model.graph.initializer}
        found, seen, todo = [], set(), [name]
        while todo:
            value = todo.pop()
            if value in seen or not value:
                continue
            seen.add(value)
            if value in inputs:
                found.append(value)
            elif value in producers:
                todo.extend(producers[value].input)
        return sorted(found)

    # ----- values -----------------------------------------------------------------------
    def defines(self, name: str) -> bool:
        return name in self.rename or name in self.pending or name in self.graph.types or name in self.sequences \
            or name in self.empty_optionals

    def sequence(self, name: str, ctx: NodeContext) -> OnnxSequence:
        """The sequence ONNX value ``name`` holds; ModelError if it is a tensor or undefined."""
        if name in self.sequences:
            return self.sequences[name]
        if self.defines(name):
            raise ctx.fail(f"reads {name!r} as a sequence, but it is a tensor")
        raise ctx.fail(f"reads {name!r}, which no earlier node, graph input or initializer defines")

    def value(self, name: str, ctx: NodeContext | None) -> str:
        """The graph value of ONNX value ``name``; pending constants enter the graph here."""
        name = self.rename.get(name, name)
        if name in self.graph.types:
            return name
        if name in self.sequences:
            where = f"node {ctx.label!r} ({ctx.op_type})" if ctx else "graph output"
            raise UnsupportedOpError(f"{where} reads sequence {name!r} (made by node {self.sequences[name].producer}) "
                                     "as a tensor; fusionlang converts a sequence only through the sequence ops "
                                     "(SequenceAt, SequenceLength, ConcatFromSequence, ...)")
        if name in self.empty_optionals:
            where = f"node {ctx.label!r} ({ctx.op_type})" if ctx else "graph output"
            raise UnsupportedOpError(f"{where} reads {name!r}, an empty optional, as a tensor; fusionlang "
                                     "converts an optional only through OptionalHasElement and OptionalGetElement")
        if name in self.pending:
            array = self.pending.pop(name)
            try:
                canonical_dtype(array.dtype)
            except ShapeError as exc:
                raise ModelError(f"constant {name!r} has dtype {array.dtype}, which fusionlang does not "
                                 "support as a tensor") from exc
            return self.graph.add_constant(name, array)
        where = f"node {ctx.label!r} ({ctx.op_type}) reads" if ctx else "graph output"
        raise ModelError(f"{where} {name!r}, which no earlier node, graph input or initializer defines")

    def type_of(self, name: str, ctx: NodeContext) -> TensorType:
        name = self.rename.get(name, name)
        if name in self.pending:
            array = self.pending[name]
            return TensorType(array.shape, canonical_dtype(array.dtype))
        return self.graph.types[self.value(name, ctx)]

    def constant_value(self, name: str) -> np.ndarray | None:
        name = self.rename.get(name, name)
        if name in self.pending:
            return self.pending[name]
        return self.graph.constants.get(name)

    def alias(self, name: str, value: str, ctx: NodeContext) -> None:
        if not name:
            return
        if name in self.graph_outputs:
            # keep the ONNX output name visible: a graph output gets a real node
            ctx.emit("identity", [value], {}, [name])
            return
        self.rename[name] = self.rename.get(value, value)

    def fresh(self, stem: str) -> str:
        # every name the graph holds is an ONNX name (reserved), a node name, or a value's
        candidate = self.graph.fresh_name(stem, lambda name: name in self.reserved or name in self.node_names
                                          or name in self.graph.types)
        self.reserved.add(candidate)
        self.node_names.add(candidate)  # nor may a later ONNX node take it as its name
        return candidate

    def _node_name(self, label: str) -> str:
        name = label if label not in self.node_names else self.fresh(label)
        self.node_names.add(name)
        return name

    def emit(self, ctx: NodeContext, op: str, inputs: list[str], attrs: dict[str, Any],
             outputs: Sequence[str] | None) -> list[str]:
        if op not in REGISTRY:
            raise UnsupportedOpError(f"node {ctx.label!r}: {ctx.op_type} (domain ai.onnx, opset {self.opset}) "
                                     f"converts to fusionlang op {op!r}, which the op registry lacks")
        names = list(outputs) if outputs is not None else [""]
        # the node computing the ONNX node's outputs carries its name; helpers get derived names
        writes_onnx_output = any(names)
        name = self._node_name(ctx.label) if writes_onnx_output else self.fresh(f"{ctx.label}/{op}")
        opdef = REGISTRY.get(op)
        # "" marks an omitted optional input; a required one omitted would reach inference as None
        for k, value in enumerate(inputs[:opdef.min_inputs]):
            if not value:
                label = opdef.inputs[k] if k < len(opdef.inputs) else f"#{k}"
                raise ctx.fail(f"{op} needs its input {k} ({label}), which the model leaves out")
        in_types = [self.graph.types[v] if v else None for v in inputs]
        in_values = [self.graph.constants.get(v) for v in inputs]
        types = REGISTRY.infer(op, name, attrs, in_types, in_values)
        if len(names) > len(types):
            raise ctx.fail(f"{op} computes {len(types)} results, the model expects {len(names)}")
        names = [n or self.fresh(f"{ctx.label}/{op}") for n in names]
        node = Node(name, op, list(inputs), names, opdef.normalize_attrs(attrs, f"node {name!r}"),
                    (f"onnx:{ctx.label}",))
        self.graph.add_node(node, types[:len(names)])
        if fold_node(self.graph, node):
            self.graph.nodes.pop()
        return names


def _renamed(node: onnx.NodeProto, names: dict[str, str], label: str) -> onnx.NodeProto:
    """A copy of ``node`` reading and writing the names ``names`` maps, called ``label``."""
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    copy.name = label
    copy.input[:] = [names.get(v, v) for v in node.input]
    copy.output[:] = [names.get(v, v) for v in node.output]
    return copy


def _bound_value(info: onnx.ValueInfoProto, value: Any) -> np.ndarray:
    """``value`` as graph input ``info``'s declared dtype; InputError if its shape disagrees."""
    array = np.asarray(value)
    tensor_type = info.type.tensor_type
    dtype = onnx_dtype(tensor_type.elem_type, f"graph input {info.name!r}")
    if array.dtype != np.dtype(dtype):
        raise InputError(f"constant_inputs[{info.name!r}] has dtype {array.dtype}, the model declares {dtype}")
    if tensor_type.HasField("shape"):
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim]
        if len(dims) != array.ndim or any(d is not None and d != n for d, n in zip(dims, array.shape)):
            shown = ["?" if d is None else d for d in dims]
            raise InputError(f"constant_inputs[{info.name!r}] has shape {list(array.shape)}, the model declares "
                             f"{shown}")
    return array


def _default_opset(model: onnx.ModelProto, label: str) -> int:
    versions = [entry.version for entry in model.opset_import if entry.domain in DEFAULT_DOMAINS]
    if not versions:
        raise ModelError(f"model {label!r} imports no ai.onnx opset")
    opset = max(versions)
    if opset < MIN_OPSET:
        raise ModelError(f"model {label!r} uses ai.onnx opset {opset}; fusionlang reads opset {MIN_OPSET} "
                         "and later (convert it with onnx.version_converter)")
    if opset > NEWEST_KNOWN_OPSET:
        raise ModelError(f"model {label!r} uses ai.onnx opset {opset}; fusionlang knows the ops' forms up to opset "
                         f"{NEWEST_KNOWN_OPSET}, and a newer opset may change them (export with opset "
                         f"{NEWEST_KNOWN_OPSET} or older)")
    return opset
